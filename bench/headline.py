#!/usr/bin/env python3
"""headline.py - the one table of scripts/demo.sh, built from a results directory:
latency.json (weft_bench_latency), icount.json (icount.sh), memory.json
(weft_mem_per_thread) and sweep.json (weft_sweep). Missing files leave blanks.

usage: python3 bench/headline.py [RESULTS_DIR]     (default: bench-results)
"""
import json
import os
import re
import statistics
import sys

LIBS = ["weft", "pthreads", "boost_fiber", "boost_fiber_pooled", "go"]
HEAD = {"weft": "weft", "pthreads": "pthreads", "boost_fiber": "Boost.Fiber",
        "boost_fiber_pooled": "Boost.Fiber pooled", "go": "Go (GOMAXPROCS=1)"}
GO_ROWS = {"L1Create": "L1", "L2NullThread": "L2", "L3Switch": "L3", "L8CreateReclaim": "L8",
           "L4Mutex": "L4_mutex", "L4Sem": "L4_sem", "L5TryLock": "L5_trylock",
           "L5TryWait": "L5_trywait", "L6MutexPingPong": "L6_mutex_pingpong",
           "L6SemPingPong": "L6_sem_pingpong", "L7CondPingPong": "L7_cond_pingpong"}


def load(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(ns, spread_pct):
    t = "%.1f ns" % ns if ns < 1000 else "%.2f us" % (ns / 1000)
    return "%s ±%.0f%%" % (t, spread_pct) if spread_pct >= 1 else "%s ±%.1f%%" % (t, spread_pct)


def latency_cells(doc):
    """{(row, lib): text} from Google Benchmark JSON with median/cv aggregates."""
    agg = {}
    for b in (doc or {}).get("benchmarks", []):
        if b.get("run_type") != "aggregate":
            continue
        run = b["run_name"].replace("/manual_time", "")
        row, lib = run.split("_", 1)[0], run.rsplit("/", 1)[1]
        if row in ("L4", "L5", "L6", "L7"):  # one row per <row>_<what>, e.g. L4_mutex
            row = run.split("/", 1)[0]
        if run.startswith("L1_create/weft+bind_stack"):
            row, lib = "L1+stack", "weft"
        lib = lib.split("(")[0]
        agg.setdefault((row, lib), {})[b["aggregate_name"]] = b["real_time"]
    cells = {}
    for key, a in agg.items():
        if "median" not in a:
            continue
        cv = a.get("cv")
        if cv is None and a.get("mean"):
            cv = a.get("stddev", 0) / a["mean"]
        cells[key] = fmt(a["median"], 100 * (cv or 0))
    return cells


def go_cells(d):
    """{(row, "go"): text} from `go test -bench -count 5` output in go_latency.txt."""
    runs = {}
    try:
        with open(os.path.join(d, "go_latency.txt")) as f:
            for line in f:
                m = re.match(r"^Benchmark(\w+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
                if m and m.group(1) in GO_ROWS:
                    runs.setdefault(GO_ROWS[m.group(1)], []).append(float(m.group(3)))
    except OSError:
        pass
    cells = {}
    for row, v in runs.items():
        cv = statistics.stdev(v) / statistics.mean(v) if len(v) > 1 else 0
        cells[(row, "go")] = fmt(statistics.median(v), 100 * cv)
    return cells


def sweep_cells(doc):
    cells = {}
    for r in (doc or {}).get("results", []):
        if r["oversubscribed"] or r["test"] == "T3":  # T3: one row per K, not a P cell
            continue
        spread = 100 * (r["max_s"] - r["min_s"]) / 2 / r["median_s"]
        text = fmt(r["ns_per_thread"], spread)
        if r["P"] > 1 and r.get("speedup"):
            text += " (%.2fx)" % r["speedup"]
        cells[("%s P=%d" % (r["test"], r["P"]), r["lib"])] = text
    return cells


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    lat, ic, mem, sw = (load(d, n) for n in ("latency.json", "icount.json", "memory.json", "sweep.json"))
    m = (sw or mem or {}).get("machine")
    if m is None and lat:
        c = lat["context"]
        m = {"cpu_model": c.get("cpu_model", "?"), "cores": c.get("cores", c.get("num_cpus")),
             "kernel": c.get("kernel", "?")}
    cells = latency_cells(lat)
    cells.update(sweep_cells(sw))
    cells.update(go_cells(d))
    ir = {}
    for r in (ic or {}).get("rows", []):
        if r["instructions_per_op"] is not None:
            ir[(r["row"], r["lib"])] = "%.0f" % r["instructions_per_op"]
    if ("L8", "pthreads") in cells:
        cells[("L8", "pthreads")] += " (=L2)"
    cells[("T4 P=1", "pthreads")] = cells[("T4 P=2", "pthreads")] = "n/a"

    rows = [("L1", "create, not yet run"), ("L1+stack", "create + bind stack (weft)"),
            ("L2", "null thread: create+run+join"), ("L3", "switch (per yield / hand-off)"),
            ("L4_mutex", "mutex lock+unlock, uncontested"), ("L4_sem", "semaphore signal+wait"),
            ("L5_trylock", "trylock (succeeds) + unlock"), ("L5_trywait", "trywait (succeeds) + signal"),
            ("L6_mutex_pingpong", "mutex ping-pong, per round"),
            ("L6_sem_pingpong", "semaphore ping-pong, per round"),
            ("L7_cond_pingpong", "condition ping-pong, per round"),
            ("L8", "create+reclaim, never started*")]
    ps = sorted({r["P"] for r in (sw or {}).get("results", []) if not r["oversubscribed"]}) or [1, 2]
    for t, what in (("T1", "chains of null threads"), ("T4", "create+reclaim, P workers*"),
                    ("T5", "fork-join, batches of 1000")):
        rows += [("%s P=%d" % (t, p), what) for p in ps]

    if m:
        print("machine: %s, %s cores, Linux %s" % (m["cpu_model"], m["cores"], m["kernel"]))
    cols = ["row", "operation"] + [HEAD[l] for l in LIBS] + ["weft Ir", "Boost Ir"]
    table = [[row, what] + [cells.get((row, l), "-") for l in LIBS]
             + [ir.get((row, "weft"), ""), ir.get((row, "boost_fiber"), "")] for row, what in rows]
    widths = [max(len(c) for c in col) for col in zip(cols, *table)]
    hdr = "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()
    print(hdr)
    print("-" * len(hdr))
    for line in table:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    print("-" * len(hdr))
    if mem:
        print("memory per created-but-unstarted weft thread: %.0f bytes (VmRSS delta over %d threads, nvps=1)"
              % (mem["bytes_per_thread"], mem["threads"]))
    print("Cells: median ns per operation (per thread for T rows) ± spread over the run's repetitions:")
    print("  L rows: coefficient of variation; T rows: half the min..max range over the median.")
    print("  (N.NNx), T rows with P>1: speedup, the same library at P=1 over P. Ir: instructions per op,")
    print("  callgrind, user mode only (pthreads' switches are kernel work: not counted).")
    print("  * no library here can delete a thread that never ran: L8/T4 create a batch of unstarted")
    print("    threads, then each runs an empty body and is reclaimed. pthreads L8 = L2; T4 n/a.")
    print("  Boost.Fiber: default fixedsize_stack (malloc of 128 KiB per fiber); 'pooled':")
    print("    pooled_fixedsize_stack, which keeps freed stacks as weft's free lists do (one thread")
    print("    only: it is not thread-safe, so the sweeps use the default). Where 1000 fibers live at")
    print("    once (L1, L8, T4, T5) the default allocator dominates; at P>1 work stealing runs fibers")
    print("    as they are created, fewer stacks are live at once: Boost's T4/T5 speedups are mostly")
    print("    the allocator's (they can exceed P).")
    print("  Go: go test -bench, -cpu 1, the run's -count; L8 as weft's (a goroutine cannot be deleted).")
    print("  L4-L7: Boost.Fiber's semaphore is mutex+condition_variable; Go's a channel. L6/L7 round:")
    print("    one pass of each thread; pthreads pinned to one CPU (2-CPU variants: latency.json).")
    if sw:
        c = sw["config"]
        print("  T rows: %d threads (%d for %s); Boost.Fiber: %s."
              % (c["threads"], c["slow_threads"], c["slow_points"], c["boost_fiber"]))


if __name__ == "__main__":
    main()
