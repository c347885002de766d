#!/usr/bin/env python3
"""plot_A.py - figures from weft_bench_A1 / weft_bench_A2 JSON (--json), shaped like

  A1.png           papers/001 Fig 10: vector x matrix speedup vs processors, with and
                   without affinity annotations (speedup over the serial loop; the
                   dotted line is linear speedup)
  A2_time.png      papers/001 Fig 20/21: run time vs processors for mergesort (linked
                   list) and quicksort (array) under the eight scheduler variants, the
                   default scheduler and the serial baseline (log scale)
  A2_memory.png    papers/001 Fig 22-24: peak resident memory and minor page faults per
                   variant, at each processor count (log scale)

usage: python3 bench/sched/plot_A.py [--a1 A1.json] [--a2 A2.json] [--out DIR]
(needs matplotlib; on Debian /usr/bin/python3 with python3-matplotlib). Error bars:
min..max of the repetitions. Points past the machine's core count are oversubscribed
and drawn in a shaded region.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = "os^vD<>ph*xP+"
A2_ORDER = ["serial", "default",
            "fifo_lazy", "fifo_eager", "lifo_lazy", "lifo_eager",
            "fifo_lazy_affinity", "fifo_eager_affinity", "lifo_lazy_affinity",
            "lifo_eager_affinity"]


def machine_label(doc):
    m = doc.get("machine", {})
    return "%s, %s cores" % (m.get("cpu_model", "?"), m.get("cores", "?"))


def shade_oversubscribed(ax, doc, pmax):
    cores = doc.get("machine", {}).get("cores")
    if cores and pmax > cores:
        ax.axvspan(cores + 0.5, pmax + 0.5, color="0.9", zorder=0)
        ax.text(cores + 0.55, ax.get_ylim()[1], "oversubscribed", va="top", fontsize=8)


def plot_a1(doc, out):
    by = {}
    for r in doc["records"]:
        by.setdefault(r["variant"], []).append(r)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    pmax = 1
    for i, (name, rs) in enumerate(sorted(by.items())):
        rs.sort(key=lambda r: r["P"])
        ps = [r["P"] for r in rs]
        pmax = max(pmax, max(ps))
        serial = [x for x in doc["records"] if x["variant"] == "serial" and x["P"] == 1]
        base = serial[0]["median_s"] if serial else rs[0]["median_s"]
        sp = [base / r["median_s"] for r in rs]
        lo = [base / r["max_s"] for r in rs]
        hi = [base / r["min_s"] for r in rs]
        ax.errorbar(ps, sp, yerr=[[s - l for s, l in zip(sp, lo)], [h - s for s, h in zip(sp, hi)]],
                    marker=MARKERS[i % len(MARKERS)], capsize=3, label=name)
    ax.plot([1, pmax], [1, pmax], ":", color="0.5", label="linear")
    ax.set_xlabel("processors (VPs)")
    ax.set_ylabel("speedup over the serial loop")
    ax.set_xticks(range(1, pmax + 1))
    ax.set_title("A1: vector x matrix %dx%d, one thread per column\n%s"
                 % (doc.get("rows", 0), doc.get("cols", 0), machine_label(doc)), fontsize=9)
    shade_oversubscribed(ax, doc, pmax)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "A1.png"), dpi=120)
    plt.close(fig)


def plot_a2(doc, out):
    sorts = ["mergesort", "quicksort"]
    recs = doc["records"]
    variants = [v for v in A2_ORDER if any(r["variant"] == v for r in recs)]
    ps = sorted({r["P"] for r in recs})
    # time vs P
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for ax, srt in zip(axes, sorts):
        for i, v in enumerate(variants):
            rs = sorted((r for r in recs if r["variant"] == v and r["sort"] == srt), key=lambda r: r["P"])
            if not rs:
                continue
            if v == "serial":
                ax.axhline(rs[0]["median_s"], color="k", ls="--", lw=1, label="serial")
                continue
            x = [r["P"] for r in rs]
            y = [r["median_s"] for r in rs]
            yerr = [[r["median_s"] - r["min_s"] for r in rs], [r["max_s"] - r["median_s"] for r in rs]]
            ax.errorbar(x, y, yerr=yerr, marker=MARKERS[i % len(MARKERS)], capsize=3, label=v,
                        ls="-" if "lifo" in v else "--")
        ax.set_yscale("log")
        ax.set_xticks(ps)
        ax.set_xlabel("processors (VPs)")
        ax.set_ylabel("run time, s (log)")
        ax.set_title("%s of %d records (%s), leaf %d" % (
            srt, doc.get("n", 0), "linked list" if srt == "mergesort" else "array", doc.get("leaf", 0)),
            fontsize=9)
        shade_oversubscribed(ax, doc, max(ps))
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("A2: one thread per recursive call, under each scheduler - " + machine_label(doc), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "A2_time.png"), dpi=120)
    plt.close(fig)
    # memory and faults per variant, one bar group per P
    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    width = 0.8 / max(1, len(ps))
    for col, srt in enumerate(sorts):
        for row, (key, label) in enumerate([("peak_rss_kib", "peak RSS, KiB (log)"),
                                            ("minflt", "minor page faults (log)")]):
            ax = axes[row][col]
            for j, p in enumerate(ps):
                xs, ys = [], []
                for i, v in enumerate(variants):
                    r = [x for x in recs if x["variant"] == v and x["sort"] == srt and x["P"] == p]
                    if not r and v == "serial":
                        r = [x for x in recs if x["variant"] == v and x["sort"] == srt]
                    if r:
                        xs.append(i + j * width)
                        ys.append(r[0][key])
                ax.bar(xs, ys, width=width, label="P=%d" % p)
            ax.set_yscale("log")
            ax.set_xticks([i + width * (len(ps) - 1) / 2 for i in range(len(variants))])
            ax.set_xticklabels(variants, rotation=40, ha="right", fontsize=7)
            ax.set_ylabel(label)
            ax.set_title("%s: %s" % (srt, label.split(",")[0].split(" (")[0]), fontsize=9)
            ax.legend(fontsize=7)
    fig.suptitle("A2: memory per scheduler (fresh process per run; median of the reps) - "
                 + machine_label(doc), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "A2_memory.png"), dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a1")
    ap.add_argument("--a2")
    ap.add_argument("--out", default="bench-results")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for path, fn in ((a.a1, plot_a1), (a.a2, plot_a2)):
        if path:
            with open(path) as f:
                fn(json.load(f), a.out)
    if not a.a1 and not a.a2:
        ap.error("give --a1 and/or --a2")


if __name__ == "__main__":
    main()
