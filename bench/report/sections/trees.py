"""R1: fib with a thread per call; R2: N-queens with a thread per placement; R3: a
million live threads; and A3 at leaf 5 beside them. Input: R.json of
bench/trees/R_run.py (bench/README.md, "Trees of threads"), A3.json."""
from core import section, table, fmt_ns, fmt_s, spread_pct, plt

LIBS = [("weft", "weft", "tab:blue"), ("weft_shared", "weft (libweft.so)", "tab:gray"),
        ("weft_workfirst", "weft, work-first", "tab:cyan"),
        ("openmp_tasks", "OpenMP tasks†", "tab:purple"), ("tbb_task_group", "oneTBB task_group†", "tab:olive"),
        ("go", "Go", "tab:green"), ("boost_fiber", "Boost.Fiber", "tab:orange"),
        ("pthreads", "POSIX threads", "tab:red")]
NAME = {k: v for k, v, _ in LIBS}
COLOR = {k: c for k, _, c in LIBS}
# the sizes of the rows as first set (fib(30), 12 queens, 10^6 live threads)
ASKED = {"fib": 30, "queens": 12, "live": 1000000}


def _machine_line(doc, rep):
    m = doc.get("machine") or rep.machine
    return "%s, %s cores, Linux %s" % (m.get("cpu_model"), m.get("cores"), m.get("kernel"))


def _kib(k):
    if k is None:
        return "-"
    return "%.1f MiB" % (k / 1024) if k >= 10240 else "{:,} KiB".format(int(k))


def _status(r):
    if r["status"] == "did not finish":
        return "**did not finish** (> %d s)" % r.get("timeout_s", 0)
    if r["status"] == "wrong result":
        return "**wrong result** (%s)" % r.get("detail", "")
    if r["status"] == "failed":
        return "**failed** (%s)" % r.get("detail", "")
    return r["status"]


def _ns_cell(r):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return _status(r)
    return "%s ±%.0f%%" % (fmt_ns(r["ns_per_spawn"]),
                           spread_pct(r["ns_per_spawn"], r["ns_per_spawn_min"], r["ns_per_spawn_max"]))


def _sizes(res, bench):
    return sorted({r["n"] for r in res if r["bench"] == bench})


def _tree_section(rep, doc, row, bench, what):
    res = [r for r in doc["results"] if r["row"] == row]
    if not res:
        return None
    cores = (doc.get("machine") or rep.machine).get("cores") or 2
    ps = sorted({r["P"] for r in res})
    libs = [l for l, _, _ in LIBS if any(r["lib"] == l for r in res)]
    ic = {(x["lib"]): x for x in doc.get("icount", []) if x["row"] == row}

    def get(lib, n, p):
        q = [r for r in res if r["lib"] == lib and r["n"] == n and r["P"] == p]
        return q[0] if q else None

    rows = []
    for lib in libs:
        for n in sorted({r["n"] for r in res if r["lib"] == lib}):
            any_r = get(lib, n, ps[0]) or {}
            if any_r.get("status") == "not built":
                rows.append([NAME[lib], n, "not built"] + [""] * (2 * len(ps) + 1))
                continue
            spawns = next((r.get("spawns") for r in res if r["lib"] == lib and r["n"] == n and r.get("spawns")), None)
            line = [NAME[lib], n, "{:,}".format(spawns) if spawns else "-"]
            line += [_ns_cell(get(lib, n, p)) for p in ps]
            line += [_kib(get(lib, n, p).get("peak_rss_kib")) if get(lib, n, p) and get(lib, n, p)["status"] == "ok"
                     else "-" for p in ps]
            x = ic.get(lib)
            line.append("%.0f" % x["instructions_per_spawn"] if x and x.get("status") == "ok" else
                        ("failed" if x else ""))
            rows.append(line)
    heads = (["package", "n", "spawns"] +
             ["ns per spawn, P=%d%s" % (p, " (oversub.)" if p > cores else "") for p in ps] +
             ["peak RSS, P=%d" % p for p in ps] + ["instructions per spawn"])
    md = table(heads, rows)
    counted = [x for x in doc.get("icount", []) if x["row"] == row and x.get("status") == "ok"]
    if counted:
        x = counted[0]
        md += ("\nInstructions per spawn: weft only (user mode, valgrind's callgrind, nvps = 1), "
               "(Ir(%s(%d)) - Ir(%s(%d))) / (%s - %s spawns), one run counted after an uncounted "
               "warm-up.\n" % (bench, x["n_b"], bench, x["n_a"], "{:,}".format(x["spawns_b"]),
                               "{:,}".format(x["spawns_a"])))
    ran = [r for r in res if r["status"] != "not built"]
    if any(r["n"] < ASKED[bench] for r in ran):
        md += ("\n*Sizes below the row's %s(%d) in this run:* %s. The quick demo runs smaller sizes "
               "to stay within its few minutes, and a package that takes microseconds per thread a "
               "smaller one still; `scripts/demo.sh --full` runs %s(%d) and more. ns per spawn "
               "compares across sizes; peak RSS grows with the size wherever the live threads grow "
               "with the breadth of the tree.\n" % (
                   what, ASKED[bench], "; ".join("%s(%d): %s" % (what, n, ", ".join(
                       NAME[l] for l in libs if any(r["lib"] == l and r["n"] == n for r in ran)))
                       for n in sorted({r["n"] for r in ran if r["n"] < ASKED[bench]})),
                   what, ASKED[bench]))
    return md, res, libs, ps, get


def _tree_axes(ax_t, ax_m, res, libs, ps, title, cores):
    """Bars of ns per spawn (top) and peak RSS (bottom) per package and P, at each
    package's largest size; a point that did not finish is marked, not drawn."""
    width = 0.8 / max(1, len(ps))
    shown = []
    for i, lib in enumerate(libs):
        rs = [r for r in res if r["lib"] == lib and r["status"] != "not built"]
        if not rs:
            continue
        shown.append(lib)
        n = max(r["n"] for r in rs)
        x0 = len(shown) - 1
        for j, p in enumerate(ps):
            q = [r for r in rs if r["n"] == n and r["P"] == p]
            if not q:
                continue
            r = q[0]
            x = x0 - 0.4 + width * (j + 0.5)
            hatch = "//" if p > cores else None
            if r["status"] == "ok":
                ax_t.bar(x, r["ns_per_spawn"], width * 0.95, color=COLOR[lib], alpha=1.0 - 0.35 * j, hatch=hatch,
                         yerr=[[r["ns_per_spawn"] - r["ns_per_spawn_min"]], [r["ns_per_spawn_max"] - r["ns_per_spawn"]]],
                         capsize=2, ecolor="0.3")
                ax_m.bar(x, r["peak_rss_kib"] / 1024, width * 0.95, color=COLOR[lib], alpha=1.0 - 0.35 * j, hatch=hatch)
                ax_t.text(x, r["ns_per_spawn_max"] * 1.1, "P=%d" % p, ha="center", fontsize=6)
            else:
                for ax in (ax_t, ax_m):
                    ax.text(x, 0.03, "DNF" if r["status"] == "did not finish" else "ERR", ha="center",
                            va="bottom", fontsize=7, color="red", rotation=90, transform=ax.get_xaxis_transform())
    labels = []
    for lib in shown:
        ns = sorted({r["n"] for r in res if r["lib"] == lib})
        labels.append("%s\nn=%d" % (NAME[lib].replace(" task_group", "").replace(", work-first", "\nwork-first"),
                                    max(ns)))
    for ax in (ax_t, ax_m):
        ax.set_xlim(-0.6, len(shown) - 0.4)
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    ax_t.set_ylabel("ns per spawn (log)")
    ax_m.set_ylabel("peak RSS, MiB (log)")
    ax_t.set_title(title + " (bars: P = %s, left to right)" % ", ".join(map(str, ps)), fontsize=9)


@section("r1r2", "R1, R2: trees of threads - fib with a thread per call, N-queens with a thread per placement",
         inputs=("R.json",), order=55)
def r1r2(rep):
    doc = rep.load("R.json")
    cfg = doc["config"]
    cores = (doc.get("machine") or rep.machine).get("cores") or 2
    md = ("Every call of `fib` (R1), every safe placement of a queen in the next row (R2), is a thread "
          "(task†, goroutine, fiber), with no cutoff: R1 is exactly\n\n"
          "```c\nstatic void *fib(void *arg) {\n  long n = (long)arg;\n  if (n < 2) return (void *)n;\n"
          "  weft_thread_t *t; void *x;\n  weft_create(&t, NULL, fib, (void *)(n - 1));\n"
          "  long y = (long)fib((void *)(n - 2));\n  weft_join(t, &x);\n  return (void *)((long)x + y);\n}\n```\n\n"
          "and the same shape in each package (bench/trees/): OpenMP `task` + `taskwait`, a oneTBB "
          "`task_group` per call, a goroutine + `sync.WaitGroup`, a `boost::fibers::fiber` + `join` "
          "(default stack allocator, `work_stealing` on P threads). weft runs twice: linked with the "
          "static library, as every weft benchmark is, and with `libweft.so` (\"weft (libweft.so)\"), "
          "as `pkg-config` and `find_package` link a program by default. Each package runs with its defaults, "
          "nothing tuned, in a fresh process per (package, P): one warm-up, then %d timed runs; ns per "
          "spawn = run time / spawns (fib(n+1) - 1 for fib(n); the search tree's nodes below the root "
          "for queens), median ± spread; peak RSS = the process's VmHWM at exit (including its runtime "
          "and libraries: the floor is 1-4 MiB). Every run's answer is checked (fib's value; the known "
          "solution count). A process still running after %d s is killed and shown as **did not "
          "finish**. P beyond %d cores is oversubscribed. †: tasks have no stack of their own and "
          "cannot block.\n\n" % (cfg["reps"], cfg["timeout_s"], cores))
    figs = []
    for row, bench, what, title in (("R1", "fib", "fib", "R1: fib(n), a thread per call"),
                                    ("R2", "queens", "queens", "R2: N-queens, a thread per placement")):
        got = _tree_section(rep, doc, row, bench, what)
        if got is None:
            continue
        body, res, libs, ps, get = got
        md += "### %s\n\n%s\n" % (title, body)
        figs.append((res, libs, ps, title))
        n = max((r["n"] for r in res if r["lib"] == "weft"), default=None)
        w = [get("weft", n, p) for p in ps] if n else []
        for p, r in zip(ps, w):
            if r and r["status"] == "ok":
                peers = [get(l, n, p) for l in ("openmp_tasks", "tbb_task_group")]
                peers = [x for x in peers if x and x["status"] == "ok"]
                best = min(peers, key=lambda x: x["ns_per_spawn"]) if peers else None
                rep.headlines.append("%s %s(%d), P=%d: weft %s per spawn, peak RSS %s%s" % (
                    row, bench, n, p, fmt_ns(r["ns_per_spawn"]), _kib(r["peak_rss_kib"]),
                    (" (best task system: %s %s)" % (NAME[best["lib"]], fmt_ns(best["ns_per_spawn"])))
                    if best else ""))
            elif r:
                rep.headlines.append("%s %s(%d), P=%d: weft %s" % (row, bench, n, p, r["status"]))
    if not figs:
        return md + "*No R1/R2 points in this run.*\n"
    p_ = plt()
    fig, axes = p_.subplots(2, len(figs), figsize=(6.5 * len(figs), 7), squeeze=False)
    for i, (res, libs, ps, title) in enumerate(figs):
        _tree_axes(axes[0][i], axes[1][i], res, libs, ps, title, cores)
    fig.suptitle("R1/R2: ns per spawn (top, median, bars min..max) and peak RSS (bottom); DNF: did not finish; "
                 "%s" % _machine_line(doc, rep), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "R1_R2", "R1/R2: ns per spawn and peak RSS by package and P")
    md += _targets(doc)
    return md


def _targets(doc):
    """The rows' targets for weft, checked against this run's figures."""
    res = doc["results"]

    def one(row, lib, p, n=None):
        q = [r for r in res if r["row"] == row and r["lib"] == lib and r["P"] == p and (n is None or r["n"] == n)]
        return q[0] if q else None

    lines = []
    for p in (1, 2):
        w = one("R1", "weft", p, 30)
        if w is None:
            continue
        ok = w["status"] == "ok"
        lines.append(["fib(30) finishes at P=%d, peak RSS under 16 MB" % p,
                      ("finished, %s" % _kib(w["peak_rss_kib"])) if ok else w["status"],
                      "met" if ok and w["peak_rss_kib"] * 1024 < 16e6 else "not met"])
        peers = [one("R1", l, p, 30) for l in ("openmp_tasks", "tbb_task_group")]
        peers = [x for x in peers if x and x["status"] == "ok"]
        if ok and peers:
            worst = max(peers, key=lambda x: x["ns_per_spawn"])
            best = min(peers, key=lambda x: x["ns_per_spawn"])
            lines.append(["fib(30) ns per spawn at P=%d at or below oneTBB's and OpenMP's" % p,
                          "weft %s; %s" % (fmt_ns(w["ns_per_spawn"]), ", ".join(
                              "%s %s" % (NAME[x["lib"]], fmt_ns(x["ns_per_spawn"])) for x in peers)),
                          "met" if w["ns_per_spawn"] <= best["ns_per_spawn"] else
                          ("between them" if w["ns_per_spawn"] <= worst["ns_per_spawn"] else "not met")])
    ic = [x for x in doc.get("icount", []) if x["row"] == "R1" and x["lib"] == "weft" and x.get("status") == "ok"]
    if ic:
        v = ic[0]["instructions_per_spawn"]
        lines.append(["fib: at most 300 instructions per spawn", "%.0f" % v, "met" if v <= 300 else "not met"])
    for p in (1, 2):
        w = one("R3", "weft", p, 1000000)
        if w is None:
            continue
        ok = w["status"] == "ok"
        lines.append(["10^6 live blocked threads under 5 KiB each, P=%d" % p,
                      "%.2f KiB" % w["kib_per_thread"] if ok else w["status"],
                      "met" if ok and w["kib_per_thread"] < 5 else "not met"])
    if not lines:
        return ""
    return ("\n### Targets for weft at the rows' sizes, in this run\n\n" +
            table(["target", "this run", ""], lines) +
            "\nA target whose size was not run (quick mode) is not listed.\n")


@section("r3", "R3: a million live threads, each blocked on one semaphore", inputs=("R.json",), order=56)
def r3(rep):
    doc = rep.load("R.json")
    res = [r for r in doc["results"] if r["row"] == "R3"]
    if not res:
        return None
    cfg = doc["config"]
    cores = (doc.get("machine") or rep.machine).get("cores") or 2
    ps = sorted({r["P"] for r in res})
    libs = [l for l, _, _ in LIBS if any(r["lib"] == l for r in res)]
    md = ("Create n threads that each block on one semaphore (weft: a `weft_sem_t`; POSIX threads: a "
          "`sem_t`; Go: a receive from one buffered channel; Boost.Fiber: a wait on one "
          "`boost::fibers::condition_variable`), wait until the last has blocked (*create*), then "
          "release them (weft, POSIX, Go: n signals / sends, each waking one; Boost.Fiber: one "
          "`notify_all`) and join them all (*release + join*). Each repetition is a fresh process "
          "(%d per point); per live thread = (RSS once all n are blocked - RSS before the first "
          "create) / n, the handle array being allocated and touched before the first reading. "
          "Every thread is checked to have run once, after the release. Default stacks and "
          "attributes everywhere. POSIX threads run at a smaller count (a kernel thread each), "
          "confined to the first P CPUs. Cells: median ± spread.\n\n" % cfg["r3_reps"])
    rows = []
    for lib in libs:
        for r in sorted((x for x in res if x["lib"] == lib), key=lambda x: (x["n"], x["P"])):
            head = [NAME[lib], "{:,}".format(r["n"]), "%d%s" % (r["P"], " (oversub.)" if r["P"] > cores else "")]
            if r["status"] != "ok":
                rows.append(head + [_status(r)] + [""] * 3)
                continue
            n = r["n"]
            rows.append(head + [
                "%.2f KiB ±%.0f%%" % (r["kib_per_thread"], spread_pct(r["kib_per_thread"], r["kib_per_thread_min"],
                                                                     r["kib_per_thread_max"])),
                _kib(r["peak_rss_kib"]),
                "%s ±%.0f%% (%s each)" % (fmt_s(r["create_s"]), spread_pct(r["create_s"], r["create_s_min"],
                                                                          r["create_s_max"]),
                                          fmt_ns(r["create_s"] * 1e9 / n)),
                "%s ±%.0f%% (%s each)" % (fmt_s(r["release_join_s"]),
                                          spread_pct(r["release_join_s"], r["release_join_s_min"],
                                                     r["release_join_s_max"]),
                                          fmt_ns(r["release_join_s"] * 1e9 / n))])
    md += table(["package", "threads", "P", "RSS per live thread", "peak RSS", "create", "release + join"], rows)
    small = sorted({(r["lib"], r["n"]) for r in res if r["n"] < ASKED["live"]})
    if small:
        md += ("\n*Counts below 10^6:* %s (the quick demo's sizes, POSIX threads' smaller count, or a "
               "package whose memory per thread would not fit; `scripts/demo.sh --full` runs the others "
               "at 10^6).\n" % ", ".join("%s %s" % (NAME[l], "{:,}".format(n)) for l, n in small))

    p_ = plt()
    fig, (a1, a2) = p_.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / max(1, len(ps))
    shown = []
    for lib in libs:
        rs = [r for r in res if r["lib"] == lib]
        if not rs:
            continue
        shown.append(lib)
        x0 = len(shown) - 1
        n = max(r["n"] for r in rs)
        for j, p in enumerate(ps):
            q = [r for r in rs if r["P"] == p and r["n"] == n]
            if not q:
                continue
            r = q[0]
            x = x0 - 0.4 + width * (j + 0.5)
            if r["status"] != "ok":
                for ax in (a1, a2):
                    ax.text(x, 0.03, "DNF" if r["status"] == "did not finish" else "ERR", ha="center",
                            va="bottom", fontsize=7, color="red", rotation=90, transform=ax.get_xaxis_transform())
                continue
            a1.bar(x, r["kib_per_thread"], width * 0.95, color=COLOR[lib], alpha=1.0 - 0.35 * j,
                   yerr=[[r["kib_per_thread"] - r["kib_per_thread_min"]], [r["kib_per_thread_max"] - r["kib_per_thread"]]],
                   capsize=2, ecolor="0.3")
            a2.bar(x - width * 0.24, r["create_s"] * 1e9 / r["n"], width * 0.46, color=COLOR[lib], alpha=1.0 - 0.35 * j)
            a2.bar(x + width * 0.24, r["release_join_s"] * 1e9 / r["n"], width * 0.46, color=COLOR[lib],
                   alpha=1.0 - 0.35 * j, hatch="..")
    labels = ["%s\nn=%s" % (NAME[l], "{:,}".format(max(r["n"] for r in res if r["lib"] == l))) for l in shown]
    for ax in (a1, a2):
        ax.set_xlim(-0.6, len(shown) - 0.4)
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    a1.axhline(5, ls=":", color="0.4")
    a1.text(len(shown) - 0.5, 5, "5 KiB", fontsize=7, va="bottom", ha="right", color="0.4")
    a1.set_ylabel("RSS per live blocked thread (KiB)")
    a1.set_title("memory per live thread (bars: P = %s)" % ", ".join(map(str, ps)), fontsize=9)
    a2.set_yscale("log")
    a2.set_ylabel("ns per thread (log)")
    a2.set_title("create (plain) and release + join (dotted) per thread", fontsize=9)
    fig.suptitle("R3: n threads blocked on one semaphore; median of %d fresh processes; %s" % (
        cfg["r3_reps"], _machine_line(doc, rep)), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "R3", "R3: a million live threads, memory and time per thread")
    for r in res:
        if r["lib"] == "weft":
            rep.headlines.append("R3 %s live weft threads, P=%d: %s" % (
                "{:,}".format(r["n"]), r["P"], "%.2f KiB each, create %s, release + join %s" % (
                    r["kib_per_thread"], fmt_s(r["create_s"]), fmt_s(r["release_join_s"]))
                if r["status"] == "ok" else r["status"]))
    md += _a3_leaf5(rep)
    return md


def _a3_leaf5(rep):
    """A3 at leaf 5 (the most threads) again, beside the rows above."""
    doc = rep.load("A3.json")
    if not doc:
        return "\n*A3 at leaf 5: A3 not run.*\n"
    rs = [r for r in doc["results"] if r["leaf"] == 5]
    if not rs:
        return "\n*A3 at leaf 5: this run's A3 has no leaf 5.*\n"
    ser = next((r for r in rs if r["lib"] == "serial"), None)
    rows = []
    for r in sorted(rs, key=lambda r: (r["lib"] != "serial", r["lib"] != "weft", r["P"])):
        rows.append([{"serial": "serial (calls)", "openmp_tasks": "OpenMP tasks†"}.get(r["lib"], r["lib"]), r["P"],
                     "{:,}".format(r["threads"]),
                     "%s ±%.0f%%" % (fmt_s(r["median_s"]), spread_pct(r["median_s"], r["min_s"], r["max_s"])),
                     "%.2fx" % (ser["median_s"] / r["median_s"]) if ser else "-"])
    return ("\n### A3 at leaf 5, again\n\nThe quicksort of the A3 section at its smallest leaf size "
            "(%s records; the most threads: one detached thread per call, none waiting for its "
            "children), from the same run:\n\n" % "{:,}".format(doc["config"]["records"]) +
            table(["version", "P", "threads (calls)", "run time", "speedup over serial"], rows))
