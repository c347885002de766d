#!/usr/bin/env python3
"""plot_x3_l7.py - figures for X3 (the C++ layer against the C interface on L1-L4) and
L7 (papers/002 5.1 PingPong in its set-ups: 1 kernel thread, 2 kernel threads, wired).

usage: python3 bench/plot_x3_l7.py [RESULTS_DIR]     (default: bench-results)
reads  RESULTS_DIR/x3_l7.json  (weft_bench_latency --benchmark_out, with per-repetition
                                rows: --benchmark_report_aggregates_only=false)
       RESULTS_DIR/icount.json (bench/icount.sh; optional: instruction labels)
writes RESULTS_DIR/x3.png and RESULTS_DIR/l7.png: median of the repetitions, bars from
       the fastest to the slowest repetition.
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

X3 = [("L1 create", "L1_create/weft", "X3_L1_create/weft_cpp", "L1_create"),
      ("L2 null thread", "L2_null_thread/weft", "X3_L2_null_thread/weft_cpp", "L2"),
      ("L3 switch", "L3_switch/weft", "X3_L3_switch/weft_cpp", "L3"),
      ("L4 mutex", "L4_mutex/weft", "X3_L4_mutex/weft_cpp", "L4_mutex")]
L7 = [("weft\n1 kernel thread", "L7_cond_pingpong/weft"),
      ("weft\n2 kernel threads", "L7_cond_pingpong_2vp/weft"),
      ("weft\n2 kt, affinity", "L7_cond_pingpong_2vp_affinity/weft"),
      ("weft\nwired", "L7_cond_pingpong_wired/weft"),
      ("pthreads\n1 CPU", "L7_cond_pingpong/pthreads"),
      ("pthreads\n2 CPUs", "L7_cond_pingpong_2cpu/pthreads"),
      ("Boost.Fiber\n1 thread", "L7_cond_pingpong/boost_fiber")]


def reps(doc):
    out = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") == "iteration":
            name = b["run_name"].replace("/manual_time", "")
            out.setdefault(name, []).append(b["real_time"])
    return out


def stat(v):
    m = statistics.median(v)
    return m, m - min(v), max(v) - m


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    with open(os.path.join(d, "x3_l7.json")) as f:
        doc = json.load(f)
    r = reps(doc)
    ctx = doc["context"]
    machine = f"{ctx.get('cpu_model', '?')}, {ctx.get('cores', '?')} cores, Linux {ctx.get('kernel', '?')}"
    icount = {}
    try:
        with open(os.path.join(d, "icount.json")) as f:
            for row in json.load(f)["rows"]:
                icount[(row["row"], row["lib"])] = row["instructions_per_op"]
    except OSError:
        pass

    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = range(len(X3))
    for off, key, lib, label, col in ((-0.2, 1, "weft", "C interface", "tab:blue"),
                                      (0.2, 2, "weft_cpp", "C++ layer (weft.hpp)", "tab:orange")):
        ms, lo, hi = [], [], []
        for row in X3:
            m, a, b = stat(r.get(row[key], [0]))
            ms.append(m), lo.append(a), hi.append(b)
        bars = ax.bar([x + off for x in xs], ms, 0.4, yerr=[lo, hi], capsize=3, label=label, color=col)
        for bar, row in zip(bars, X3):
            ins = icount.get((row[3], lib))
            if ins is not None:
                ax.annotate(f"{ins:g} ins", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([row[0] for row in X3])
    ax.set_ylabel("ns per operation (median, min..max)")
    ax.set_title(f"X3: C++ layer vs C interface (nvps=1)\n{machine}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, "x3.png"), dpi=120)

    fig, ax = plt.subplots(figsize=(9, 4.2))
    names = [row for row in L7 if row[1] in r]
    ms, lo, hi = [], [], []
    for _, key in names:
        m, a, b = stat(r[key])
        ms.append(m), lo.append(a), hi.append(b)
    cols = ["tab:blue" if "weft" in k else "tab:red" if "pthreads" in k else "tab:green" for _, k in names]
    ax.bar(range(len(names)), ms, yerr=[lo, hi], capsize=3, color=cols)
    for i, m in enumerate(ms):
        ax.annotate(f"{m:,.0f}", (i, m), ha="center", va="bottom", fontsize=7, xytext=(0, 2),
                    textcoords="offset points")
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n for n, _ in names], fontsize=8)
    ax.set_ylabel("ns per round (median, min..max), log scale")
    ax.set_title(f"L7: condition-variable PingPong (papers/002 Fig 5-1 set-ups)\n{machine}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "l7.png"), dpi=120)
    print(f"wrote {d}/x3.png and {d}/l7.png")


if __name__ == "__main__":
    main()
