"""X3 (the C++ layer, weft/weft.hpp, against the C interface on L1-L4; Presto §3.4) and
L7's set-ups (C-Threads §5.1 PingPong: 1 kernel thread, 2 kernel threads, wired, beside
pthreads and Boost.Fiber). Both read the rows weft_bench_latency writes into latency.json
(bench/ext/X3_cpp.cc, L7_condvar.cc) and, for instruction counts, icount.json
(bench/icount.sh: weft_icount vs weft_icount_cpp). Formerly bench/plot_x3_l7.py."""
from core import section, table, fmt_ns, plt

X3 = [("L1 create", "L1_create/weft", "X3_L1_create/weft_cpp", "L1_create"),
      ("L2 null thread", "L2_null_thread/weft", "X3_L2_null_thread/weft_cpp", "L2"),
      ("L2 null thread, lambda capturing 2 words (heap closure)", "L2_null_thread/weft",
       "X3_L2_null_thread/weft_cpp_heap", None),
      ("L3 switch", "L3_switch/weft", "X3_L3_switch/weft_cpp", "L3"),
      ("L4 mutex lock+unlock", "L4_mutex/weft", "X3_L4_mutex/weft_cpp", "L4_mutex")]
L7 = [("weft, 1 kernel thread (nvps=1)", "weft\n1 kernel thread", "L7_cond_pingpong/weft"),
      ("weft, 2 kernel threads (nvps=2, free)", "weft\n2 kernel threads", "L7_cond_pingpong_2vp/weft"),
      ("weft, 2 kernel threads, A on VP 0, B on VP 1", "weft\n2 kt, affinity",
       "L7_cond_pingpong_2vp_affinity/weft"),
      ("weft, wired (each thread on a kernel thread of its own)", "weft\nwired",
       "L7_cond_pingpong_wired/weft"),
      ("pthreads, 1 CPU", "pthreads\n1 CPU", "L7_cond_pingpong/pthreads"),
      ("pthreads, 2 CPUs", "pthreads\n2 CPUs", "L7_cond_pingpong_2cpu/pthreads"),
      ("Boost.Fiber, 2 fibers on 1 thread", "Boost.Fiber\n1 thread", "L7_cond_pingpong/boost_fiber")]
COUNTERS = ("partner_per_round", "b_on_other_vp", "idled_per_round", "mutex_blocked_per_round")


def runs(doc):
    """{run name without /manual_time: {aggregate: row}} from Google Benchmark JSON."""
    out = {}
    for b in (doc or {}).get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            out.setdefault(b["run_name"].replace("/manual_time", ""), {})[b["aggregate_name"]] = b
    return out


def med_cv(agg):
    """(median ns, CV as a fraction) of one run's aggregates, or None."""
    if not agg or "median" not in agg:
        return None
    m = agg["median"]["real_time"]
    cv = agg.get("cv", {}).get("real_time")
    if cv is None and agg.get("mean") and agg.get("stddev"):
        cv = agg["stddev"]["real_time"] / agg["mean"]["real_time"]
    return m, cv or 0.0


def icounts(rep):
    return {(r["row"], r["lib"]): r["instructions_per_op"]
            for r in (rep.load("icount.json") or {}).get("rows", [])
            if r.get("instructions_per_op") is not None}


def ns_cv(v):
    return "-" if v is None else "%s ±%.0f%%" % (fmt_ns(v[0]), 100 * v[1])


@section("x3", "X3: the C++ layer against the C interface (L1-L4)",
         inputs=("latency.json", "icount.json"), order=72)
def x3(rep):
    r = runs(rep.load("latency.json"))
    ic = icounts(rep)
    if not any(row[2] in r for row in X3) and not any(k[1] == "weft_cpp" for k in ic):
        return None
    rows, plotted = [], []
    for label, c, cpp, irow in X3:
        vc, vp = med_cv(r.get(c)), med_cv(r.get(cpp))
        ic_c, ic_p = (ic.get((irow, "weft")), ic.get((irow, "weft_cpp"))) if irow else (None, None)
        ratio = "%.2fx" % (vp[0] / vc[0]) if vc and vp else "-"
        rows.append([label, ns_cv(vc), ns_cv(vp), ratio,
                     "%g" % ic_c if ic_c is not None else "-",
                     "%g" % ic_p if ic_p is not None else "-",
                     "%+g" % (ic_p - ic_c) if ic_c is not None and ic_p is not None else "-"])
        if vc and vp:
            plotted.append((label.split(",")[0] if irow else "L2, heap closure", vc, vp, ic_c, ic_p))
    md = table(["operation", "C (weft.h)", "C++ (weft.hpp)", "C++ / C", "C instr.", "C++ instr.",
                "C++ - C instr."], rows)
    md += ("\nns: median per operation ± CV over the Google Benchmark repetitions, nvps = 1, C and "
           "C++ rows in the same binary and run (bench/ext/X3_cpp.cc). Instructions: callgrind, "
           "user mode, per operation (bench/icount.sh: weft_icount vs weft_icount_cpp, N vs 2N). "
           "The heap-closure row is `weft::thread` with a lambda capturing two words: the closure "
           "does not fit the argument word and is allocated (std::thread allocates for every "
           "thread); it has no instruction count. Presto §3.4: Presto's C++ layers cost it; "
           "weft's layer should cost nothing or a few instructions.\n")
    if not plotted:
        return md
    p_ = plt()
    fig, ax = p_.subplots(figsize=(9, 4.2))
    xs = range(len(plotted))
    for off, k, ik, label, col in ((-0.2, 1, 3, "C interface (weft.h)", "tab:blue"),
                                   (0.2, 2, 4, "C++ layer (weft.hpp)", "tab:orange")):
        ms = [row[k][0] for row in plotted]
        errs = [row[k][0] * row[k][1] for row in plotted]
        bars = ax.bar([x + off for x in xs], ms, 0.4, yerr=errs, capsize=3, label=label, color=col)
        for bar, row in zip(bars, plotted):
            if row[ik] is not None:
                ax.annotate("%g ins" % row[ik], (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 2),
                            textcoords="offset points")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([row[0] for row in plotted], fontsize=8)
    ax.set_ylabel("ns per operation (median, whiskers ±CV)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("X3: C++ layer vs C interface, nvps=1; labels: instructions per op (callgrind)\n%s"
                 % rep.machine_line(), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "X3", "X3 C++ layer vs C interface")
    d = [(row[0], row[4] - row[3]) for row in plotted if row[3] is not None and row[4] is not None]
    if d:  # instruction counts: deterministic, unlike the ns on a shared machine
        rep.headlines.append("X3: the C++ layer costs %s instructions per operation over the C "
                             "interface (%s; callgrind)" % (
                                 "%+g..%+g" % (min(x for _, x in d), max(x for _, x in d)),
                                 ", ".join("%s %+g" % (n, x) for n, x in d)))
    return md


@section("l7", "L7: condition-variable PingPong in C-Threads' set-ups (1 thread, 2 threads, wired)",
         inputs=("latency.json", "icount.json"), order=12)
def l7(rep):
    r = runs(rep.load("latency.json"))
    have = [row for row in L7 if row[2] in r]
    if not have:
        return None
    rows = []
    for label, _, key in have:
        agg = r[key]
        med = agg["median"]
        line = [label, ns_cv(med_cv(agg))]
        line += ["%.3g" % med[c] if c in med else "-" for c in COUNTERS]
        rows.append(line)
    md = table(["set-up", "ns per round"] + list(COUNTERS), rows)
    ins = icounts(rep).get(("L7_cond_pingpong", "weft"))
    md += ("\nOne round: each of the two threads waits for its turn, flips it, signals and unlocks "
           "once (C-Threads Fig 5-1 ran \"1 Thread\", \"2 Threads\" and \"Wired\"). Median ± CV "
           "over the Google Benchmark repetitions. Counters (medians, per round): "
           "partner_per_round, the partner's passes (1 = strict alternation); b_on_other_vp, "
           "rounds where B ran on the other VP; idled_per_round, VP idlings; "
           "mutex_blocked_per_round, mutex acquisitions that blocked. Wired: each thread is "
           "bound to a kernel thread of its own (weft_wire), so every hand-off goes through the "
           "kernel (futex), as with pthreads.%s\n"
           % (" weft nvps=1 instructions per round: %g (callgrind)." % ins if ins is not None else ""))
    p_ = plt()
    fig, ax = p_.subplots(figsize=(10, 4.2))
    ms, errs, cols = [], [], []
    for _, _, key in have:
        m, cv = med_cv(r[key])
        ms.append(m)
        errs.append(m * cv)
        cols.append("tab:blue" if "weft" in key else "tab:red" if "pthreads" in key else "tab:green")
    ax.bar(range(len(have)), ms, yerr=errs, capsize=3, color=cols)
    for i, m in enumerate(ms):
        ax.annotate("{:,.0f}".format(m), (i, m), ha="center", va="bottom", fontsize=7,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_xticks(range(len(have)))
    ax.set_xticklabels([short for _, short, _ in have], fontsize=8)
    ax.set_ylabel("ns per round (median, whiskers ±CV), log")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("L7: condition-variable PingPong (C-Threads Fig 5-1 set-ups)\n%s"
                 % rep.machine_line(), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "L7", "L7 PingPong set-ups")
    one, wired = med_cv(r.get("L7_cond_pingpong/weft")), med_cv(r.get("L7_cond_pingpong_wired/weft"))
    if one and wired:
        rep.headlines.append("L7: weft 1 kernel thread %s per round vs wired %s (%.0fx)"
                             % (fmt_ns(one[0]), fmt_ns(wired[0]), wired[0] / one[0]))
    return md
