#!/usr/bin/env python3
"""I_run.py - runs I1 (64-byte echo round trip) and I2 (HTTP/1.1 keep-alive under wrk,
resident memory per idle connection) for weft beside Go, POSIX threads and (I1) a bare
epoll loop, each server in a fresh process, and writes OUT/I.json (bench/README.md,
"Servers and I/O").

    python3 bench/io/I_run.py --build BUILD --out DIR [--go GO] [--rows I1,I2]
        [--i1-rounds 20000] [--i1-warmup 2000] [--i1-reps 3] [--size 64]
        [--i2-conns 1,100,10000] [--i2-duration 10] [--i2-reps 1] [--i2-threads 2]
        [--idle 10000] [--libs ...] [--timeout 120]

Servers: weft = examples/echo_server.c and examples/http_server.c (one weft thread per
connection parked in weft_read; the runtime's default VPs); go = bench/go/io (one
goroutine per connection; `nethttp`: Go's net/http, I2 only; GOMAXPROCS default);
pthreads and epoll = bench/io/I_peers.c. Every point starts its server anew and kills
it after.

I1: weft_io_client (a plain blocking socket, TCP_NODELAY) makes --i1-warmup untimed and
--i1-rounds timed round trips of --size bytes on one connection; one server process per
repetition, the libraries interleaved within a repetition (so that a change in the
machine's load reaches all of them alike). Figures: the median round trip of each
repetition (median, min..max over --i1-reps) and the 99th percentile of the rounds.

I2: `wrk -t T -c C -d D --latency` against the fixed response for each C of --i2-conns
(T = min(--i2-threads, C)); requests per second and wrk's 99th-percentile latency,
socket errors as wrk counts them, and, where `perf stat` can count the
raw_syscalls:sys_enter tracepoint, the server's system calls per request (all its
threads, counted while wrk runs; null elsewhere). The runner raises its RLIMIT_NOFILE to the hard limit
(the servers and wrk inherit it); a C the limit cannot hold is recorded as "not run"
with the reason. Idle memory: --idle connections are opened to a fresh server and left
silent; once the server holds them all (its /proc/PID/fd count), (VmRSS after - VmRSS
before) / N, read 0.5 s later ("fresh") and again after --idle-settle seconds (default
3: past weft's default io_idle_stack_ms of 1 s, after which a parked thread gives back
its stack's pages; every server is measured the same way). Then one request is made
and answered on every connection, and after the same settle time the figure is read
again ("used": a keep-alive connection waiting for its next request, whose buffer has
held one). Socket buffers are kernel memory and not in VmRSS.

Exit status: 0 when every point ran (or was "not run" for a stated reason); 1 when one
failed (the JSON says which).
"""
import argparse
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

I1_LIBS = ["weft", "go", "pthreads", "epoll"]
I2_LIBS = ["weft", "weft_stackless", "go", "go_nethttp", "pthreads"]


def parse_ints(s):
    return [int(x) for x in str(s).split(",") if x.strip()]


def status_kib(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def nfds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "kernel": os.uname().release}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Server:
    """A server process: started, its port read from its first lines, killed on exit."""

    def __init__(self, cmd, env=None):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.port = None
        deadline = time.time() + 10
        while time.time() < deadline:
            # a server that neither prints nor exits must not hang the runner
            if not select.select([self.p.stdout], [], [], max(0.0, deadline - time.time()))[0]:
                break
            line = self.p.stdout.readline()
            if not line:
                break
            m = re.search(r"(?:^PORT |127\.0\.0\.1:)(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break

    def stderr(self):
        self.err.seek(0)
        lines = self.err.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def alive(self):
        return self.p.poll() is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.err.close()


def perf_counts_syscalls():
    """True when `perf stat` can count the raw_syscalls:sys_enter tracepoint here (it needs
    perf and permission to read tracepoints; some machines refuse either)."""
    perf = shutil.which("perf")
    if not perf:
        return False
    try:
        r = subprocess.run([perf, "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and re.search(r"^\d+,", r.stderr, re.M) is not None


class SyscallCount:
    """System calls made by process `pid` (all its threads) from construction to stop():
    `perf stat -e raw_syscalls:sys_enter -p PID`, stopped with SIGINT."""

    def __init__(self, pid):
        self.out = tempfile.NamedTemporaryFile(suffix=".perf", delete=False)
        self.out.close()
        self.p = subprocess.Popen([shutil.which("perf"), "stat", "-x,", "-e", "raw_syscalls:sys_enter",
                                   "-p", str(pid), "-o", self.out.name],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.2)  # perf attaches before the load starts

    def stop(self):
        """The count, or None if perf gave none."""
        n = None
        try:
            self.p.send_signal(signal.SIGINT)
            self.p.wait(timeout=10)
            with open(self.out.name) as f:
                m = re.search(r"^(\d+),", f.read(), re.M)
            n = int(m.group(1)) if m else None
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        finally:
            os.unlink(self.out.name)
        return n


class Runner:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.join(a.build, "bench", "io")
        self.records, self.notes = [], []
        self.bad = False
        self.go_bin = self._build_go()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            except (ValueError, OSError):
                pass
        self.nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.perf_syscalls = perf_counts_syscalls()  # I2's system calls per request

    def _build_go(self):
        if not self.a.go:
            self.notes.append("go: no Go toolchain given (--go): not built: Go column left blank")
            return None
        out = os.path.abspath(os.path.join(self.bin, "weft_io_go"))
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "go")
        env = dict(os.environ, GOTOOLCHAIN="local")
        r = subprocess.run([self.a.go, "build", "-o", out, "./io"], cwd=src, env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.notes.append("go: go build failed: not built: %s" % r.stderr.strip()[-300:])
            return None
        return out

    def server_cmd(self, lib, proto):
        """-> argv, or None when that server is not built"""
        if lib in ("weft", "weft_stackless"):
            ex = "weft_example_echo_server" if proto == "echo" else "weft_example_http_server"
            path = os.path.join(self.a.build, ex)
            extra = ["--stackless"] if lib == "weft_stackless" else []
            return [path, "0"] + extra if os.access(path, os.X_OK) else None
        if lib in ("go", "go_nethttp"):
            if not self.go_bin:
                return None
            return [self.go_bin, "-proto", "nethttp" if lib == "go_nethttp" else proto]
        path = os.path.join(self.bin, "weft_io_peer")
        return [path, "--lib", lib, "--proto", proto] if os.access(path, os.X_OK) else None

    def log(self, rec):
        print(json.dumps(rec) if self.a.verbose else self.line(rec), flush=True)

    @staticmethod
    def line(r):
        if r["status"] != "ok":
            what = "%s (%s)" % (r["status"], r.get("detail", ""))
        elif r["row"] == "I1":
            what = "median %.1f us [%.1f .. %.1f], p99 %.1f us" % (
                r["median_ns"] / 1e3, r["min_ns"] / 1e3, r["max_ns"] / 1e3, r["p99_ns"] / 1e3)
        elif r["row"] == "I2":
            what = "%.0f req/s [%.0f .. %.0f], p99 %.2f ms, socket errors %s" % (
                r["rps"], r["rps_min"], r["rps_max"], r["p99_ms"], r["socket_errors"])
        else:
            what = "%.2f KiB per idle connection after %.1f s (%.2f KiB after 0.5 s; %d KiB -> %d KiB, %d threads)" % (
                r["kib_per_conn"], r["settle_s"], r["kib_per_conn_fresh"], r["rss_before_kib"],
                r["rss_after_kib"], r["threads_after"] or 0)
        extra = " C=%d" % r["conns"] if "conns" in r else ""
        return "%-7s %-11s%s %s" % (r["row"], r["lib"], extra, what)

    # ---- I1 ----
    def i1(self):
        libs = [l for l in I1_LIBS if l in self.a.libs]
        per = {l: [] for l in libs}
        fail = {}
        client = os.path.join(self.bin, "weft_io_client")
        for rep in range(self.a.i1_reps):
            for lib in libs:
                if lib in fail:
                    continue
                cmd = self.server_cmd(lib, "echo")
                if cmd is None:
                    fail[lib] = ("not built", "%s server not built" % lib)
                    continue
                with Server(cmd) as s:
                    if s.port is None:
                        fail[lib] = ("failed", "server printed no port: %s" % s.stderr())
                        continue
                    r = subprocess.run(["timeout", "-k", "5", str(self.a.timeout), client,
                                        "--port", str(s.port), "--size", str(self.a.size),
                                        "--rounds", str(self.a.i1_rounds), "--warmup", str(self.a.i1_warmup)],
                                       capture_output=True, text=True)
                    res = None
                    for line in r.stdout.splitlines():
                        if line.startswith("RESULT "):
                            res = json.loads(line[7:])
                    if r.returncode in (124, 137):
                        fail[lib] = ("did not finish", "killed after %d s (timeout)" % self.a.timeout)
                    elif r.returncode == 3:
                        fail[lib] = ("wrong result", r.stderr.strip()[-200:])
                    elif r.returncode != 0 or not res:
                        fail[lib] = ("failed", "client exit %d: %s; server: %s" % (
                            r.returncode, r.stderr.strip()[-200:], s.stderr()))
                    else:
                        per[lib].append(res)
        for lib in libs:
            rec = {"row": "I1", "lib": lib, "size": self.a.size, "rounds": self.a.i1_rounds,
                   "reps": len(per[lib])}
            if lib in fail:
                rec["status"], rec["detail"] = fail[lib]
                if rec["status"] != "not built":
                    self.bad = True
            else:
                med = [r["median_ns"] for r in per[lib]]
                rec.update(status="ok", median_ns=statistics.median(med), min_ns=min(med), max_ns=max(med),
                           medians_ns=med, p99_ns=statistics.median(r["p99_ns"] for r in per[lib]),
                           p10_ns=statistics.median(r["p10_ns"] for r in per[lib]),
                           p90_ns=statistics.median(r["p90_ns"] for r in per[lib]),
                           runs=per[lib])
            self.records.append(rec)
            self.log(rec)

    # ---- I2 ----
    @staticmethod
    def parse_wrk(out):
        """wrk's --latency report -> dict (rps, p50/p99 in ms, requests, socket errors)"""
        unit = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}

        def ms(v):
            m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
            return float(m.group(1)) * unit[m.group(2)] if m else None

        d = {}
        m = re.search(r"Requests/sec:\s+([\d.]+)", out)
        d["rps"] = float(m.group(1)) if m else None
        for pct in ("50", "90", "99"):
            m = re.search(r"^\s+%s(?:\.000)?%%\s+(\S+)" % pct, out, re.M)
            d["p%s_ms" % pct] = ms(m.group(1)) if m else None
        m = re.search(r"(\d+) requests in", out)
        d["requests"] = int(m.group(1)) if m else None
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        d["socket_errors"] = ({"connect": int(m.group(1)), "read": int(m.group(2)), "write": int(m.group(3)),
                               "timeout": int(m.group(4))} if m else {})
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        d["non_2xx"] = int(m.group(1)) if m else 0
        return d

    def i2(self):
        libs = [l for l in I2_LIBS if l in self.a.libs]
        wrk = shutil.which("wrk")
        for c in self.a.i2_conns:
            runs = {l: [] for l in libs}
            fail = {}
            need = c + 64
            for rep in range(self.a.i2_reps):
                for lib in libs:
                    if lib in fail:
                        continue
                    cmd = self.server_cmd(lib, "http")
                    if cmd is None:
                        fail[lib] = ("not built", "%s server not built" % lib)
                    elif not wrk:
                        fail[lib] = ("not run", "wrk not installed")
                    elif need > self.nofile:
                        fail[lib] = ("not run", "%d connections need %d descriptors per process; "
                                     "RLIMIT_NOFILE's hard limit is %d" % (c, need, self.nofile))
                    if lib in fail:
                        continue
                    with Server(cmd) as s:
                        if s.port is None:
                            fail[lib] = ("failed", "server printed no port: %s" % s.stderr())
                            continue
                        t = max(1, min(self.a.i2_threads, c))
                        wcmd = [wrk, "-t", str(t), "-c", str(c), "-d", "%ds" % self.a.i2_duration,
                                "--latency", "--timeout", "10s", "http://127.0.0.1:%d/" % s.port]
                        sc = SyscallCount(s.p.pid) if self.perf_syscalls else None
                        try:
                            r = subprocess.run(wcmd, capture_output=True, text=True,
                                               timeout=self.a.i2_duration + self.a.timeout)
                        except subprocess.TimeoutExpired:
                            if sc:
                                sc.stop()
                            fail[lib] = ("did not finish", "wrk ran past %d s" % (self.a.i2_duration + self.a.timeout))
                            continue
                        n_sys = sc.stop() if sc else None
                        d = self.parse_wrk(r.stdout)
                        d["syscalls"] = n_sys
                        d["syscalls_per_request"] = (n_sys / d["requests"]
                                                     if n_sys is not None and d["requests"] else None)
                        d["server_alive"] = s.alive()
                        d["server_threads"] = status_kib(s.p.pid, "Threads")
                        d["server_peak_rss_kib"] = status_kib(s.p.pid, "VmHWM")
                        if r.returncode != 0 or d["rps"] is None:
                            fail[lib] = ("failed", "wrk exit %d: %s; server: %s" % (
                                r.returncode, (r.stderr or r.stdout).strip()[-200:], s.stderr()))
                        elif not d["server_alive"]:
                            fail[lib] = ("failed", "server died under load: %s" % s.stderr())
                        elif d["non_2xx"]:
                            fail[lib] = ("wrong result", "%d responses were not 2xx" % d["non_2xx"])
                        else:
                            runs[lib].append(d)
            for lib in libs:
                rec = {"row": "I2", "lib": lib, "conns": c, "duration_s": self.a.i2_duration,
                       "wrk_threads": max(1, min(self.a.i2_threads, c)), "reps": len(runs[lib])}
                if lib in fail:
                    rec["status"], rec["detail"] = fail[lib]
                    if rec["status"] not in ("not built", "not run"):
                        self.bad = True
                else:
                    v = [d["rps"] for d in runs[lib]]
                    p99 = [d["p99_ms"] for d in runs[lib] if d["p99_ms"] is not None]
                    errs = {}
                    for d in runs[lib]:
                        for k, n in d["socket_errors"].items():
                            errs[k] = errs.get(k, 0) + n
                    spr = [d["syscalls_per_request"] for d in runs[lib] if d.get("syscalls_per_request") is not None]
                    rec["syscalls_per_request"] = statistics.median(spr) if spr else None
                    rec.update(status="ok", rps=statistics.median(v), rps_min=min(v), rps_max=max(v),
                               p99_ms=statistics.median(p99) if p99 else None,
                               p50_ms=statistics.median(d["p50_ms"] for d in runs[lib] if d["p50_ms"] is not None)
                               if any(d["p50_ms"] is not None for d in runs[lib]) else None,
                               socket_errors=sum(errs.values()), socket_errors_by_kind=errs, runs=runs[lib])
                self.records.append(rec)
                self.log(rec)

    def idle(self):
        libs = [l for l in I2_LIBS if l in self.a.libs]
        n = self.a.idle
        for lib in libs:
            rec = {"row": "I2_idle", "lib": lib, "n": n}
            cmd = self.server_cmd(lib, "http")
            if cmd is None:
                rec.update(status="not built", detail="%s server not built" % lib)
                self.records.append(rec)
                self.log(rec)
                continue
            if n + 64 > self.nofile:
                rec.update(status="not run", detail="%d connections need %d descriptors; RLIMIT_NOFILE is %d"
                           % (n, n + 64, self.nofile))
                self.records.append(rec)
                self.log(rec)
                continue
            socks = []
            with Server(cmd) as s:
                try:
                    if s.port is None:
                        raise RuntimeError("server printed no port: %s" % s.stderr())
                    time.sleep(0.3)
                    base_fds, before = nfds(s.p.pid), status_kib(s.p.pid, "VmRSS")
                    threads_before = status_kib(s.p.pid, "Threads")
                    for _ in range(n):
                        k = socket.create_connection(("127.0.0.1", s.port), timeout=10)
                        socks.append(k)
                    deadline = time.time() + self.a.timeout
                    while nfds(s.p.pid) < base_fds + n and time.time() < deadline and s.alive():
                        time.sleep(0.05)
                    held = nfds(s.p.pid) - base_fds
                    if held < n:
                        raise RuntimeError("the server holds %d of %d connections after %d s" % (held, n, self.a.timeout))
                    time.sleep(0.5)
                    fresh = status_kib(s.p.pid, "VmRSS")
                    time.sleep(max(0.0, self.a.idle_settle - 0.5))
                    after = status_kib(s.p.pid, "VmRSS")
                    # then one request on every connection (a keep-alive connection that
                    # has served a request and waits for the next one), the same settle
                    # time, and again: every connection must answer
                    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                    for k in socks:
                        k.sendall(req)
                        answer = b""
                        while b"Hello, world\n" not in answer:
                            got = k.recv(4096)
                            if not got:
                                break
                            answer += got
                        if not answer.startswith(b"HTTP/1.1 200"):
                            raise RuntimeError("no 200 response on an idle connection")
                    time.sleep(self.a.idle_settle)
                    used = status_kib(s.p.pid, "VmRSS")
                    rec.update(status="ok", rss_before_kib=before, rss_after_kib=after,
                               kib_per_conn=(after - before) / n, rss_fresh_kib=fresh,
                               kib_per_conn_fresh=(fresh - before) / n, rss_used_kib=used,
                               kib_per_conn_used=(used - before) / n, settle_s=self.a.idle_settle,
                               threads_before=threads_before,
                               threads_after=status_kib(s.p.pid, "Threads"))
                except (OSError, RuntimeError) as e:
                    self.bad = True
                    rec.update(status="failed", detail=str(e))
                finally:
                    for k in socks:
                        k.close()
            self.records.append(rec)
            self.log(rec)

    def run(self):
        if "I1" in self.a.rows:
            self.i1()
        if "I2" in self.a.rows:
            self.i2()
            self.idle()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the CMake build directory (WEFT_BUILD_BENCH=ON)")
    ap.add_argument("--out", required=True, help="directory for I.json")
    ap.add_argument("--go", default=shutil.which("go") or ("/usr/local/go/bin/go" if os.access(
        "/usr/local/go/bin/go", os.X_OK) else None), help="the go command (default: PATH, /usr/local/go/bin)")
    ap.add_argument("--rows", default="I1,I2")
    ap.add_argument("--libs", default=",".join(dict.fromkeys(I1_LIBS + I2_LIBS)))
    ap.add_argument("--size", type=int, default=64, help="I1 message bytes")
    ap.add_argument("--i1-rounds", type=int, default=20000)
    ap.add_argument("--i1-warmup", type=int, default=2000)
    ap.add_argument("--i1-reps", type=int, default=3, help="I1 server processes per library")
    ap.add_argument("--i2-conns", default="1,100,10000")
    ap.add_argument("--i2-duration", type=int, default=10, help="seconds of wrk per point")
    ap.add_argument("--i2-reps", type=int, default=1)
    ap.add_argument("--i2-threads", type=int, default=2, help="wrk threads (at most C)")
    ap.add_argument("--idle", type=int, default=10000, help="idle connections for the memory figure")
    ap.add_argument("--idle-settle", type=float, default=3.0,
                    help="seconds the idle connections sit before the memory figure (at least 0.5)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per client / beyond wrk's duration")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    a.rows, a.libs, a.i2_conns = a.rows.split(","), a.libs.split(","), parse_ints(a.i2_conns)
    if a.i1_reps < 1 or a.i2_reps < 1 or a.i2_duration < 1 or a.idle < 1 or a.size < 1:
        ap.error("--i1-reps, --i2-reps, --i2-duration, --idle and --size must be at least 1")
    if a.idle_settle < 0.5:
        ap.error("--idle-settle must be at least 0.5")
    load_start = loadavg()
    r = Runner(a)
    for note in r.notes:
        print(note, flush=True)
    r.run()
    os.makedirs(a.out, exist_ok=True)
    doc = {"id": "I", "machine": machine(),
           "config": {"rows": a.rows, "size": a.size, "i1_rounds": a.i1_rounds, "i1_warmup": a.i1_warmup,
                      "i1_reps": a.i1_reps, "i2_conns": a.i2_conns, "i2_duration_s": a.i2_duration,
                      "i2_reps": a.i2_reps, "i2_threads": a.i2_threads, "idle": a.idle, "idle_settle": a.idle_settle,
                      "nofile_limit": r.nofile, "loadavg_start": load_start, "loadavg_end": loadavg(),
                      "weft_nvps": "runtime default", "go_maxprocs": "runtime default"},
           "notes": r.notes, "results": r.records}
    with open(os.path.join(a.out, "I.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % os.path.join(a.out, "I.json"))
    return 1 if r.bad else 0


if __name__ == "__main__":
    sys.exit(main())
