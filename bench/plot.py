#!/usr/bin/env python3
"""plot.py - figures from sweep.json shaped like FastThreads Fig 3.1 (elapsed time for
1,000,000 threads vs processors) and Fig 3.2 (speedup vs processors), one PNG per test.

usage: python3 bench/plot.py [RESULTS_DIR]    (default: bench-results; needs matplotlib)

Elapsed time is for 1,000,000 threads: a library measured on fewer threads (pthreads) is
scaled linearly from its ns per thread, and its legend says so. Speedup is each library's
time at P=1 over its time at P (FastThreads Fig 3.2 divides by the fastest alternative at P=1; its
alternatives were variants of one package, ours differ by up to 1000x, which would flatten
every curve but one).
Points past the core count are oversubscribed and drawn in a shaded region.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"weft": ("o", "tab:blue"), "pthreads": ("s", "tab:red"), "boost_fiber": ("^", "tab:green")}
TITLE = {"T1": "create, start and finish null threads (chains)",
         "T4": "create + reclaim unstarted threads",
         "T5": "fork-join, batches of 1000"}


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    with open(os.path.join(d, "sweep.json")) as f:
        doc = json.load(f)
    m, res = doc["machine"], doc["results"]
    for test in ("T1", "T4", "T5"):
        rs = [r for r in res if r["test"] == test]
        if not rs:
            continue
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for lib, (mk, col) in STYLE.items():
            pts = sorted((r for r in rs if r["lib"] == lib), key=lambda r: r["P"])
            if not pts:
                continue
            ps = [r["P"] for r in pts]
            scale = 1e6 / pts[0]["threads"]
            med = [r["median_s"] * scale for r in pts]
            lo = [(r["median_s"] - r["min_s"]) * scale for r in pts]
            hi = [(r["max_s"] - r["median_s"]) * scale for r in pts]
            label = lib if scale == 1 else "%s (measured on %d, x%g)" % (lib, pts[0]["threads"], scale)
            ax1.errorbar(ps, med, yerr=[lo, hi], marker=mk, color=col, capsize=3, label=label)
            one = [r["median_s"] for r in pts if r["P"] == 1]
            if one:
                ax2.plot(ps, [one[0] / r["median_s"] for r in pts], marker=mk, color=col, label=lib)
        allp = sorted({r["P"] for r in rs})
        ax2.plot(allp, [min(p, m["cores"]) for p in allp], ":", color="gray", label="linear (to cores)")
        for ax in (ax1, ax2):
            ax.set_xlabel("processors (P)")
            ax.set_xticks(allp)
            if max(allp) > m["cores"]:
                ax.axvspan(m["cores"] + 0.5, max(allp) + 0.5, color="0.92", zorder=0)
                ax.text(m["cores"] + 0.6, 0.02, "oversubscribed", va="bottom", fontsize=8,
                        transform=ax.get_xaxis_transform())
            ax.grid(alpha=0.3)
        ax1.set_yscale("log")
        ax1.set_ylabel("elapsed time for 1,000,000 threads (s)")
        ax1.set_title("%s elapsed time (cf. FastThreads Fig 3.1)" % test, fontsize=10)
        ax2.set_ylabel("speedup vs the same library at P=1")
        ax2.set_title("%s speedup (cf. FastThreads Fig 3.2)" % test, fontsize=10)
        ax1.legend(fontsize=8)
        ax2.legend(fontsize=8)
        fig.suptitle("%s: %s\n%s, %d cores, Linux %s; median of %d, bars min..max"
                     % (test, TITLE[test], m["cpu_model"], m["cores"], m["kernel"],
                        doc["config"]["reps"]), fontsize=10)
        fig.tight_layout()
        path = os.path.join(d, "sweep_%s.png" % test)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print("wrote", path)


if __name__ == "__main__":
    main()
