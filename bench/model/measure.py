#!/usr/bin/env python3
"""measure.py - the M1 model's hardware input, by the method of FastThreads §5.1: give
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
        # CPU time per thread: elapsed per thread x the processors the run actually had.
        res.append({r["test"]: r["ns_per_thread"] for r in doc["results"]})
        res[-1].update({r["test"] + " cpu": r["ns_per_thread"] * r.get("cpu_per_wall", 1)
                        for r in doc["results"]})
    return res, doc


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def cpu_share(build, out, k):
    """weft_calibrate: k pinned threads of register-only arithmetic; speedup / k."""
    cal = os.path.join(build, "bench", "weft_calibrate")
    d = os.path.join(out, "m1", "calibrate")
    os.makedirs(d, exist_ok=True)
    subprocess.run([cal, "--out", d], stdout=subprocess.DEVNULL, check=True)
    with open(os.path.join(d, "calibrate.json")) as f:
        pts = json.load(f)["points"]
    return {str(q["p"]): min(1.0, q["speedup"] / q["p"]) for q in pts}


def main():
    build, out = arg("--build", "build-release"), arg("--out", "bench-results")
    quick = "--quick" in sys.argv
    exe = os.path.join(build, "bench", "weft_sweep")
    k = os.cpu_count() or 1
    rounds = 3 if quick else 5
    common = ["--oversub", "", "--tests", "T1,T2", "--libs", "weft", "--reps", "3",
              "--n", "1000000", "--t2-n", "100000" if quick else "200000"]
    # On a shared machine the load changes from second to second, so every input and the
    # validation targets are measured together, in `rounds` rounds of: one copy alone,
    # k copies in parallel, the CPU share (weft_calibrate), and weft's T1/T2 at P = 1..k
    # in one process (what the model is validated against). Medians over the rounds.
    units = None
    per = {"alone": [], "copies": [], "share": [], "valid": []}
    for r in range(rounds):
        extra = ["--t2-units-per-us", "%.6g" % units] if units else []
        alone, doc = run_copies(exe, 1, out, ["--procs", "1"] + common + extra)
        if units is None:  # every later run does exactly this run's user work
            units = doc["config"]["T2"]["units_per_us"]
            extra = ["--t2-units-per-us", "%.6g" % units]
            config, machine = doc["config"], doc["machine"]
        per["alone"].append(alone[0])
        if k > 1:
            copies, _ = run_copies(exe, k, out, ["--procs", "1"] + common + extra)
            per["copies"].append({t: sum(c[t] for c in copies) / len(copies) for t in alone[0]})
            per["share"].append(cpu_share(build, out, k))
        d = os.path.join(out, "m1", "validation")
        os.makedirs(d, exist_ok=True)
        subprocess.run([exe, "--out", d, "--procs", ",".join(str(p) for p in range(1, k + 1))] + common + extra,
                       stdout=subprocess.DEVNULL, check=True)
        with open(os.path.join(d, "sweep.json")) as f:
            vres = json.load(f)["results"]
        per["valid"].append({"%s P=%d" % (x["test"], x["P"]): x["ns_per_thread"] for x in vres})
        per["valid"][-1].update({"%s P=%d cpu_per_wall" % (x["test"], x["P"]): x.get("cpu_per_wall", x["P"])
                                 for x in vres})
        print("round %d: alone %s, copies %s, share %s, validation %s" % (
            r + 1, per["alone"][-1], per["copies"][-1] if per["copies"] else "-",
            per["share"][-1] if per["share"] else "-", per["valid"][-1]))
    tests = [t for t in per["alone"][0] if not t.endswith(" cpu")]
    alone = {t: median([a[t] for a in per["alone"]]) for t in tests}
    result = {"method": "FastThreads §5.1: K private copies (separate processes, nvps=1) in "
                        "parallel vs one alone; slowdown = mean copy time / alone time; "
                        "medians over rounds (see the comment in measure.py)",
              "copies": k, "rounds": rounds, "machine": machine, "config": config,
              "alone_ns": alone, "rounds_detail": per}
    if per["copies"]:
        result["copies_ns"] = {t: median([c[t] for c in per["copies"]]) for t in tests}
        result["slowdown"] = {t: median([c[t] / a[t] for c, a in zip(per["copies"], per["alone"])]) for t in tests}
        # The slowdown in CPU time per thread: what is left once the CPU share other jobs
        # took is taken out (each copy's own CPU time over its elapsed time).
        result["slowdown_cpu"] = {t: median([c[t + " cpu"] / a[t + " cpu"]
                                             for c, a in zip(per["copies"], per["alone"])]) for t in tests}
        result["cpu_share"] = {p: median([s_[p] for s_ in per["share"]]) for p in per["share"][0]}
    keys = [key for key in per["valid"][0] if not key.endswith("cpu_per_wall")]
    result["validation_ns"] = {key: {"median": median([v[key] for v in per["valid"]]),
                                     "min": min(v[key] for v in per["valid"]),
                                     "max": max(v[key] for v in per["valid"])} for key in keys}
    lx = os.path.join(build, "bench", "weft_m1_linexfer")
    if k > 1 and os.path.exists(lx):
        txt = subprocess.run([lx, "--n", "50000" if quick else "200000", "--reps", "3" if quick else "5"],
                             capture_output=True, text=True, check=True).stdout
        result["line_transfer"] = json.loads(txt)
        print("line transfer:", result["line_transfer"])
    path = os.path.join(out, "M1_inputs.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print("alone (ns/thread):", alone)
    print("slowdown:", result.get("slowdown"), "cpu share:", result.get("cpu_share"))
    print("wrote", path)


if __name__ == "__main__":
    main()
