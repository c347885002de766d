"""T1, T2, T4, T5: thread-management throughput as processors are added (papers/004
Fig 3.1-3.3, 000 Fig 3), weft beside pthreads, Boost.Fiber, Go and the task systems."""
from core import section, table, fmt_ns, cell, plt, shade_oversub
from latency import go_bench

TITLE = {"T1": "create, start and finish null threads (chains; 004 Fig 3.1, 3.2)",
         "T2": "T1 with uniform user work per thread (004 Fig 3.3)",
         "T4": "create + reclaim unstarted threads, P workers (000 Fig 3)",
         "T5": "fork-join, batches of 1000"}
LIBS = [("weft", "weft", "o", "tab:blue"), ("pthreads", "pthreads", "s", "tab:red"),
        ("boost_fiber", "Boost.Fiber", "^", "tab:green"), ("go", "Go", "D", "tab:cyan"),
        ("openmp_tasks", "OpenMP task†", "v", "tab:purple"),
        ("tbb_task_group", "TBB task_group†", "P", "tab:brown")]


def points(rep):
    """[{test, lib, P, oversubscribed, threads, median_s, min_s, max_s}] from every source."""
    pts = []
    for name in ("sweep.json", "tasks.json"):
        for r in (rep.load(name) or {}).get("results", []):
            if r["test"] in TITLE:
                pts.append(r)
    cores = rep.machine.get("cores") or 2
    for (test, p), (med, _cv, lo, hi) in go_bench(rep.text("go_sweep.txt"),
                                                  {"T1Chains": "T1", "T5ForkJoin": "T5"}).items():
        pts.append({"test": test, "lib": "go", "P": p, "oversubscribed": p > cores,
                    "threads": 1, "median_s": med * 1e-9, "min_s": lo * 1e-9, "max_s": hi * 1e-9})
    return pts


def per_thread(r):
    return r["median_s"] * 1e9 / r["threads"], r["min_s"] * 1e9 / r["threads"], r["max_s"] * 1e9 / r["threads"]


@section("sweep", "T1, T2, T4, T5: thread management as processors are added",
         inputs=("sweep.json", "tasks.json", "go_sweep.txt"), order=20)
def sweep(rep):
    pts = points(rep)
    cores = rep.machine.get("cores") or 2
    sw = rep.load("sweep.json") or {}
    md = ("Cells: ns per thread (median ± spread) and, for P > 1, speedup over the same library "
          "at P = 1. Task systems (†) have no stacks: a task cannot block. Thread counts differ "
          "(bench/README.md: pthreads and some Boost.Fiber points use fewer threads), so compare "
          "ns per thread. Go: `go test -bench`, GOMAXPROCS = P, ns/op per goroutine. OpenMP (GCC's "
          "libgomp) runs a task at once in its creator when more than 64 x threads tasks are queued, "
          "so in T5's batches of 1000 most of its 'tasks' are plain calls, especially at P = 1.\n")
    t2 = (sw.get("config") or {}).get("T2")
    if t2:
        md += ("\nT2's user work: uniform on [0, %g µs), mean %g µs: papers/004's 300 µs scaled by "
               "1/%d (bench/sweep/sweep.c says why).\n" % (2 * t2["mean_work_us"], t2["mean_work_us"],
                                                         round(300 / t2["mean_work_us"])))
    for test in ("T1", "T2", "T4", "T5"):
        rs = [r for r in pts if r["test"] == test]
        if not rs:
            continue
        ps = sorted({r["P"] for r in rs})
        libs = [l for l in LIBS if any(r["lib"] == l[0] for r in rs)]
        rows = []
        for p in ps:
            line = ["%d%s" % (p, " (oversubscribed)" if p > cores else "")]
            for lib, *_ in libs:
                r = [x for x in rs if x["lib"] == lib and x["P"] == p]
                one = [x for x in rs if x["lib"] == lib and x["P"] == 1]
                if not r:
                    line.append("-")
                    continue
                med, lo, hi = per_thread(r[0])
                c = cell(med, lo, hi)
                if p > 1 and one:
                    c += " (%.2fx)" % (one[0]["median_s"] / one[0]["threads"] / (r[0]["median_s"] / r[0]["threads"]))
                line.append(c)
            rows.append(line)
        md += "\n### %s: %s\n\n" % (test, TITLE[test])
        md += table(["P"] + [h for _, h, *_ in libs], rows)

        p_ = plt()
        fig, (a1, a2) = p_.subplots(1, 2, figsize=(11, 4))
        for lib, h, mk, col in libs:
            q = sorted((r for r in rs if r["lib"] == lib), key=lambda r: r["P"])
            x = [r["P"] for r in q]
            med = [per_thread(r)[0] * 1e-3 for r in q]  # seconds per 1e6 threads
            lo = [m - per_thread(r)[1] * 1e-3 for m, r in zip(med, q)]
            hi = [per_thread(r)[2] * 1e-3 - m for m, r in zip(med, q)]
            a1.errorbar(x, med, yerr=[lo, hi], marker=mk, color=col, capsize=3, label=h)
            one = [r for r in q if r["P"] == 1]
            if one:
                a2.plot(x, [(one[0]["median_s"] / one[0]["threads"]) / (r["median_s"] / r["threads"])
                            for r in q], marker=mk, color=col, label=h)
        a2.plot(ps, [min(p, cores) for p in ps], ":", color="gray", label="linear (to cores)")
        for a in (a1, a2):
            a.set_xlabel("processors (P)")
            a.set_xticks(ps)
            shade_oversub(a, cores, max(ps))
            a.grid(alpha=0.3)
        a1.set_yscale("log")
        a1.set_ylabel("elapsed time per 1,000,000 threads (s)")
        a2.set_ylabel("speedup vs the same library at P=1")
        a1.legend(fontsize=7)
        a2.legend(fontsize=7)
        fig.suptitle("%s: %s\n%s; median, bars min..max" % (test, TITLE[test], rep.machine_line()),
                     fontsize=9)
        fig.tight_layout()
        md += "\n" + rep.save_fig(fig, "sweep_" + test, "%s elapsed time and speedup" % test)

        w1 = [r for r in rs if r["lib"] == "weft" and r["P"] == 1]
        for lib, name in (("pthreads", "pthreads"), ("go", "Go"), ("tbb_task_group", "TBB"),
                          ("openmp_tasks", "OpenMP")):
            b1 = [r for r in rs if r["lib"] == lib and r["P"] == 1]
            if w1 and b1 and test in ("T1", "T5"):
                rep.headlines.append("%s P=1 per thread: weft %s vs %s %s (%.1fx)" % (
                    test, fmt_ns(per_thread(w1[0])[0]), name, fmt_ns(per_thread(b1[0])[0]),
                    per_thread(b1[0])[0] / per_thread(w1[0])[0]))
    if (sw.get("config") or {}).get("boost_fiber"):
        md += "\nBoost.Fiber: %s; not run for T2.\n" % sw["config"]["boost_fiber"]
    return md
