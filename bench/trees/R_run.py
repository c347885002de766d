#!/usr/bin/env python3
"""R_run.py - runs R1 (fib, a thread per call), R2 (N-queens, a thread per
placement) and R3 (a million live threads) for weft beside OpenMP tasks, oneTBB
task_group, Go, Boost.Fiber and (R3) POSIX threads, each point in a fresh process under
`timeout`, and writes OUT/R.json (bench/README.md, "Trees of threads"). R1/R2 run weft
twice: linked with the static library as every weft benchmark is ("weft"), and with
libweft.so, as pkg-config and find_package link by default ("weft_shared").

    python3 bench/trees/R_run.py --build BUILD --out DIR [--go GO] [--procs 1,2]
        [--reps 3] [--r3-reps 3] [--r1-n 30] [--r2-n 12] [--r3-n 1000000]
        [--size LIB:BENCH=N[,N...]]... [--timeout 120] [--libs ...] [--rows R1,R2,R3]
        [--icount-fib 15,18] [--icount-queens 7,8] [--no-icount]

R1/R2: one process per (n, library, P): one warm-up, then --reps timed runs; ns per
spawn = run time / spawns (median, min, max over the runs); peak RSS = that process's
VmHWM at exit. R3: one process per repetition (--r3-reps), each creating the threads
once; per live thread = (VmRSS once all are blocked - VmRSS before the creates) / count.
--size gives one library a different size for one benchmark (fib, queens, live), e.g.
`--size boost_fiber:fib=24` where a package takes microseconds per thread; the report
names the size of every cell. A process that runs past --timeout seconds is killed and
recorded as "did not finish"; a wrong answer (the program's "WRONG RESULT", exit 3) as
"wrong result"; neither is ever turned into a figure. Instructions per spawn (weft
only): callgrind at two sizes, (Ir(b) - Ir(a)) / (spawns(b) - spawns(a)), counting one
run after an uncounted warm-up, nvps = 1.

Exit status: 0 when every point finished or did not finish in time; 1 when a point gave
a wrong result or failed otherwise (the JSON says which).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROWS = {"R1": "fib", "R2": "queens", "R3": "live"}
TREE_LIBS = ["weft", "weft_shared", "weft_workfirst", "openmp_tasks", "tbb_task_group", "go", "boost_fiber"]
LIVE_LIBS = ["weft", "go", "boost_fiber", "pthreads"]
# the rows' default sizes, and R3's smaller pthreads count (a kernel thread each)
DEFAULT_SIZE = {"pthreads:live": [10000]}


def parse_ints(s):
    return [int(x) for x in str(s).split(",") if x.strip()]


def summary(v):
    return statistics.median(v), min(v), max(v)


class Runner:
    def __init__(self, args):
        self.a = args
        self.trees = os.path.join(args.build, "bench", "trees")
        self.cores = os.cpu_count() or 1
        self.records, self.icount, self.notes = [], [], []
        self.bad = False
        self.unbuilt = set()
        self.go_bin = self._build_go()

    def _build_go(self):
        if not self.a.go:
            self.notes.append("go: no Go toolchain given (--go): not built: Go column left blank")
            return None
        out = os.path.abspath(os.path.join(self.trees, "weft_trees_go"))
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "go")
        env = dict(os.environ, GOTOOLCHAIN="local")
        r = subprocess.run([self.a.go, "build", "-o", out, "./trees"], cwd=src, env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.notes.append("go: go build failed: not built: %s" % r.stderr.strip()[-300:])
            return None
        return out

    def command(self, lib, bench, p, n, reps):
        b = {"weft": "weft_trees", "weft_workfirst": "weft_trees", "pthreads": "weft_trees",
             "weft_shared": "weft_trees_shared",
             "openmp_tasks": "weft_trees_omp", "tbb_task_group": "weft_trees_tbb",
             "boost_fiber": "weft_trees_fiber"}.get(lib)
        path = self.go_bin if lib == "go" else os.path.join(self.trees, b) if b else None
        if not path or not os.access(path, os.X_OK):
            return None
        cmd = [path, "--bench", bench, "--p", str(p), "--n", str(n), "--reps", str(reps)]
        if b == "weft_trees":
            cmd += ["--lib", lib]
        elif b == "weft_trees_shared":  # the same program against libweft.so
            cmd += ["--lib", "weft"]
        return cmd

    def run_once(self, cmd):
        """-> (status, detail, the RESULT line's dict or None, wall seconds)"""
        t0 = time.time()
        r = subprocess.run(["timeout", "-k", "5", str(self.a.timeout)] + cmd, capture_output=True, text=True)
        wall = time.time() - t0
        res = None
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[len("RESULT "):])
        err = r.stderr.strip().splitlines()
        if r.returncode in (124, 137):
            return "did not finish", "killed after %d s (timeout)" % self.a.timeout, None, wall
        if r.returncode == 3:
            self.bad = True
            return "wrong result", (err[-1] if err else "exit 3"), None, wall
        if r.returncode == 4:
            return "not built", (r.stdout.strip().splitlines() or ["not built"])[-1], None, wall
        if r.returncode != 0 or res is None or not res.get("ok"):
            self.bad = True
            why = "exit %d" % r.returncode if r.returncode >= 0 else "signal %d" % -r.returncode
            return "failed", "%s: %s" % (why, err[-1] if err else "no result line"), None, wall
        return "ok", "", res, wall

    def sizes(self, lib, bench, default):
        return self.a.size.get("%s:%s" % (lib, bench)) or DEFAULT_SIZE.get("%s:%s" % (lib, bench)) or default

    def log(self, rec):
        if rec["status"] == "ok":
            if rec["row"] == "R3":
                what = "%.2f KiB/thread, create %.3f s, release+join %.3f s" % (
                    rec["kib_per_thread"], rec["create_s"], rec["release_join_s"])
            else:
                what = "%.1f ns/spawn [%.1f .. %.1f], peak RSS %d KiB" % (
                    rec["ns_per_spawn"], rec["ns_per_spawn_min"], rec["ns_per_spawn_max"], rec["peak_rss_kib"])
        elif rec["status"] == "not built":
            # said once per package (scripts/demo.sh collects "not built" lines)
            if rec["lib"] not in self.unbuilt:
                self.unbuilt.add(rec["lib"])
                print(rec["detail"], flush=True)
            return
        else:
            what = "%s (%s)" % (rec["status"], rec["detail"])
        print("%s %-15s P=%d n=%-8d %s" % (rec["row"], rec["lib"], rec["P"], rec["n"], what), flush=True)

    def tree_point(self, row, bench, lib, p, n):
        rec = {"row": row, "bench": bench, "lib": lib, "P": p, "n": n, "oversubscribed": p > self.cores,
               "timeout_s": self.a.timeout}
        cmd = self.command(lib, bench, p, n, self.a.reps)
        if cmd is None:
            rec.update(status="not built", detail="%s: not built" % lib)
        else:
            st, detail, res, wall = self.run_once(cmd)
            rec.update(status=st, detail=detail, wall_s=round(wall, 3))
            if res:
                s = res["seconds"]
                med, lo, hi = summary(s)
                sp = res["spawns"]
                rec.update(spawns=sp, result=res["result"], seconds=s, median_s=med, min_s=lo, max_s=hi,
                           ns_per_spawn=med * 1e9 / sp, ns_per_spawn_min=lo * 1e9 / sp,
                           ns_per_spawn_max=hi * 1e9 / sp, peak_rss_kib=res["peak_rss_kib"],
                           rss_start_kib=res["rss_start_kib"], warmup_runs=res.get("warmup_runs", 1),
                           reps=len(s))
                if not self.a.machine:
                    self.a.machine = res.get("machine")
        self.records.append(rec)
        self.log(rec)

    def live_point(self, lib, p, n):
        rec = {"row": "R3", "bench": "live", "lib": lib, "P": p, "n": n, "threads": n,
               "oversubscribed": p > self.cores, "timeout_s": self.a.timeout}
        cmd = self.command(lib, "live", p, n, 1)
        if cmd is None:
            rec.update(status="not built", detail="%s: not built" % lib)
        else:
            runs = []
            for _ in range(self.a.r3_reps):
                st, detail, res, wall = self.run_once(cmd)
                if st != "ok":
                    rec.update(status=st, detail=detail + (" (after %d good runs)" % len(runs) if runs else ""))
                    break
                runs.append(res)
                if not self.a.machine:
                    self.a.machine = res.get("machine")
            else:
                per = [(r["rss_blocked_kib"] - r["rss_before_kib"]) / n for r in runs]
                rec.update(status="ok", detail="", reps=len(runs))
                for key, vals in (("create_s", [r["create_s"] for r in runs]),
                                  ("release_join_s", [r["release_join_s"] for r in runs]),
                                  ("kib_per_thread", per),
                                  ("peak_rss_kib", [r["peak_rss_kib"] for r in runs]),
                                  ("rss_before_kib", [r["rss_before_kib"] for r in runs])):
                    rec[key], rec[key + "_min"], rec[key + "_max"] = summary(vals)
                    rec[key + "_all"] = vals
        self.records.append(rec)
        self.log(rec)

    def count(self, bench, lib, n):
        f = tempfile.NamedTemporaryFile(prefix="trees_cg.", delete=False)
        f.close()
        cmd = self.command(lib, bench, 1, n, 1)
        r = subprocess.run(["timeout", "-k", "5", str(self.a.timeout), "valgrind", "--tool=callgrind",
                            "--collect-atstart=no", "--callgrind-out-file=" + f.name] + cmd + ["--callgrind"],
                           capture_output=True, text=True)
        ir = spawns = None
        try:
            with open(f.name) as fh:
                m = re.search(r"^summary:\s*(\d+)", fh.read(), re.M)
                ir = int(m.group(1)) if m else None
        except OSError:
            pass
        os.unlink(f.name)
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                spawns = json.loads(line[7:])["spawns"]
        if r.returncode == 4:
            return None
        if r.returncode != 0 or not ir or not spawns:
            raise RuntimeError("callgrind %s %s n=%d: exit %d, %s" % (
                lib, bench, n, r.returncode, (r.stderr.strip().splitlines() or ["no summary"])[-1]))
        return ir, spawns

    def icounts(self):
        if self.a.no_icount:
            return
        if not shutil.which("valgrind"):
            self.notes.append("instructions per spawn: valgrind not installed: not counted")
            return
        for row, bench, sizes in (("R1", "fib", self.a.icount_fib), ("R2", "queens", self.a.icount_queens)):
            if row not in self.a.rows:
                continue
            for lib in ("weft", "weft_workfirst"):
                if lib not in self.a.libs or self.command(lib, bench, 1, 1, 1) is None:
                    continue
                rec = {"row": row, "bench": bench, "lib": lib, "n_a": sizes[0], "n_b": sizes[1],
                       "tool": "valgrind --tool=callgrind", "nvps": 1}
                try:
                    a = self.count(bench, lib, sizes[0])
                    if a is None:  # built without that column (exit 4)
                        continue
                    (ir_a, sp_a), (ir_b, sp_b) = a, self.count(bench, lib, sizes[1])
                    rec.update(status="ok", ir_a=ir_a, ir_b=ir_b, spawns_a=sp_a, spawns_b=sp_b,
                               instructions_per_spawn=(ir_b - ir_a) / (sp_b - sp_a))
                    print("%s %-15s instructions per spawn %.1f (callgrind, n=%d vs %d)" % (
                        row, lib, rec["instructions_per_spawn"], sizes[0], sizes[1]), flush=True)
                except (RuntimeError, TypeError) as e:
                    rec.update(status="failed", detail=str(e))
                    print("%s %-15s instructions per spawn: %s" % (row, lib, e), flush=True)
                self.icount.append(rec)

    def run(self):
        procs = self.a.procs
        for row in ("R1", "R2"):
            if row not in self.a.rows:
                continue
            bench = ROWS[row]
            default = self.a.r1_n if row == "R1" else self.a.r2_n
            for lib in TREE_LIBS:
                if lib not in self.a.libs:
                    continue
                for n in self.sizes(lib, bench, default):
                    for p in procs:
                        self.tree_point(row, bench, lib, p, n)
        if "R3" in self.a.rows:
            for lib in LIVE_LIBS:
                if lib not in self.a.libs:
                    continue
                for n in self.sizes(lib, "live", self.a.r3_n):
                    for p in procs:
                        self.live_point(lib, p, n)
        self.icounts()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory (WEFT_BUILD_BENCH=ON)")
    ap.add_argument("--out", required=True, help="directory for R.json")
    ap.add_argument("--go", default=shutil.which("go") or ("/usr/local/go/bin/go" if os.access(
        "/usr/local/go/bin/go", os.X_OK) else None), help="the go command (default: PATH, /usr/local/go/bin)")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--reps", type=int, default=3, help="R1/R2 timed runs per process, after one warm-up")
    ap.add_argument("--r3-reps", type=int, default=3, help="R3 processes per point")
    ap.add_argument("--r1-n", default="30")
    ap.add_argument("--r2-n", default="12")
    ap.add_argument("--r3-n", default="1000000")
    ap.add_argument("--size", action="append", default=[], metavar="LIB:BENCH=N[,N]")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per process")
    ap.add_argument("--libs", default=",".join(dict.fromkeys(TREE_LIBS + LIVE_LIBS)))
    ap.add_argument("--rows", default="R1,R2,R3")
    ap.add_argument("--icount-fib", default="15,18")
    ap.add_argument("--icount-queens", default="7,8")
    ap.add_argument("--no-icount", action="store_true")
    a = ap.parse_args()
    a.procs, a.r1_n, a.r2_n, a.r3_n = parse_ints(a.procs), parse_ints(a.r1_n), parse_ints(a.r2_n), parse_ints(a.r3_n)
    a.icount_fib, a.icount_queens = parse_ints(a.icount_fib), parse_ints(a.icount_queens)
    a.libs, a.rows = a.libs.split(","), a.rows.split(",")
    sizes = {}
    for s in a.size:
        k, _, v = s.partition("=")
        if ":" not in k or not v:
            ap.error("--size wants LIB:BENCH=N[,N], got %r" % s)
        sizes[k] = parse_ints(v)
    a.size = sizes
    a.machine = None
    if a.reps < 1 or a.r3_reps < 1 or len(a.icount_fib) != 2 or len(a.icount_queens) != 2:
        ap.error("--reps and --r3-reps must be at least 1; --icount-* take two sizes")
    r = Runner(a)
    for note in r.notes:
        print(note, flush=True)
    r.run()
    os.makedirs(a.out, exist_ok=True)
    doc = {"machine": a.machine or {"cpu_model": "unknown", "cores": os.cpu_count(), "kernel": os.uname().release},
           "config": {"procs": a.procs, "reps": a.reps, "warmup_runs": 1, "r3_reps": a.r3_reps,
                      "r1_n": a.r1_n, "r2_n": a.r2_n, "r3_n": a.r3_n,
                      "sizes": {k: v for k, v in list(DEFAULT_SIZE.items()) + list(a.size.items())},
                      "timeout_s": a.timeout, "libs": a.libs, "rows": a.rows, "notes": r.notes},
           "results": r.records, "icount": r.icount}
    path = os.path.join(a.out, "R.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % path)
    return 1 if r.bad else 0


if __name__ == "__main__":
    sys.exit(main())
