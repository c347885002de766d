"""X2: a user-defined scheduler against the built-in default on L2, L3 (latency.json's X2
rows) and T1 (weft_x2_t1's X2.json); papers/003, 001 §5.4."""
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
    res = doc["results"]
    rows = [["T1", r["P"], NAMES.get(r["scheduler"], r["scheduler"]),
             cell(r["median_s"] * 1e9 / r["threads"], r["min_s"] * 1e9 / r["threads"], r["max_s"] * 1e9 / r["threads"]),
             "%.2fx" % r["ratio_to_default"]] for r in res]
    md += "\nT1 (chains of null threads), ns per thread, median ± spread; time ratio to the default in the same process:\n\n"
    md += table(["row", "P", "scheduler", "ns per thread", "time vs default"], rows)
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
