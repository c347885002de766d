"""T1, T2, T3, T4, T5: thread-management throughput as processors are added (FastThreads
Fig 3.1-3.3, Presto Fig 3), weft beside pthreads, Boost.Fiber, Go and the task systems."""
from core import section, table, fmt_ns, cell, plt, shade_oversub
from latency import go_bench

TITLE = {"T1": "create, start and finish null threads (chains; FastThreads Fig 3.1, 3.2)",
         "T2": "T1 with uniform user work per thread (FastThreads Fig 3.3)",
         "T4": "create + reclaim unstarted threads, P workers (Presto Fig 3)",
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


@section("sweep", "T1-T5: thread management as processors are added",
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
        md += ("\nT2's user work: uniform on [0, %g µs), mean %g µs: FastThreads' 300 µs scaled by "
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
        # weft's runtime counters over the same timed runs (weft_debug_stats): steals by
        # idle VPs and VP sleeps per run, and process CPU time over elapsed time
        wc = sorted((r for r in sw.get("results", []) if r.get("lib") == "weft" and
                     r.get("test") == test and (r.get("weft_steals_per_run") or 0) >= 0),
                    key=lambda r: r["P"])
        if wc:
            md += ("\nweft per timed run: " + "; ".join(
                "P = %d: %.0f steals, %.0f VP sleeps, CPU/elapsed %.2f" % (
                    r["P"], r["weft_steals_per_run"], r.get("weft_sleeps_per_run") or 0,
                    r.get("cpu_per_wall") or 0) for r in wc) + ".\n")

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
    md += t3(rep, sw, cores)
    if (sw.get("config") or {}).get("boost_fiber"):
        md += "\nBoost.Fiber: %s; not run for T2.\n" % sw["config"]["boost_fiber"]
    return md


def eq31(r, q):
    """FastThreads Eq. 3.1: expected queues examined by an idle processor to find one of r
    ready threads spread at random over q queues."""
    tot = q + sum(i * (q - i) ** (j - 1) * (q - i + 1) ** (r - j)
                  for j in range(1, r + 1) for i in range(1, q))
    return tot / q ** r


def t3(rep, sw, cores):
    """T3: latency per thread vs the number of runnable threads (FastThreads Fig 3.4)."""
    rs = [r for r in sw.get("results", []) if r["test"] == "T3"]
    if not rs:
        return ""
    ps = sorted({r["P"] for r in rs})
    ks = sorted({r["K"] for r in rs})
    n = rs[0]["threads"]
    md = ("\n### T3: latency per thread vs the number of runnable threads (FastThreads Fig 3.4, Eq. 3.1)\n\n"
          "weft only. T1's chains (each thread creates its successor and finishes), K of them "
          "on P VPs, %d threads in all; K is the parallelism (threads runnable at once). "
          "*Latency* is FastThreads' thread cost: elapsed × min(K, P) / threads, the time one busy "
          "processor spends per thread (with K < P only K processors have work; with K ≥ P "
          "it is create + finish + start of the next). *ns/thread* is elapsed / threads. "
          "Median ± spread (min..max) of the runs. *E(K, P)*: Eq. 3.1, the queues an idle "
          "processor examines to find one of K ready threads spread over P queues (the paper's "
          "explanation of Fig 3.4's spike at K ≈ P).\n\n" % n)
    rows = []
    for k in ks:
        line = [str(k)]
        for p in ps:
            r = [x for x in rs if x["P"] == p and x["K"] == k]
            if not r:
                line += ["-", "-"]
                continue
            r = r[0]
            line.append(cell(r["latency_ns"], r["latency_min_ns"], r["latency_max_ns"]))
            line.append(cell(r["ns_per_thread"], r["min_s"] * 1e9 / n, r["max_s"] * 1e9 / n))
        line.append(" / ".join("%.3f" % eq31(k, p) for p in ps))
        rows.append(line)
    hdr = ["K (runnable)"]
    for p in ps:
        hdr += ["P=%d latency%s" % (p, " (oversubscribed)" if p > cores else ""), "P=%d ns/thread" % p]
    hdr.append("E(K, P) for P = " + ", ".join(map(str, ps)))
    md += table(hdr, rows)

    p_ = plt()
    fig, (a1, a2) = p_.subplots(1, 2, figsize=(11, 4))
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for i, p in enumerate(ps):
        q = sorted((r for r in rs if r["P"] == p), key=lambda r: r["K"])
        x = [r["K"] for r in q]
        med = [r["latency_ns"] for r in q]
        a1.errorbar(x, med, yerr=[[m - r["latency_min_ns"] for m, r in zip(med, q)],
                                  [r["latency_max_ns"] - m for m, r in zip(med, q)]],
                    marker="o", color=colors[i % 4], capsize=3, label="P = %d" % p)
        a1.axvline(p, color=colors[i % 4], ls=":", lw=0.8)
        a2.plot(x, [r["ns_per_thread"] for r in q], marker="o", color=colors[i % 4],
                label="P = %d" % p)
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xlabel("runnable threads K (parallelism)")
        a.set_xticks(ks)
        a.set_xticklabels([str(k) for k in ks])
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
        a.set_ylim(bottom=0)
    a1.set_ylabel("thread latency (ns): elapsed x min(K,P) / threads")
    a2.set_ylabel("elapsed / threads (ns)")
    a1.set_title("latency per thread (FastThreads Fig 3.4); dotted: K = P", fontsize=8)
    a2.set_title("throughput cost per thread", fontsize=8)
    fig.suptitle("T3: weft thread latency vs parallelism, %d threads per point\n%s; median, "
                 "bars min..max" % (n, rep.machine_line()), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "sweep_T3", "T3 latency per thread vs runnable threads")
    return md
