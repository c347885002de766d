"""I1: a 64-byte echo round trip; I2: an HTTP/1.1 keep-alive server under wrk and the
memory an idle connection holds; I3: T1 beside threads waiting in I/O. Inputs: I.json
of bench/io/I_run.py and I3.json of weft_io_i3 (bench/README.md, "Servers and I/O").
(Named io_rows, not io: make_report.py imports sections by module name, and `io` is
Python's own module.)"""
from core import section, table, cell, fmt_ns, spread_pct, plt

NAME = {"weft": "weft", "weft_stackless": "weft --stackless", "go": "Go (net)", "go_nethttp": "Go (net/http)†", "pthreads": "POSIX threads",
        "epoll": "epoll loop (C)"}
COLOR = {"weft": "tab:blue", "weft_stackless": "tab:cyan", "go": "tab:green", "go_nethttp": "tab:olive", "pthreads": "tab:red",
         "epoll": "tab:gray"}


def _status(r):
    d = r.get("detail", "")
    return "**%s**%s" % (r["status"], " (%s)" % d if d else "")


def _machine_line(doc, rep):
    m = doc.get("machine") or rep.machine
    return "%s, %s cores, Linux %s" % (m.get("cpu_model"), m.get("cores"), m.get("kernel"))


def _load_line(doc):
    c = doc.get("config", {})
    return ("load average (1, 5, 15 min) at the start / end of the runner: %s / %s; other jobs "
            "shared the processors when it exceeds the core count, so compare within this run"
            % (c.get("loadavg_start", "?"), c.get("loadavg_end", "?")))


@section("i1", "I1: a 64-byte echo round trip over loopback", inputs=("I.json",), order=80)
def i1(rep):
    doc = rep.load("I.json")
    res = [r for r in (doc or {}).get("results", []) if r["row"] == "I1"]
    if not res:
        return None
    c = doc["config"]
    md = ("One TCP connection on 127.0.0.1; the client (`weft_io_client`, a plain blocking "
          "socket) sends %d bytes and reads them back, %s untimed then %s timed round trips, "
          "each timed alone. Server: weft = `examples/echo_server.c` (a weft thread per "
          "connection in `weft_read`/`weft_write`), Go = a goroutine per connection (net), POSIX "
          "threads = a thread per connection in blocking `read`/`write`, epoll = one "
          "level-triggered loop. %d server processes per library, interleaved; the round trip "
          "is the median of each process's rounds (median, ± half the min..max of the "
          "processes), p10/p90/p99 of the rounds (median over the processes).\n\n"
          % (c["size"], "{:,}".format(c["i1_warmup"]), "{:,}".format(c["i1_rounds"]), c["i1_reps"]))
    base = next((r for r in res if r["lib"] == "weft" and r["status"] == "ok"), None)
    rows = []
    for r in res:
        if r["status"] != "ok":
            rows.append([NAME.get(r["lib"], r["lib"]), _status(r), "-", "-", "-", "-"])
            continue
        rows.append([NAME.get(r["lib"], r["lib"]), cell(r["median_ns"], r["min_ns"], r["max_ns"]),
                     fmt_ns(r["p10_ns"]), fmt_ns(r["p90_ns"]), fmt_ns(r["p99_ns"]),
                     "%.2f" % (r["median_ns"] / base["median_ns"]) if base else "-"])
    md += table(["server", "round trip (median)", "p10", "p90", "p99", "/ weft"], rows)
    md += "\n- machine: %s\n- %s\n" % (_machine_line(doc, rep), _load_line(doc))
    if base:
        others = ", ".join("%s %s" % (NAME.get(r["lib"], r["lib"]), fmt_ns(r["median_ns"]))
                           for r in res if r["lib"] != "weft" and r["status"] == "ok")
        rep.headlines.append("I1 %d-byte echo round trip: weft %s (%s)" % (c["size"], fmt_ns(base["median_ns"]), others))
    return md


def _rps(r):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return _status(r)
    s = "{:,.0f} ±{:.0f}%".format(r["rps"], spread_pct(r["rps"], r["rps_min"], r["rps_max"]))
    if r.get("socket_errors"):
        s += " (%d socket errors)" % r["socket_errors"]
    return s


def _p99(r):
    if r is None or r["status"] != "ok" or r.get("p99_ms") is None:
        return "-"
    return "%.2f ms" % r["p99_ms"]


@section("i2", "I2: an HTTP/1.1 keep-alive server under wrk", inputs=("I.json",), order=81)
def i2(rep):
    doc = rep.load("I.json")
    res = [r for r in (doc or {}).get("results", []) if r["row"] == "I2"]
    idle = [r for r in (doc or {}).get("results", []) if r["row"] == "I2_idle"]
    if not res and not idle:
        return None
    c = doc["config"]
    conns = sorted({r["conns"] for r in res})
    libs = [l for l in NAME if any(r["lib"] == l for r in res + idle)]
    md = ("Every server answers each request with the same fixed 13-byte response and keeps "
          "the connection open, one thread (goroutine) per connection: weft = "
          "`examples/http_server.c`; weft --stackless = the same, whose connections wait for "
          "their next request without a stack (`weft_fd_spawn`); Go (net) = the same loop over `net.Conn`, POSIX threads = "
          "the same loop with blocking calls; † Go (net/http) is the standard library's server "
          "(it parses fully and adds a Date header), for reference. Load: `wrk -t T -c C -d %ds "
          "--latency` (T = min(%d, C)), %d run(s) per point, each against a fresh server "
          "process. wrk runs on the same %s cores as the server, so the figures are of the pair. "
          "RLIMIT_NOFILE of the runner, wrk and the servers: %s.\n\n"
          % (c["i2_duration_s"], c["i2_threads"], c["i2_reps"],
             (doc.get("machine") or rep.machine).get("cores"), c.get("nofile_limit")))
    if res:
        get = {(r["lib"], r["conns"]): r for r in res}
        rows = [[NAME[l]] + [x for C in conns for x in (_rps(get.get((l, C))), _p99(get.get((l, C))))]
                for l in libs if any(r["lib"] == l for r in res)]
        hdr = ["server"] + [x for C in conns for x in ("req/s, C=%s" % "{:,}".format(C), "p99, C=%s" % "{:,}".format(C))]
        md += table(hdr, rows)
        p = plt()
        fig, ax = p.subplots(figsize=(7, 4))
        w = 0.8 / max(1, len(libs))
        for i, l in enumerate(l for l in libs if any(r["lib"] == l for r in res)):
            ys = [get[(l, C)]["rps"] if get.get((l, C), {}).get("status") == "ok" else 0 for C in conns]
            ax.bar([k + i * w for k in range(len(conns))], ys, w, label=NAME[l], color=COLOR[l])
        ax.set_xticks([k + 0.4 - w / 2 for k in range(len(conns))])
        ax.set_xticklabels(["%s conn." % "{:,}".format(C) for C in conns])
        ax.set_ylabel("requests per second (wrk)")
        ax.set_title("I2: fixed HTTP response, keep-alive")
        ax.legend(fontsize=8)
        fig.tight_layout()
        md += "\n" + rep.save_fig(fig, "I2", "I2 requests per second")
        if any(r.get("syscalls_per_request") is not None for r in res):
            md += ("\n**System calls per request** (the server's, all its threads, counted by "
                   "`perf stat -e raw_syscalls:sys_enter` while wrk ran; median over the runs):\n\n")
            srows = [[NAME[l]] + ["%.2f" % get[(l, C)]["syscalls_per_request"]
                                  if get.get((l, C), {}).get("syscalls_per_request") is not None else "-"
                                  for C in conns]
                     for l in libs if any(r["lib"] == l for r in res)]
            md += table(["server"] + ["C=%s" % "{:,}".format(C) for C in conns], srows)
        top = max(conns)
        wr = get.get(("weft", top))
        if wr and wr["status"] == "ok":
            others = ", ".join("%s %s" % (NAME[l], "{:,.0f}".format(get[(l, top)]["rps"])) for l in libs
                               if l != "weft" and get.get((l, top), {}).get("status") == "ok")
            rep.headlines.append("I2 HTTP keep-alive at %s connections: weft {:,.0f} req/s, p99 %.1f ms (%s)".format(
                wr["rps"]) % ("{:,}".format(top), wr["p99_ms"] or 0, others))
    if idle:
        settle = c.get("idle_settle", 0.5)
        md += ("\n**Resident memory per idle connection**: %s connections opened and left "
               "silent; (server VmRSS - VmRSS before) / N, 0.5 s after the server holds them "
               "all and again %.1f s after (weft's parked threads give their stacks back "
               "after 1 s: docs/io.md \"Stacks of idle threads\"). Socket buffers are kernel "
               "memory and are not counted.\n\n" % ("{:,}".format(c["idle"]), settle))
        rows = []
        for r in idle:
            if r["status"] != "ok":
                rows.append([NAME.get(r["lib"], r["lib"]), _status(r), "-", "-", "-"])
            else:
                fresh = r.get("kib_per_conn_fresh")
                rows.append([NAME.get(r["lib"], r["lib"]), "%.2f KiB" % r["kib_per_conn"],
                             "%.2f KiB" % fresh if fresh is not None else "-",
                             "{:,} → {:,} KiB".format(r["rss_before_kib"], r["rss_after_kib"]),
                             "%s → %s" % (r.get("threads_before"), r.get("threads_after"))])
        md += table(["server", "per idle connection (%.1f s)" % settle, "(0.5 s)",
                     "VmRSS before → after", "kernel threads"], rows)
        w = next((r for r in idle if r["lib"] == "weft" and r["status"] == "ok"), None)
        if w:
            others = ", ".join("%s %.1f KiB" % (NAME.get(r["lib"], r["lib"]), r["kib_per_conn"])
                               for r in idle if r["lib"] != "weft" and r["status"] == "ok")
            rep.headlines.append("I2 resident memory per idle connection (%s): weft %.1f KiB (%s)"
                                 % ("{:,}".format(r["n"]), w["kib_per_conn"], others))
    md += "\n- machine: %s\n- %s\n" % (_machine_line(doc, rep), _load_line(doc))
    return md


I3_NAME = {"alone": "T1 alone", "io_wait": "+ %(waiters)d parked in `weft_read`",
           "io_blocking": "+ %(waiters)d in `weft_read`, %(blocking)d in `weft_blocking(read)`",
           "unannounced": "+ %(waiters)d in `weft_read`, %(unannounced)d plain `read` (one per VP but one)"}


@section("i3", "I3: thread throughput (T1) while threads wait in I/O", inputs=("I3.json",), order=82)
def i3(rep):
    doc = rep.load("I3.json")
    res = (doc or {}).get("results", [])
    if not res:
        return None
    c = doc.get("config", {})
    md = ("T1 (P chains of detached null threads, each creating its successor, %s threads in "
          "all, P VPs) alone and while other weft threads wait: parked in `weft_read` on "
          "socketpairs that get no data until T1 ends; in `weft_blocking` of a `read(2)` on a "
          "pipe (the read holds a kernel thread of the pool, the weft thread is parked); or in a "
          "plain `read(2)` weft is not told about, which holds its VP's kernel thread (run at "
          "P >= 2 with P - 1 such threads: with P of them no VP would be left for T1). One "
          "warm-up, then %s runs: median ± spread; *alone / this* = median time alone over "
          "median time under the condition (1.00: waiting threads cost T1 nothing).\n\n"
          % ("{:,}".format(c.get("n", 0)), c.get("reps")))
    alone = {r["P"]: r for r in res if r["variant"] == "alone"}
    rows = []
    for r in res:
        what = I3_NAME.get(r["variant"], r["variant"]) % r
        t = cell(r["median_s"], r["min_s"], r["max_s"], "s")
        if r.get("stalled_runs"):
            t += " (%d runs stalled until the watchdog)" % r["stalled_runs"]
        if not r.get("ok", True):
            t += " **wrong result**"
        a = alone.get(r["P"])
        rows.append([r["P"], what, t, fmt_ns(r["ns_per_thread"]),
                     "%.2f" % (a["median_s"] / r["median_s"]) if a else "-"])
    md += table(["P", "condition", "T1 time", "per thread", "alone / this"], rows)
    md += "\n- machine: %s\n" % _machine_line(doc, rep)
    for p in sorted(alone):
        parts = ["%s %.2f" % (r["variant"], alone[p]["median_s"] / r["median_s"])
                 for r in res if r["P"] == p and r["variant"] != "alone"]
        if parts:
            rep.headlines.append("I3 T1 at P=%d, time alone / time beside waiting threads: %s" % (p, ", ".join(parts)))
    return md


I0_CASE = {"pipe": "`weft_read` on a pipe holding data (no park) / `read(2)`",
           "file": "`weft_pread` of a page-cached file / `pread(2)`",
           "park": "round trip over two pipes, every read waits: two weft threads on one VP "
                   "(each read parks) / two kernel threads in blocking calls"}


@section("i0", "I0: a weft read that completes at once, and a parked read",
         inputs=("I0.json", "I0_icount.json"), order=79)
def i0(rep):
    doc = rep.load("I0.json")
    ic = rep.load("I0_icount.json")
    res = (doc or {}).get("results", [])
    icr = (ic or {}).get("results", [])
    if not res and not icr:
        return None
    md = ("`weft_io_i0` (`bench/io/I0_read.c`): one weft thread on one VP. *pipe* and *file*: "
          "reads of %s bytes whose data is already there, so no read waits; *park*: round "
          "trips in which every read waits for the other side's write. weft's calls against "
          "the plain system calls, under each I/O engine the kernel allows. Time: %s reads "
          "(round trips) per run, one warm-up, %s runs: median ± spread. Instructions: "
          "callgrind, user mode only (a system call's kernel side is not counted, so the plain "
          "calls count their libc wrappers), N vs 2N operations (`bench/io/i0_icount.sh`).\n\n"
          % ((doc or {}).get("config", {}).get("size", 64),
             "{:,}".format((doc or {}).get("config", {}).get("n", 0)),
             (doc or {}).get("config", {}).get("reps", "?")))
    counts = {(r["engine"], r["case"]): r["instructions_per_op"] for r in icr}
    rows = []
    keys = []
    for r in res:
        k = (r["engine"], r["case"])
        if k not in keys:
            keys.append(k)
    for e, c in keys:
        w = next((r for r in res if r["engine"] == e and r["case"] == c and r["lib"] == "weft"), None)
        p = next((r for r in res if r["engine"] == e and r["case"] == c and r["lib"] == "plain"), None)
        iw, ip = counts.get((e, "weft_" + c)), counts.get((e, "plain_" + c))
        rows.append([e, I0_CASE.get(c, c),
                     cell(w["median_ns"], w["min_ns"], w["max_ns"]) if w else "-",
                     cell(p["median_ns"], p["min_ns"], p["max_ns"]) if p else "-",
                     "%.1f" % iw if iw is not None else "-", "%.1f" % ip if ip is not None else "-"])
    if not res:  # instruction counts only
        for (e, c), v in counts.items():
            if c.startswith("weft_"):
                rows.append([e, I0_CASE.get(c[5:], c[5:]), "-", "-", "%.1f" % v if v is not None else "-",
                             "%.1f" % counts.get((e, "plain_" + c[5:])) if counts.get((e, "plain_" + c[5:])) is not None else "-"])
    md += table(["engine", "case (weft / plain)", "weft", "plain", "weft instr.", "plain instr."], rows)
    if doc:
        md += "\n- machine: %s\n" % _machine_line(doc, rep)
    for e, c in keys:
        w = next((r for r in res if r["engine"] == e and r["case"] == c and r["lib"] == "weft"), None)
        p = next((r for r in res if r["engine"] == e and r["case"] == c and r["lib"] == "plain"), None)
        if w and p and c != "park":
            rep.headlines.append("I0 %s read that completes at once (%s engine): weft %s, plain %s" %
                                 (c, e, fmt_ns(w["median_ns"]), fmt_ns(p["median_ns"])))
    return md
