#!/usr/bin/env python3
"""S_plot.py - figures from weft_bench_spin's JSON (S1.json ... S5.json), shaped like

  S1  FastThreads Fig 4.1 / Presto Fig 1: elapsed time to increment a counter to N vs P
  S2  Presto Fig 1 (with the compute phase): elapsed time vs P
  S3  FastThreads Fig 4.2: relative processor speed T(1)/T(P) vs critical-section size, at the
      largest non-oversubscribed P
  S4  FastThreads Fig 4.3: time per processor to achieve the barrier vs P
  S5  Presto Fig 2: elapsed time to increment the atomic integer N times vs P

usage: python3 bench/sync/S_plot.py [RESULTS_DIR]   (default: bench-results; needs
matplotlib). Writes RESULTS_DIR/S1.png ... S5.png. Error bars: min..max of the reps.
Points past the core count are oversubscribed and drawn in a shaded region.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = "os^vD<>ph*xP+"


def load(d, row):
    path = os.path.join(d, row + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def series(doc):
    """{(kind, threads, param): [result sorted by P]}"""
    out = {}
    for r in doc["results"]:
        out.setdefault((r["kind"], r["threads"], r["param"]), []).append(r)
    for v in out.values():
        v.sort(key=lambda r: r["P"])
    return out


def shade(ax, doc, ps):
    cores = doc["machine"]["cores"]
    if ps and max(ps) > cores:
        ax.axvspan(cores + 0.5, max(ps) + 0.5, color="0.92", zorder=0)
        ax.text(cores + 0.6, ax.get_ylim()[0], "oversubscribed", va="bottom", fontsize=8, color="0.4")


def machine_note(fig, doc):
    m = doc["machine"]
    fig.text(0.99, 0.01, "%s, %d cores, Linux %s" % (m["cpu_model"], m["cores"], m["kernel"]),
             ha="right", va="bottom", fontsize=7, color="0.4")


def plot_vs_p(d, row, ylabel, scale, title):
    doc = load(d, row)
    if doc is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    allp = set()
    for i, ((kind, threads, _), pts) in enumerate(sorted(series(doc).items())):
        ps = [r["P"] for r in pts]
        allp.update(ps)
        med = [scale(r, r["median_s"]) for r in pts]
        lo = [m - scale(r, r["min_s"]) for r, m in zip(pts, med)]
        hi = [scale(r, r["max_s"]) - m for r, m in zip(pts, med)]
        ax.errorbar(ps, med, yerr=[lo, hi], marker=MARKERS[i % len(MARKERS)], capsize=3,
                    label="%s (%s threads)" % (kind, threads))
    ax.set_xlabel("processors (P)")
    ax.set_ylabel(ylabel)
    ax.set_xticks(sorted(allp))
    ax.set_ylim(bottom=0)
    shade(ax, doc, sorted(allp))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    machine_note(fig, doc)
    fig.tight_layout()
    out = os.path.join(d, row + ".png")
    fig.savefig(out, dpi=120)
    print("wrote", out)


def plot_s3(d):
    doc = load(d, "S3")
    if doc is None:
        return
    cores = doc["machine"]["cores"]
    ps = [r["P"] for r in doc["results"] if r["P"] > 1 and not r["oversubscribed"]]
    if not ps:
        return
    p = max(ps)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_kind = {}
    for r in doc["results"]:
        if r["P"] == p:
            by_kind.setdefault((r["kind"], r["threads"]), []).append(r)
    for i, ((kind, threads), pts) in enumerate(sorted(by_kind.items())):
        pts.sort(key=lambda r: r["param"])
        xs = [max(r["param"], 0.5) for r in pts]  # W = 0 drawn at 0.5 on the log axis
        ax.plot(xs, [r["relative_speed"] for r in pts], marker=MARKERS[i % len(MARKERS)],
                label="%s (%s threads)" % (kind, threads))
    ax.axhline(1.0, ls=":", color="gray")
    ax.set_xscale("log")
    ax.set_xlabel("critical-section work W (shared read-modify-writes; W=0 drawn at 0.5)")
    ax.set_ylabel("relative processor speed T(1) / T(%d)" % p)
    ax.set_title("S3: relative speed, %d processors to 1 (FastThreads Fig 4.2; %d cores)" % (p, cores),
                 fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    machine_note(fig, doc)
    fig.tight_layout()
    out = os.path.join(d, "S3.png")
    fig.savefig(out, dpi=120)
    print("wrote", out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    plot_vs_p(d, "S1", "elapsed seconds", lambda r, s: s,
              "S1: increment a shared counter to N under the lock (FastThreads Fig 4.1, Presto Fig 1)")
    plot_vs_p(d, "S2", "elapsed seconds", lambda r, s: s,
              "S2: S1 with a compute phase after each release (Presto Fig 1)")
    plot_vs_p(d, "S4", "microseconds per processor", lambda r, s: s * 1e6 / r["ops"] / r["P"],
              "S4: time per processor to achieve a barrier by lock (FastThreads Fig 4.3)")
    plot_vs_p(d, "S5", "elapsed seconds", lambda r, s: s,
              "S5: increment an atomic integer N times (Presto Fig 2)")
    plot_s3(d)


if __name__ == "__main__":
    main()
