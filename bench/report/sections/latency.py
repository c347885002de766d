"""L1-L8: latency of single operations on one worker (Active Threads Table 5, C-Threads Fig 5-1,
Presto Fig 3), weft beside pthreads, Boost.Fiber, Go and (L2; their locks: L4, L5) the task systems."""
import re
import statistics

from core import section, table, fmt_ns, plt, cell

ROWS = [("L1", "create, not yet run"), ("L1+stack", "create + bind stack (weft)"),
        ("L2", "null thread: create+run+join"), ("L3", "switch (per yield / hand-off)"),
        ("L4_mutex", "mutex lock+unlock"), ("L4_sem", "semaphore signal+wait"),
        ("L5_trylock", "trylock (succeeds) + unlock"), ("L5_trywait", "trywait (succeeds) + signal"),
        ("L6_mutex_pingpong", "mutex ping-pong, per round"),
        ("L6_sem_pingpong", "semaphore ping-pong, per round"),
        ("L7_cond_pingpong", "condition ping-pong, per round"),
        ("L8", "create+reclaim, never started")]
LIBS = [("weft", "weft"), ("pthreads", "pthreads"), ("boost_fiber", "Boost.Fiber"),
        ("boost_fiber_pooled", "Boost.Fiber pooled"), ("go", "Go (1 P)"),
        ("openmp_tasks", "OpenMP task†"), ("tbb_task_group", "TBB task_group†")]
GO_ROWS = {"L1Create": "L1", "L2NullThread": "L2", "L3Switch": "L3", "L8CreateReclaim": "L8",
           "L4Mutex": "L4_mutex", "L4Sem": "L4_sem", "L5TryLock": "L5_trylock",
           "L5TryWait": "L5_trywait", "L6MutexPingPong": "L6_mutex_pingpong",
           "L6SemPingPong": "L6_sem_pingpong", "L7CondPingPong": "L7_cond_pingpong"}


def gbench(doc):
    """{(row, lib): (median ns, cv %)} from Google Benchmark JSON (median/cv aggregates)."""
    agg = {}
    for b in (doc or {}).get("benchmarks", []):
        if b.get("run_type") != "aggregate":
            continue
        run = b["run_name"].replace("/manual_time", "")
        name, lib = run.split("/", 1)[0], run.rsplit("/", 1)[1]
        row = name.split("_", 1)[0]
        if row in ("L4", "L5", "L6", "L7"):
            row = name
        if run.startswith("L1_create/weft+bind_stack"):
            row, lib = "L1+stack", "weft"
        lib = lib.split("(")[0]
        agg.setdefault((row, lib), {})[b["aggregate_name"]] = b["real_time"]
    out = {}
    for key, a in agg.items():
        if "median" in a:
            cv = a.get("cv")
            if cv is None and a.get("mean"):
                cv = a.get("stddev", 0) / a["mean"]
            out[key] = (a["median"], 100 * (cv or 0))
    return out


def go_bench(text, names):
    """{(row, P): (median ns, cv %)} from `go test -bench` output."""
    runs = {}
    for line in (text or "").splitlines():
        m = re.match(r"^Benchmark(\w+?)(-(\d+))?\s+\d+\s+([\d.]+) ns/op", line)
        if m and m.group(1) in names:
            runs.setdefault((names[m.group(1)], int(m.group(3) or 1)), []).append(float(m.group(4)))
    out = {}
    for k, v in runs.items():
        cv = statistics.stdev(v) / statistics.mean(v) if len(v) > 1 else 0
        out[k] = (statistics.median(v), 100 * cv, min(v), max(v))
    return out


@section("latency", "L1-L8: latency of single operations (one worker)",
         inputs=("latency.json", "go_latency.txt", "tasks.json"), order=10)
def latency(rep):
    cells = gbench(rep.load("latency.json"))
    for (row, p), v in go_bench(rep.text("go_latency.txt"), GO_ROWS).items():
        if p == 1:
            cells[(row, "go")] = v[:2]
    spin = {}  # tbb::spin_mutex's lock rows: the text below the table
    for r in (rep.load("tasks.json") or {}).get("results", []):
        if r["test"] in ("L2", "L4_mutex", "L5_trylock"):
            v = (r["ns_per_thread"], 100 * (r["max_s"] - r["min_s"]) / 2 / r["median_s"])
            if r["lib"] == "tbb_spin_mutex":
                spin[r["test"]] = v
            else:
                cells[(r["test"], r["lib"])] = v
    ir = {}
    for r in (rep.load("icount.json") or {}).get("rows", []):
        if r.get("instructions_per_op") is not None:
            ir[(r["row"], r["lib"])] = r["instructions_per_op"]
    libs = [l for l in LIBS if any(k[1] == l[0] for k in cells)]
    rows = []
    for row, what in ROWS:
        line = [row, what] + ["%s ±%.0f%%" % (fmt_ns(cells[(row, l)][0]), cells[(row, l)][1])
                              if (row, l) in cells else "-" for l, _ in libs]
        line.append("%.0f" % ir[(row, "weft")] if (row, "weft") in ir else "")
        rows.append(line)
    md = table(["row", "operation"] + [h for _, h in libs] + ["weft instr."], rows)
    md += ("\nMedian per operation ± coefficient of variation (Google Benchmark repetitions; Go: "
           "`go test -bench -count`). † task systems without stacks: a task runs to completion and "
           "cannot block, so of the thread rows only L2 (spawn + wait of an empty task) applies; "
           "their L4_mutex and L5_trylock cells are the systems' own locks, taken on the main "
           "thread: OpenMP's `omp_lock_t` (libgomp) and oneTBB's `tbb::mutex` (which, as weft's, "
           "puts a waiting thread to sleep)%s. L8: no library here "
           "can delete a thread that never ran: a batch of unstarted threads is created, then each "
           "runs an empty body and is reclaimed (pthreads' L8 = L2). Instruction counts: "
           "callgrind, user mode. Definitions: bench/README.md.\n") % (
               "; oneTBB's `tbb::spin_mutex`, which never blocks a thread: %s" % ", ".join(
                   "%s %s ±%.0f%%" % (k, fmt_ns(v[0]), v[1]) for k, v in sorted(spin.items()))
               if spin else "")
    missing = [h for l, h in LIBS if l not in [x for x, _ in libs]]
    if missing:
        md += "\nNo measurement in this run for: %s (see the skipped baselines above).\n" % ", ".join(missing)

    # Figure: grouped bars per row, log scale (Active Threads Table 5 as a picture).
    p = plt()
    fig, ax = p.subplots(figsize=(12, 4.5))
    width = 0.8 / max(1, len(libs))
    for i, (l, h) in enumerate(libs):
        xs, ys, errs = [], [], []
        for j, (row, _) in enumerate(ROWS):
            if (row, l) in cells:
                xs.append(j + i * width)
                ys.append(cells[(row, l)][0])
                errs.append(cells[(row, l)][0] * cells[(row, l)][1] / 100)
        if xs:
            ax.bar(xs, ys, width, yerr=errs, label=h, capsize=2)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ROWS))])
    ax.set_xticklabels([r for r, _ in ROWS], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time per operation (ns, log)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=4)
    ax.set_title("L1-L8 latency, one worker (cf. Active Threads Table 5); %s; bars: median, "
                 "whiskers: ±CV" % rep.machine_line(), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "latency", "L1-L8 latency")

    for row, lib, name in (("L2", "pthreads", "pthreads"), ("L2", "boost_fiber", "Boost.Fiber"),
                           ("L2", "go", "Go"), ("L3", "pthreads", "pthreads"),
                           ("L3", "go", "Go"), ("L2", "tbb_task_group", "TBB task_group"),
                           ("L4_mutex", "openmp_tasks", "OpenMP omp_lock_t"),
                           ("L4_mutex", "tbb_task_group", "oneTBB tbb::mutex"),
                           ("L5_trylock", "openmp_tasks", "OpenMP omp_test_lock"),
                           ("L5_trylock", "tbb_task_group", "oneTBB tbb::mutex::try_lock")):
        if (row, "weft") in cells and (row, lib) in cells:
            rep.headlines.append("%s: weft %s vs %s %s (%.1fx)" % (
                row, fmt_ns(cells[(row, "weft")][0]), name, fmt_ns(cells[(row, lib)][0]),
                cells[(row, lib)][0] / cells[(row, "weft")][0]))
    return md


@section("memory", "Memory per thread and the machine's parallelism",
         inputs=("memory.json", "calibrate.json"), order=15)
def memory(rep):
    md = ""
    mem = rep.load("memory.json")
    if mem:
        md += ("- memory per created-but-unstarted weft thread: **%.0f bytes** (VmRSS delta over "
               "%d threads, nvps=1; the stack is bound when a thread first runs)\n"
               % (mem["bytes_per_thread"], mem["threads"]))
    cal = rep.load("calibrate.json")
    if cal:
        pts = cal.get("points", [])
        md += ("- machine parallelism (independent work on P pinned kernel threads, the ceiling "
               "for every speedup below): %s\n" % ", ".join(
                   "P=%s: %.2fx" % (q.get("p"), q.get("speedup", 0))
                   for q in pts))
    return md or None


@section("l3_sites", "L3 over call sites: how much a switch depends on where it is called from",
         inputs=("L3_sites.json",), order=11)
def l3_sites(rep):
    doc = rep.load("L3_sites.json")
    res = doc.get("results", [])
    if not res:
        return None
    rows = [[r["site"], cell(r["median_ns"], r["min_ns"], r["max_ns"])] for r in res]
    md = table(["call site", "ns per switch"], rows)
    cfg = doc.get("config", {})
    md += ("\nweft only, one VP: L3's two-thread yield loop (%s yields of the benchmark thread "
           "per run, %s runs of each site, the sites interleaved). Cells: median ± half the "
           "min..max range over the median. `flat+K`: the loop starts K bytes past a 64-byte "
           "boundary; `fnptr`: weft_yield through a function pointer; `depth4`: the benchmark "
           "thread yields four calls deep (the partner from its loop); `depth4_both`: both do. "
           "The depth rows price the return-stack predictor (docs/design.md, \"Context "
           "switch\"): what a thread that blocks inside calls pays when it returns from them.\n"
           % (cfg.get("n", "?"), cfg.get("reps", "?")))
    med = {r["site"]: r["median_ns"] for r in res}
    flat = [v for k, v in med.items() if k.startswith("flat") or k == "fnptr"]
    if flat:
        lo, hi = min(flat), max(flat)
        line = "L3 sites: the flat loop at 4 alignments and through a pointer %s to %s a switch" % (
            fmt_ns(lo), fmt_ns(hi))
        if "depth4" in med and "depth4_both" in med:
            line += "; four calls deep on one side %s, on both %s" % (
                fmt_ns(med["depth4"]), fmt_ns(med["depth4_both"]))
        rep.headlines.append(line)
    return md
