"""A1: vector x matrix with and without affinity (Active Threads §4 Fig 10); A2: sorts with
one thread per recursive call under the eight schedlib variants (Active Threads §8.1 Fig
20-24). Input: weft_a1_vecmat / weft_a2_sort --out DIR (bench/apps/, bench/README.md)."""
from core import section, table, cell, shade_oversub, plt

MARKERS = "os^vD<>ph*xP+"
A2_ORDER = ["serial", "default",
            "fifo_lazy", "fifo_eager", "lifo_lazy", "lifo_eager",
            "fifo_lazy_affinity", "fifo_eager_affinity", "lifo_lazy_affinity",
            "lifo_eager_affinity"]
A1_NAMES = {"serial": "serial loop (no threads)", "default": "default scheduler, no annotation",
            "fifo": "schedlib FIFO, no annotation", "fifo_affinity": "schedlib FIFO + AFFINITY (VP col/64)"}


def _machine(doc, rep):
    m = doc.get("machine") or rep.machine
    return "%s, %s cores" % (m.get("cpu_model", "?"), m.get("cores", "?"))


def _cores(doc, rep):
    return (doc.get("machine") or {}).get("cores") or rep.machine.get("cores") or 2


@section("a1", "A1: vector x matrix with and without affinity (Active Threads §4 Fig 10)",
         inputs=("A1.json",), order=45)
def a1(rep):
    doc = rep.load("A1.json")
    recs = doc["records"]
    cores = _cores(doc, rep)
    serial = [r for r in recs if r["variant"] == "serial" and r["P"] == 1]
    base = serial[0]["median_s"] if serial else None
    variants = [v for v in A1_NAMES if any(r["variant"] == v for r in recs)]
    variants += sorted({r["variant"] for r in recs} - set(variants))
    md = ("r = v × m for a %d × %d matrix of floats, one detached thread per column (neighbouring "
          "columns share cache lines), completion counted on a semaphore; one warm-up, then %d "
          "repetitions in one process. Cells: run time, median ± spread (half the min..max range); "
          "speedup over the serial loop at P=1 (the figure's y axis) and over the same variant at "
          "P=1. `serial` at P=2 is the same loop with a second, idle VP.\n\n"
          % (doc.get("rows", 0), doc.get("cols", 0), doc.get("reps", 0)))
    rows = []
    for v in variants:
        for r in sorted((x for x in recs if x["variant"] == v), key=lambda x: x["P"]):
            rows.append([A1_NAMES.get(v, v), "%d%s" % (r["P"], " (oversub.)" if r["P"] > cores else ""),
                         cell(r["median_s"], r["min_s"], r["max_s"], "s"),
                         "%.2fx" % (base / r["median_s"]) if base else "-",
                         "%.2fx" % r["speedup_vs_p1"]])
    md += table(["variant", "P", "run time", "vs serial", "vs P=1"], rows)
    cal = rep.load("calibrate.json")
    if cal and cal.get("points"):
        md += ("\nThe machine's parallelism, measured earlier in this run (independent work on P "
               "pinned kernel threads, `weft_calibrate`; on a shared machine it changes from one "
               "minute to the next): %s.\n" % ", ".join(
                   "P=%s: %.2fx" % (q.get("p"), q.get("speedup", 0)) for q in cal["points"]))

    p = plt()
    fig, ax = p.subplots(figsize=(6.5, 4.5))
    pmax = max(r["P"] for r in recs)
    for i, v in enumerate(variants):
        rs = sorted((x for x in recs if x["variant"] == v), key=lambda x: x["P"])
        if not rs or not base:
            continue
        ps = [r["P"] for r in rs]
        sp = [base / r["median_s"] for r in rs]
        lo = [base / r["max_s"] for r in rs]
        hi = [base / r["min_s"] for r in rs]
        ax.errorbar(ps, sp, yerr=[[s - l for s, l in zip(sp, lo)], [h - s for s, h in zip(sp, hi)]],
                    marker=MARKERS[i % len(MARKERS)], capsize=3, label=v,
                    ls=":" if v == "serial" else "-")
    allp = sorted({r["P"] for r in recs})
    ax.plot(allp, [min(q, cores) for q in allp], "--", color="0.6", label="linear (to %d cores)" % cores)
    ax.set_xticks(allp)
    ax.set_xlabel("processors (VPs)")
    ax.set_ylabel("speedup over the serial loop")
    ax.set_ylim(bottom=0)
    ax.set_title("A1: vector x matrix %dx%d, one thread per column (cf. Active Threads Fig 10)\n%s"
                 % (doc.get("rows", 0), doc.get("cols", 0), _machine(doc, rep)), fontsize=9)
    shade_oversub(ax, cores, pmax)
    ax.legend(fontsize=8)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "A1", "A1: vector x matrix speedup with and without affinity")

    def at(v, q):
        r = [x for x in recs if x["variant"] == v and x["P"] == q]
        return r[0] if r else None
    a, f = at("fifo_affinity", min(cores, pmax)), at("fifo", min(cores, pmax))
    if a and f and base:
        rep.headlines.append("A1 (vector x matrix, P=%d): FIFO + affinity %.2fx the serial loop, "
                             "FIFO without %.2fx" % (a["P"], base / a["median_s"], base / f["median_s"]))
    return md


def _a2_get(recs, v, srt, q):
    r = [x for x in recs if x["variant"] == v and x["sort"] == srt and x["P"] == q]
    if not r and v == "serial":
        r = [x for x in recs if x["variant"] == v and x["sort"] == srt]
    return r[0] if r else None


@section("a2", "A2: sorts with one thread per call under eight schedulers (Active Threads §8.1 Fig 20-24)",
         inputs=("A2.json",), order=46)
def a2(rep):
    doc = rep.load("A2.json")
    recs = doc["records"]
    cores = _cores(doc, rep)
    sorts = [s for s in ("mergesort", "quicksort") if any(r["sort"] == s for r in recs)]
    variants = [v for v in A2_ORDER if any(r["variant"] == v for r in recs)]
    ps = sorted({r["P"] for r in recs})
    md = ("Mergesort of a **linked list** and quicksort of an **array** of %d records (leaf %d: "
          "insertion / bubble sort at or below it), one thread per recursive call (each call creates "
          "a thread per half and joins both), under the eight `weft/schedlib.h` variants (FIFO/LIFO "
          "× lazy/eager stacks × with/without affinity hints: VP `lo * 64 / N`), the default "
          "scheduler and a serial recursion. Each run is a fresh process: peak RSS (`ru_maxrss`, "
          "every touched stack page) and minor faults from `wait4`. %d repetitions; time: median ± "
          "spread; memory and faults: medians.\n\n" % (doc.get("n", 0), doc.get("leaf", 0), doc.get("reps", 0)))
    for srt in sorts:
        rows = []
        for v in variants:
            line = [v]
            for q in ps:
                r = _a2_get(recs, v, srt, q)
                if v == "serial" and q != ps[0]:
                    line += ["", "", ""]
                    continue
                line += ([cell(r["median_s"], r["min_s"], r["max_s"], "s"), "{:,}".format(r["peak_rss_kib"]),
                          "{:,}".format(r["minflt"])] if r else ["-", "-", "-"])
            rows.append(line)
        hdr = ["%s: variant" % srt]
        for q in ps:
            o = " (oversub.)" if q > cores else ""
            hdr += ["time P=%d%s" % (q, o), "peak RSS KiB P=%d" % q, "minor faults P=%d" % q]
        md += table(hdr, rows) + "\n"
    thr = {r["sort"]: r["threads"] for r in recs if r.get("threads")}
    md += "Threads created per run: %s.\n\n" % ", ".join("%s {:,}".format(t) % s for s, t in thr.items())

    p = plt()
    # time vs P (cf. Fig 20/21)
    fig, axes = p.subplots(1, len(sorts), figsize=(6 * len(sorts) + 1.5, 4.8), squeeze=False)
    axes = axes[0]
    for ax, srt in zip(axes, sorts):
        for i, v in enumerate(variants):
            rs = sorted((r for r in recs if r["variant"] == v and r["sort"] == srt), key=lambda r: r["P"])
            if not rs:
                continue
            if v == "serial":
                ax.axhline(rs[0]["median_s"], color="k", ls="--", lw=1, label="serial")
                continue
            ax.errorbar([r["P"] for r in rs], [r["median_s"] for r in rs],
                        yerr=[[r["median_s"] - r["min_s"] for r in rs], [r["max_s"] - r["median_s"] for r in rs]],
                        marker=MARKERS[i % len(MARKERS)], capsize=3, label=v,
                        ls="-" if "lifo" in v else "--")
        ax.set_yscale("log")
        ax.set_xticks(ps)
        ax.set_xlabel("processors (VPs)")
        ax.set_ylabel("run time, s (log)")
        ax.set_title("%s of %d records (%s), leaf %d" % (
            srt, doc.get("n", 0), "linked list" if srt == "mergesort" else "array", doc.get("leaf", 0)),
            fontsize=9)
        shade_oversub(ax, cores, max(ps))
    axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("A2: run time vs processors, one thread per recursive call (cf. Active Threads Fig 20-21) - "
                 + _machine(doc, rep), fontsize=9)
    fig.tight_layout()
    md += rep.save_fig(fig, "A2_time", "A2: run time vs processors per scheduler") + "\n"

    # peak memory and minor faults per variant, one bar per P (cf. Fig 22-24)
    fig, axes = p.subplots(2, len(sorts), figsize=(6.5 * len(sorts), 8), squeeze=False)
    width = 0.8 / max(1, len(ps))
    for col, srt in enumerate(sorts):
        for row, (key, label) in enumerate([("peak_rss_kib", "peak RSS, KiB (log)"),
                                            ("minflt", "minor page faults (log)")]):
            ax = axes[row][col]
            for j, q in enumerate(ps):
                xs, ys = [], []
                for i, v in enumerate(variants):
                    if v == "serial" and j > 0:
                        continue
                    r = _a2_get(recs, v, srt, q)
                    if r:
                        xs.append(i + j * width)
                        ys.append(r[key])
                ax.bar(xs, ys, width=width, label="P=%d%s" % (q, " (oversub.)" if q > cores else ""))
            ax.set_yscale("log")
            ax.set_xticks([i + width * (len(ps) - 1) / 2 for i in range(len(variants))])
            ax.set_xticklabels(variants, rotation=40, ha="right", fontsize=7)
            ax.set_ylabel(label)
            ax.set_title("%s: %s" % (srt, label.split(",")[0].split(" (")[0]), fontsize=9)
            ax.legend(fontsize=7)
    fig.suptitle("A2: memory per scheduler (fresh process per run; medians; cf. Active Threads Fig 22-24) - "
                 + _machine(doc, rep), fontsize=9)
    fig.tight_layout()
    md += rep.save_fig(fig, "A2_memory", "A2: peak memory and minor faults per scheduler") + "\n"

    # headline: lazy LIFO + affinity vs eager FIFO on the mergesort
    parts = []
    for q in ps:
        a, e = _a2_get(recs, "lifo_lazy_affinity", "mergesort", q), _a2_get(recs, "fifo_eager", "mergesort", q)
        if a and e:
            parts.append("P=%d: %.0fx less peak memory (%s vs %s KiB), %.1fx faster (%s vs %s)" % (
                q, e["peak_rss_kib"] / a["peak_rss_kib"], "{:,}".format(a["peak_rss_kib"]),
                "{:,}".format(e["peak_rss_kib"]), e["median_s"] / a["median_s"],
                cell(a["median_s"], a["min_s"], a["max_s"], "s"), cell(e["median_s"], e["min_s"], e["max_s"], "s")))
    if parts:
        line = "A2 mergesort of a linked list, lazy LIFO + affinity vs eager FIFO: " + "; ".join(parts)
        md = "**%s.**\n\n" % line + md
        rep.headlines.append(line)
    return md
