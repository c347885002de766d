#!/usr/bin/env python3
"""measure.py - the M1 model's hardware input, by the method of papers/004 §5.1: give
each processor its own copy of every data structure (here: K separate processes, each
running weft's T1 and T2 on one virtual processor), run the copies in parallel, and
compare with one copy alone. No software resource is shared, so any slowdown is
hardware contention (memory, caches, the coherence fabric - and, on a shared machine,
whatever else runs there). m1.fit_bus_fraction() turns each slowdown into a bus demand.
Also measured: the time to move one cache line between two cores (weft_m1_linexfer), the
cost of a lock hand-off between processors.

usage: python3 bench/model/measure.py [--build build-release] [--out DIR] [--quick]
Writes DIR/M1_inputs.json (and DIR/m1/*/sweep.json).
"""
import json
import os
import subprocess
import sys


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run_copies(exe, k, out, common):
    procs = []
    for i in range(k):
        d = os.path.join(out, "m1", "alone" if k == 1 else "copy%d" % i)
        os.makedirs(d, exist_ok=True)
        procs.append((d, subprocess.Popen([exe, "--out", d] + common, stdout=subprocess.DEVNULL)))
    res = []
    for d, p in procs:
        if p.wait() != 0:
            raise SystemExit("weft_sweep failed (exit %d)" % p.returncode)
        with open(os.path.join(d, "sweep.json")) as f:
            doc = json.load(f)
        res.append({r["test"]: r["ns_per_thread"] for r in doc["results"]})
    return res, doc


def main():
    build, out = arg("--build", "build-release"), arg("--out", "bench-results")
    quick = "--quick" in sys.argv
    exe = os.path.join(build, "bench", "weft_sweep")
    k = os.cpu_count() or 1
    reps = "5" if quick else "9"
    common = ["--procs", "1", "--oversub", "", "--tests", "T1,T2", "--libs", "weft",
              "--reps", reps, "--n", "1000000", "--t2-n", "100000" if quick else "200000"]
    alone, doc = run_copies(exe, 1, out, common)
    # The copies do exactly the alone run's user work (not their own calibration).
    common += ["--t2-units-per-us", "%.6g" % doc["config"]["T2"]["units_per_us"]]
    copies, _ = run_copies(exe, k, out, common) if k > 1 else ([], None)
    result = {"method": "papers/004 §5.1: K private copies (separate processes, nvps=1) in "
                        "parallel vs one alone; slowdown = mean copy time / alone time",
              "copies": k, "machine": doc["machine"], "config": doc["config"],
              "alone_ns": alone[0], "copies_ns": copies,
              "slowdown": {t: (sum(c[t] for c in copies) / len(copies)) / alone[0][t]
                           for t in alone[0]} if copies else {}}
    # The copies' slowdown mixes two things on a shared machine: the memory system (what
    # the model's bus is for) and the CPU share other jobs leave us. weft_calibrate runs
    # K pinned threads of pure register arithmetic (no memory traffic): its speedup / K is
    # that CPU share, measured right after the copies.
    cal = os.path.join(build, "bench", "weft_calibrate")
    if k > 1 and os.path.exists(cal):
        d = os.path.join(out, "m1", "calibrate")
        os.makedirs(d, exist_ok=True)
        subprocess.run([cal, "--out", d], stdout=subprocess.DEVNULL, check=True)
        with open(os.path.join(d, "calibrate.json")) as f:
            pts = json.load(f)["points"]
        result["cpu_share"] = {str(q["p"]): min(1.0, q["speedup"] / q["p"]) for q in pts}
        print("cpu share:", result["cpu_share"])
    lx = os.path.join(build, "bench", "weft_m1_linexfer")
    if k > 1 and os.path.exists(lx):
        txt = subprocess.run([lx, "--n", "50000" if quick else "200000", "--reps", "3" if quick else "5"],
                             capture_output=True, text=True, check=True).stdout
        result["line_transfer"] = json.loads(txt)
        print("line transfer:", result["line_transfer"])
    path = os.path.join(out, "M1_inputs.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print("alone (ns/thread):", alone[0])
    print("copies:", copies)
    print("slowdown:", result["slowdown"])
    print("wrote", path)


if __name__ == "__main__":
    main()
