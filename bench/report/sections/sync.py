"""S1-S5 (spin-waiting, atomic integers; FastThreads Fig 4.1-4.3, Presto Fig 1-2) and S6
(lock contention with statistics; C-Threads Fig 5-2..5-5)."""
import glob
import importlib.util
import os
import shutil
import sys

from core import section, table, cell, plt, shade_oversub

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {"S1": "P threads increment a shared counter to N under each lock (FastThreads Fig 4.1, Presto Fig 1)",
        "S2": "S1 plus a compute phase outside the lock (Presto Fig 1)",
        "S3": "relative processor speed T(1)/T(P) as the critical section grows (FastThreads Fig 4.2)",
        "S4": "barrier by lock, time per round per processor (FastThreads Fig 4.3)",
        "S5": "atomic integer incremented N times by P threads (Presto Fig 2)"}


def _sync_figures(rep):
    """Runs bench/sync/S_plot.py on the raw directory and moves its PNGs to figures/."""
    path = os.path.join(HERE, "..", "..", "sync", "S_plot.py")
    spec = importlib.util.spec_from_file_location("plot_sync", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv, sys.argv = sys.argv, ["S_plot.py", rep.raw_dir]
    try:
        mod.main()
    finally:
        sys.argv = argv
    out = {}
    for png in sorted(glob.glob(os.path.join(rep.raw_dir, "S[1-5].png"))):
        name = os.path.basename(png)[:-4]
        shutil.move(png, os.path.join(rep.fig_dir, name + ".png"))
        out[name] = "figures/%s.png" % name
        rep.figures.append(("%s figure" % name, out[name]))
    return out


@section("sync", "S1-S5: spin-waiting and atomic integers",
         inputs=("S1.json", "S2.json", "S3.json", "S4.json", "S5.json"), order=30)
def sync(rep):
    figs = _sync_figures(rep)
    cores = rep.machine.get("cores") or 2
    md = ("Every spinlock kind of weft/spinlock.h on P weft threads (one per pinned VP) beside "
          "`pthread_spinlock_t` and `pthread_mutex_t` on P pinned pthreads (bench/README.md). "
          "Cells: ns per operation, median ± spread.\n")
    for row in ("S1", "S2", "S3", "S4", "S5"):
        doc = rep.load(row + ".json")
        if not doc:
            continue
        res = doc["results"]
        ps = sorted({r["P"] for r in res})
        if row == "S3":
            pmax = max(p for p in ps if p <= cores)
            works = sorted({r["param"] for r in res})
            series = sorted({(r["kind"], r["threads"]) for r in res})
            rows = []
            for kind, thr in series:
                line = ["%s (%s)" % (kind, thr)]
                for w in works:
                    r = [x for x in res if x["kind"] == kind and x["threads"] == thr and x["param"] == w and x["P"] == pmax]
                    line.append("%.2f" % r[0]["relative_speed"] if r and "relative_speed" in r[0] else "-")
                rows.append(line)
            md += "\n### S3: %s\n\nRelative speed at P = %d, by units of work in the critical section:\n\n" % (ROWS[row], pmax)
            md += table(["lock"] + ["W=%s" % w for w in works], rows)
        else:
            series = sorted({(r["kind"], r["threads"], r["param"]) for r in res})
            rows = []
            for kind, thr, param in series:
                line = ["%s (%s)" % (kind, thr)]
                for p in ps:
                    r = [x for x in res if (x["kind"], x["threads"], x["param"]) == (kind, thr, param) and x["P"] == p]
                    if r:
                        per = r[0]["median_s"] / r[0]["ops"] * 1e9
                        line.append(cell(per, r[0]["min_s"] / r[0]["ops"] * 1e9, r[0]["max_s"] / r[0]["ops"] * 1e9))
                    else:
                        line.append("-")
                rows.append(line)
            md += "\n### %s: %s\n\n" % (row, ROWS[row])
            md += table(["lock"] + ["P=%d%s" % (p, " (oversub.)" if p > cores else "") for p in ps], rows)
        if row in figs:
            md += "\n![%s](%s)\n" % (row, figs[row])
    return md


@section("contention", "S6: lock contention with statistics (C-Threads §5.2-5.3)",
         inputs=("S6.json",), order=40)
def contention(rep):
    doc = rep.load("S6.json")
    res = doc["results"]
    cores = rep.machine.get("cores") or 2
    libs = [l for l in ("weft", "weft_nospin", "weft_nopoll", "weft_noboth", "pthreads")
            if any(r["lib"] == l for r in res)]
    md = ("L locks, each with a pool of T threads; each thread does W units of work (one unit: "
          "%s, %.1f ns here), takes its lock, increments, releases. Cells: ns per lock acquisition, "
          "median ± spread over %s runs. weft variants: defaults (spin then poll then block), "
          "`_nospin`, `_nopoll`, `_noboth`.\n" % (doc.get("unit", "?"), doc.get("unit_ns", 0), doc.get("reps", "?")))
    p_ = plt()
    setups = sorted({r["setup"] for r in res if r["part"] == "W"})
    fig, axes = p_.subplots(1, len(setups) + 1, figsize=(4 * (len(setups) + 1), 3.8), squeeze=False)
    for i, st in enumerate(setups):
        rs = [r for r in res if r["part"] == "W" and r["setup"] == st]
        ws = sorted({r["W"] for r in rs})
        rows = []
        for w in ws:
            line = ["%d" % w]
            for l in libs:
                r = [x for x in rs if x["W"] == w and x["lib"] == l]
                line.append(cell(r[0]["ns_per_iteration"], r[0]["ns_per_iteration"] * r[0]["min_s"] / r[0]["median_s"],
                                 r[0]["ns_per_iteration"] * r[0]["max_s"] / r[0]["median_s"]) if r else "-")
            rows.append(line)
        p = rs[0]["P"] if rs else cores
        md += "\n### W sweep, %s (locks x threads), P = %d\n\n" % (st, p)
        md += table(["W"] + libs, rows)
        ax = axes[0][i]
        for l in libs:
            q = sorted((x for x in rs if x["lib"] == l), key=lambda x: x["W"])
            ax.plot([x["W"] for x in q], [x["ns_per_iteration"] for x in q], marker="o", label=l)
        ax.set_title("%s, P=%d (cf. C-Threads Fig 5-2..5-4)" % (st, p), fontsize=9)
        ax.set_xlabel("work units W")
        ax.set_ylabel("ns per acquisition")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    rs = [r for r in res if r["part"] == "P"]
    if rs:
        ax = axes[0][-1]
        ps = sorted({r["P"] for r in rs})
        for (l, w) in sorted({(r["lib"], r["W"]) for r in rs}):
            if l != "weft" and l != "pthreads":
                continue
            q = sorted((x for x in rs if x["lib"] == l and x["W"] == w), key=lambda x: x["P"])
            ax.plot([x["P"] for x in q], [x["ns_per_iteration"] for x in q], marker="o", label="%s W=%d" % (l, w))
        ax.set_xticks(ps)
        shade_oversub(ax, cores, max(ps))
        ax.set_title("1x40: processors", fontsize=9)
        ax.set_xlabel("P")
        ax.set_ylabel("ns per acquisition")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        stats = [r for r in rs if r["lib"].startswith("weft") and r.get("stats")]
        if stats:
            rows = []
            for r in stats:
                s = r["stats"]
                rows.append([r["lib"], r["W"], "%d%s" % (r["P"], " (oversub.)" if r["P"] > cores else ""),
                             s["attempts"], s["mutex_missed"], s["acquired_spinning"], s["acquired_polling"],
                             s["blocked"], s["idled"]])
            md += "\n### Processor sweep, 1x40, with C-Threads Fig 5-5's statistics\n\n"
            md += table(["variant", "W", "P", "attempts", "missed", "acq. spinning", "acq. polling",
                         "blocked", "VPs idled"], rows)
    fig.suptitle("S6 contention; %s" % rep.machine_line(), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "S6", "S6 contention")
    return md
