"""X2: a user-defined scheduler against the built-in default on L2, L3 (latency.json's X2
rows, one VP) and T1, L2, L3 at P = 1, 2 (weft_x2_t1's X2.json); OpenThreads, Active
Threads §5.4."""
from core import section, table, cell, fmt_ns, plt
from latency import gbench

NAMES = {"default": "built-in default (root bundle, inlined)", "example_fifo": "example FIFO "
         "(examples/custom_sched.c, dispatch queues)", "fifo_lazy": "schedlib FIFO, lazy stacks"}


@section("x2", "X2: a user-defined scheduler against the built-in default",
         inputs=("X2.json",), order=70)
def x2(rep):
    lat = gbench(rep.load("latency.json"))
    rows = []
    for row, key in (("L2", "L2"), ("L3", "L3")):
        base = lat.get((key, "weft"))
        for sched, lib in (("default", "weft"), ("example_fifo", "example_fifo"), ("fifo_lazy", "schedlib_fifo_lazy")):
            v = base if sched == "default" else _x2_lat(rep, row, lib)
            if v:
                rows.append([row, NAMES[sched], "%s ±%.0f%%" % (fmt_ns(v[0]), v[1]),
                             "%.2fx" % (v[0] / base[0]) if base else "-"])
    md = ""
    if rows:
        md += "Latency, one VP (Google Benchmark, median ± CV; ratio to the default):\n\n"
        md += table(["row", "scheduler", "time per op", "vs default"], rows)
    doc = rep.load("X2.json")
    allres = doc["results"]
    order = {"T1": 0, "L2": 1, "L3": 2}
    rows = [[r.get("test", "T1"), r["P"], NAMES.get(r["scheduler"], r["scheduler"]),
             cell(r["median_s"] * 1e9 / r["threads"], r["min_s"] * 1e9 / r["threads"], r["max_s"] * 1e9 / r["threads"]),
             "%.2fx" % r["ratio_to_default"]]
            for r in sorted(allres, key=lambda r: (order.get(r.get("test", "T1"), 9), r["P"]))]
    md += ("\nAt P VPs (one process per P, `weft_x2_t1`), ns per operation, median ± spread; time "
           "ratio to the default in the same process. T1: chains of null threads, per thread. L2: "
           "create + join of an empty thread by a thread of the bundle, per pair (at P > 1 the "
           "idle VPs may take the new threads). L3: on each VP a thread of the root bundle "
           "creates two yielding threads of the bundle (the scheduler places them), per switch "
           "of one VP:\n\n")
    md += table(["row", "P", "scheduler", "ns per op", "time vs default"], rows)
    res = [r for r in allres if r.get("test", "T1") == "T1"]
    p_ = plt()
    fig, ax = p_.subplots(figsize=(7, 3.8))
    ps = sorted({r["P"] for r in res})
    for s in ("default", "example_fifo", "fifo_lazy"):
        q = sorted((r for r in res if r["scheduler"] == s), key=lambda r: r["P"])
        ax.errorbar([r["P"] for r in q], [r["median_s"] * 1e9 / r["threads"] for r in q],
                    yerr=[[(r["median_s"] - r["min_s"]) * 1e9 / r["threads"] for r in q],
                          [(r["max_s"] - r["median_s"]) * 1e9 / r["threads"] for r in q]],
                    marker="o", capsize=3, label=NAMES[s])
    ax.set_xticks(ps)
    ax.set_xlabel("processors (P)")
    ax.set_ylabel("ns per thread")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("X2: T1 under a user-defined scheduler; %s" % rep.machine_line(), fontsize=8)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "X2", "X2 user-defined scheduler")
    return md


def _x2_lat(rep, row, lib):
    """(median ns, cv %) of latency.json's X2_<row>_... /<lib> benchmark."""
    want = {"L2": "X2_L2_null_thread", "L3": "X2_L3_switch"}[row]
    agg = {}
    for b in (rep.load("latency.json") or {}).get("benchmarks", []):
        if b.get("run_type") != "aggregate":
            continue
        run = b["run_name"].replace("/manual_time", "")
        if run == "%s/%s" % (want, lib):
            agg[b["aggregate_name"]] = b["real_time"]
    if "median" not in agg:
        return None
    cv = agg.get("cv")
    if cv is None and agg.get("mean"):
        cv = agg.get("stddev", 0) / agg["mean"]
    return agg["median"], 100 * (cv or 0)


X1_COLS = (("hooks compiled in, none installed", "icount.json", "%s"),
           ("hooks compiled out (`-DWEFT_HOOKS=OFF`)", "nohooks/icount.json", "%s"),
           ("one counting callback on every event", "icount.json", "X1_%s_one_callback"))


@section("x1", "X1: cost of the open interfaces (OpenThreads §4.1 Table 1)",
         inputs=("icount.json", "nohooks/icount.json"), order=65)
def x1(rep):
    docs = {name: rep.load(name) for name in ("icount.json", "nohooks/icount.json")}
    ir = {}
    for name, doc in docs.items():
        for r in (doc or {}).get("rows", []):
            if r.get("lib") == "weft" and r.get("instructions_per_op") is not None:
                ir[(name, r["row"])] = r["instructions_per_op"]
    cols = [c for c in X1_COLS if any((c[1], c[2] % row) in ir for row in ("L2", "L3"))]
    if not cols:
        return None
    n = (docs["icount.json"] or docs["nohooks/icount.json"])["n"]
    rows = []
    for row, what in (("L2", "null thread (create, run, join)"), ("L3", "switch (yield between two threads)")):
        base = ir.get(("icount.json", row))
        line = [row, what]
        for _, name, key in cols:
            v = ir.get((name, key % row))
            is_base = name == "icount.json" and key == "%s"
            pct = " (%+.1f%%)" % (100 * (v / base - 1)) if v is not None and base and not is_base else ""
            line.append("-" if v is None else "%g%s" % (v, pct))
        rows.append(line)
    md = ("User-mode instructions per operation, counted by callgrind (`bench/icount.sh`, N = %d vs 2N, "
          "fixed costs cancel; in parentheses: against the normal build). One counting callback: "
          "`weft_hook_push` of a callback that increments a counter on all `WEFT_HOOK_NEVENTS` "
          "events (`weft_icount --mode l2|l3 --n N --hooked`); with it every thread takes the general paths.\n\n" % n)
    md += table(["row", "operation"] + [c[0] for c in cols], rows)
    if not docs["nohooks/icount.json"]:
        md += ("\nThe hooks-compiled-out column was not measured in this run: build with "
               "`cmake -S . -B build-release-nohooks -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=ON "
               "-DWEFT_HOOKS=OFF && cmake --build build-release-nohooks --target weft_icount`, then "
               "`ICOUNT_MODES=\"l2 l3\" bench/icount.sh build-release-nohooks OUT` (what `scripts/demo.sh` "
               "does) and put OUT/icount.json in the results directory as `nohooks/icount.json`.\n")

    p = plt()
    fig, ax = p.subplots(figsize=(7, 4))
    width = 0.8 / len(cols)
    for i, (label, name, key) in enumerate(cols):
        xs, ys = [], []
        for j, row in enumerate(("L2", "L3")):
            v = ir.get((name, key % row))
            if v is not None:
                xs.append(j + i * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width, label=label.replace("`", ""))
        for b, y in zip(bars, ys):
            ax.text(b.get_x() + b.get_width() / 2, y, "%g" % y, ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + width * (len(cols) - 1) / 2 for j in range(2)])
    ax.set_xticklabels(["L2 null thread", "L3 switch"])
    ax.set_ylabel("instructions per operation (callgrind)")
    ax.set_title("X1: cost of the event hooks, weft (cf. OpenThreads Table 1) - %s" % rep.machine_line(), fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "X1", "X1: instructions with hooks in, out, and one callback")
    on, off = ir.get(("icount.json", "L3")), ir.get(("nohooks/icount.json", "L3"))
    cb = ir.get(("icount.json", "X1_L3_one_callback"))
    if on and cb:
        rep.headlines.append("X1: an L3 switch is %g instructions with the hooks compiled in and none "
                             "installed%s, %g with one counting callback"
                             % (on, " (%g compiled out)" % off if off else "", cb))
    return md
