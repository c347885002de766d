"""A3: quicksort over leaf sizes (Active Threads Fig 25-27)."""
from core import section, table, cell, fmt_s, plt


@section("a3", "A3: quicksort of 2,000,000 records over leaf sizes (Active Threads Fig 25-27)",
         inputs=("A3.json",), order=50)
def a3(rep):
    doc = rep.load("A3.json")
    res, cfg = doc["results"], doc["config"]
    cores = rep.machine.get("cores") or 2
    leaves = sorted({r["leaf"] for r in res})
    series = sorted({(r["lib"], r["P"]) for r in res if r["lib"] != "serial"}, key=lambda s: (s[0] != "weft", s))
    ser = {r["leaf"]: r for r in res if r["lib"] == "serial"}

    def get(lib, p, leaf):
        r = [x for x in res if x["lib"] == lib and x["P"] == p and x["leaf"] == leaf]
        return r[0] if r else None

    md = ("%d records of %d bytes, one thread (weft) or task (OpenMP†) per recursive call, %s at "
          "or below the leaf size, partition: %s. Speedup: the true serial version (direct calls, "
          "no synchronization) over the parallel one, same leaf size (Active Threads Fig 26). Every run's "
          "output is checked. Cells: run time, median ± spread; (speedup).\n\n"
          % (cfg["records"], cfg["record_bytes"], cfg["leaf_sort"], cfg["partition"]))
    rows = []
    for leaf in leaves:
        s = ser.get(leaf)
        line = [leaf, "{:,}".format((get("weft", 1, leaf) or s or {}).get("threads", 0)),
                cell(s["median_s"], s["min_s"], s["max_s"], "s") if s else "-"]
        for lib, p in series:
            r = get(lib, p, leaf)
            if not r:
                line.append("-")
                continue
            c = cell(r["median_s"], r["min_s"], r["max_s"], "s")
            if s:
                c += " (%.2fx)" % (s["median_s"] / r["median_s"])
            line.append(c)
        rows.append(line)
    md += table(["leaf", "threads created (weft)", "serial"] +
                ["%s P=%d%s" % ("weft" if l == "weft" else "OpenMP task†", p, " (oversub.)" if p > cores else "")
                 for l, p in series], rows)
    md += ("\nActive Threads created 1,392,931 threads at leaf 5 (its partition and thread structure "
           "are not given in full; ours: median of three, one thread per call, the root included).\n")

    p_ = plt()
    fig, (a1, a2, a3_) = p_.subplots(1, 3, figsize=(14, 4))
    if ser:
        a1.plot(leaves, [ser[l]["median_s"] for l in leaves if l in ser], "k--", marker=".", label="serial")
    for lib, p in series:
        q = [(l, get(lib, p, l)) for l in leaves if get(lib, p, l)]
        a1.errorbar([l for l, _ in q], [r["median_s"] for _, r in q],
                    yerr=[[r["median_s"] - r["min_s"] for _, r in q], [r["max_s"] - r["median_s"] for _, r in q]],
                    marker="o", capsize=2, label="%s P=%d" % (lib, p))
    a1.set_xlabel("leaf size")
    a1.set_ylabel("run time (s)")
    a1.set_title("run time vs leaf size (cf. Active Threads Fig 25 left)", fontsize=9)
    for lib in sorted({l for l, _ in series}):
        ps = sorted({p for l, p in series if l == lib})
        for leaf in leaves:
            if leaf not in ser:
                continue
            sp = [ser[leaf]["median_s"] / get(lib, p, leaf)["median_s"] for p in ps if get(lib, p, leaf)]
            if lib == "weft":
                a2.plot(ps[:len(sp)], sp, marker="o", label="leaf %d" % leaf)
    allp = sorted({p for _, p in series})
    a2.plot(allp, [min(p, cores) for p in allp], ":", color="gray", label="linear")
    a2.set_xticks(allp)
    a2.set_xlabel("processors (P)")
    a2.set_ylabel("speedup over true serial")
    a2.set_title("weft speedup per leaf size (cf. Active Threads Fig 26)", fontsize=9)
    thr = [(l, (get("weft", 1, l) or {}).get("threads")) for l in leaves]
    thr = [(l, t) for l, t in thr if t]
    a3_.plot([l for l, _ in thr], [t for _, t in thr], "o-", color="tab:blue", label="threads created")
    a3_.set_yscale("log")
    a3_.set_xlabel("leaf size")
    a3_.set_ylabel("threads created", color="tab:blue")
    b = a3_.twinx()
    q = [(l, get("weft", max(allp), l)) for l in leaves if get("weft", max(allp), l)]
    b.plot([l for l, _ in q], [r["median_s"] for _, r in q], "s--", color="tab:red")
    b.set_ylabel("weft run time at P=%d (s)" % max(allp), color="tab:red")
    a3_.set_title("threads and run time (cf. Active Threads Fig 27)", fontsize=9)
    for a in (a1, a2, a3_):
        a.grid(alpha=0.3)
    a1.legend(fontsize=7)
    a2.legend(fontsize=6, ncol=2)
    fig.suptitle("A3 quicksort, %d records; %s; median, bars min..max" % (cfg["records"], rep.machine_line()), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "A3", "A3 quicksort")
    best = min((r for r in res if r["lib"] == "weft"), key=lambda r: r["median_s"], default=None)
    if best and best["leaf"] in ser:
        rep.headlines.append("A3 quicksort: best weft run %s (leaf %d, P=%d) vs serial %s at that leaf (%.2fx)" % (
            fmt_s(best["median_s"]), best["leaf"], best["P"], fmt_s(ser[best["leaf"]]["median_s"]),
            ser[best["leaf"]]["median_s"] / best["median_s"]))
    return md


A4_LIBS = [("weft", "weft", "tab:blue"), ("pthreads", "pthreads", "tab:red"),
           ("openmp_tasks", "OpenMP task†", "tab:purple")]


@section("a4", "A4: conservative parallel discrete-event simulation (Active Threads §8.2 Fig 29-30)",
         inputs=("A4.json",), order=60)
def a4(rep):
    doc = rep.load("A4.json")
    res, cfg = doc["results"], doc["config"]
    cores = rep.machine.get("cores") or 2
    lpss = sorted({r["lps_per_thread"] for r in res})
    works = sorted({r["work_us"] for r in res})
    ps = sorted({r["P"] for r in res if r["lib"] != "serial"})
    libs = [l for l in A4_LIBS if any(r["lib"] == l[0] for r in res)]

    def get(lib, lps, w, p=1):
        r = [x for x in res if x["lib"] == lib and x["lps_per_thread"] == lps and x["work_us"] == w
             and (lib == "serial" or x["P"] == p)]
        return r[0] if r else None

    md = ("%d logical processes (stations) in groups of 50, 300 or 600 per thread, the groups in a ring; "
          "%s. Lookahead %g of a mean service time %g; simulated to t = %g. The same model code "
          "(bench/apps/A4_model.h) runs serially (no threads, no locks), over weft and over POSIX "
          "threads (a thread per group, mutex + condition channels, a thread blocks when nothing is "
          "safe to handle), and as OpenMP tasks† (rounds of one non-blocking task per group). Every "
          "run handles exactly the serial run's events (count and checksum checked). Cells: run time, "
          "median ± spread (speedup over serial). On a machine other jobs share, a version with many "
          "kernel threads (pthreads at 50 LPs per thread: 24) gets a larger share of the processors "
          "than the serial run or weft's P VPs (Linux shares CPU time per thread), so it can beat "
          "serial by more than P; read the load average at the top.\n\n"
          % (cfg["lps_total"], cfg["model"], cfg["lookahead"], cfg["service_mean"], cfg["t_end"]))
    rows = []
    for lps in lpss:
        for w in works:
            s = get("serial", lps, w)
            line = [lps, (s or {}).get("threads", ""), "%g" % w, (s or {}).get("events", ""),
                    cell(s["median_s"], s["min_s"], s["max_s"], "s") if s else "-"]
            for lib, _, _ in libs:
                for p in ps:
                    r = get(lib, lps, w, p)
                    c = cell(r["median_s"], r["min_s"], r["max_s"], "s") if r else "-"
                    if r and s:
                        c += " (%.2fx)" % (s["median_s"] / r["median_s"])
                    line.append(c)
            rows.append(line)
    md += table(["LPs/thread", "threads", "event µs", "events", "serial"] +
                ["%s P=%d%s" % (h, p, " (oversub.)" if p > cores else "") for _, h, _ in libs for p in ps], rows)

    p_ = plt()
    fig, axes = p_.subplots(1, len(lpss) + 1, figsize=(4.2 * (len(lpss) + 1), 3.8), squeeze=False)
    pmax = max(ps)
    for i, lps in enumerate(lpss):
        ax = axes[0][i]
        q = [get("serial", lps, w) for w in works]
        ax.plot(works, [r["median_s"] for r in q], "k--", marker=".", label="serial")
        for lib, h, col in libs:
            q = [(w, get(lib, lps, w, pmax)) for w in works if get(lib, lps, w, pmax)]
            ax.errorbar([w for w, _ in q], [r["median_s"] for _, r in q],
                        yerr=[[r["median_s"] - r["min_s"] for _, r in q], [r["max_s"] - r["median_s"] for _, r in q]],
                        marker="o", color=col, capsize=2, label="%s P=%d" % (h, pmax))
        ax.set_xlabel("event-handling time (µs)")
        ax.set_ylabel("run time (s)")
        ax.set_title("%d LPs per thread (cf. Active Threads Fig 29)" % lps, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    wmax = max(works)
    for lib, h, col in libs:
        for lps, st in zip(lpss, ("-", "--", ":")):
            one = get(lib, lps, wmax, 1)
            q = [(p, get(lib, lps, wmax, p)) for p in ps if get(lib, lps, wmax, p)]
            if one:
                ax.plot([p for p, _ in q], [one["median_s"] / r["median_s"] for _, r in q], st, marker="o",
                        color=col, label="%s, %d LPs/thr" % (h, lps))
    ax.plot(ps, [min(p, cores) for p in ps], ":", color="gray")
    ax.set_xticks(ps)
    ax.set_xlabel("processors (P)")
    ax.set_ylabel("speedup vs the same version at P=1")
    ax.set_title("scalability at %g µs per event (cf. Active Threads Fig 30)" % wmax, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.suptitle("A4 conservative PDES, %d LPs; %s; median, bars min..max" % (cfg["lps_total"], rep.machine_line()),
                 fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "A4", "A4 discrete-event simulation")
    lps = min(lpss)
    w = max(works)
    wf, pt = get("weft", lps, w, pmax), get("pthreads", lps, w, pmax)
    if wf and pt:
        rep.headlines.append("A4 simulation, %d LPs per thread, %g µs per event, P=%d: weft %s vs pthreads %s (%.2fx)" % (
            lps, w, pmax, fmt_s(wf["median_s"]), fmt_s(pt["median_s"]), pt["median_s"] / wf["median_s"]))
    return md
