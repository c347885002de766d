"""A3: quicksort over leaf sizes (papers/001 Fig 25-27)."""
from core import section, table, cell, fmt_s, plt


@section("a3", "A3: quicksort of 2,000,000 records over leaf sizes (papers/001 Fig 25-27)",
         inputs=("A3.json",), order=50)
def a3(rep):
    doc = rep.load("A3.json")
    res, cfg = doc["results"], doc["config"]
    cores = rep.machine.get("cores") or 2
    leaves = sorted({r["leaf"] for r in res})
    series = sorted({(r["lib"], r["P"]) for r in res if r["lib"] != "serial"}, key=lambda s: (s[0] != "weft", s))
    ser = {r["leaf"]: r for r in res if r["lib"] == "serial"}

    def get(lib, p, leaf):
        r = [x for x in res if x["lib"] == lib and x["P"] == p and x["leaf"] == leaf]
        return r[0] if r else None

    md = ("%d records of %d bytes, one thread (weft) or task (OpenMP†) per recursive call, %s at "
          "or below the leaf size, partition: %s. Speedup: the true serial version (direct calls, "
          "no synchronization) over the parallel one, same leaf size (001 Fig 26). Every run's "
          "output is checked. Cells: run time, median ± spread; (speedup).\n\n"
          % (cfg["records"], cfg["record_bytes"], cfg["leaf_sort"], cfg["partition"]))
    rows = []
    for leaf in leaves:
        s = ser.get(leaf)
        line = [leaf, "{:,}".format((get("weft", 1, leaf) or s or {}).get("threads", 0)),
                cell(s["median_s"], s["min_s"], s["max_s"], "s") if s else "-"]
        for lib, p in series:
            r = get(lib, p, leaf)
            if not r:
                line.append("-")
                continue
            c = cell(r["median_s"], r["min_s"], r["max_s"], "s")
            if s:
                c += " (%.2fx)" % (s["median_s"] / r["median_s"])
            line.append(c)
        rows.append(line)
    md += table(["leaf", "threads created (weft)", "serial"] +
                ["%s P=%d%s" % ("weft" if l == "weft" else "OpenMP task†", p, " (oversub.)" if p > cores else "")
                 for l, p in series], rows)
    md += ("\npapers/001 created 1,392,931 threads at leaf 5 (its partition and thread structure "
           "are not given in full; ours: median of three, one thread per call, the root included).\n")

    p_ = plt()
    fig, (a1, a2, a3_) = p_.subplots(1, 3, figsize=(14, 4))
    if ser:
        a1.plot(leaves, [ser[l]["median_s"] for l in leaves if l in ser], "k--", marker=".", label="serial")
    for lib, p in series:
        q = [(l, get(lib, p, l)) for l in leaves if get(lib, p, l)]
        a1.errorbar([l for l, _ in q], [r["median_s"] for _, r in q],
                    yerr=[[r["median_s"] - r["min_s"] for _, r in q], [r["max_s"] - r["median_s"] for _, r in q]],
                    marker="o", capsize=2, label="%s P=%d" % (lib, p))
    a1.set_xlabel("leaf size")
    a1.set_ylabel("run time (s)")
    a1.set_title("run time vs leaf size (cf. 001 Fig 25 left)", fontsize=9)
    for lib in sorted({l for l, _ in series}):
        ps = sorted({p for l, p in series if l == lib})
        for leaf in leaves:
            if leaf not in ser:
                continue
            sp = [ser[leaf]["median_s"] / get(lib, p, leaf)["median_s"] for p in ps if get(lib, p, leaf)]
            if lib == "weft":
                a2.plot(ps[:len(sp)], sp, marker="o", label="leaf %d" % leaf)
    allp = sorted({p for _, p in series})
    a2.plot(allp, [min(p, cores) for p in allp], ":", color="gray", label="linear")
    a2.set_xticks(allp)
    a2.set_xlabel("processors (P)")
    a2.set_ylabel("speedup over true serial")
    a2.set_title("weft speedup per leaf size (cf. 001 Fig 26)", fontsize=9)
    thr = [(l, (get("weft", 1, l) or {}).get("threads")) for l in leaves]
    thr = [(l, t) for l, t in thr if t]
    a3_.plot([l for l, _ in thr], [t for _, t in thr], "o-", color="tab:blue", label="threads created")
    a3_.set_yscale("log")
    a3_.set_xlabel("leaf size")
    a3_.set_ylabel("threads created", color="tab:blue")
    b = a3_.twinx()
    q = [(l, get("weft", max(allp), l)) for l in leaves if get("weft", max(allp), l)]
    b.plot([l for l, _ in q], [r["median_s"] for _, r in q], "s--", color="tab:red")
    b.set_ylabel("weft run time at P=%d (s)" % max(allp), color="tab:red")
    a3_.set_title("threads and run time (cf. 001 Fig 27)", fontsize=9)
    for a in (a1, a2, a3_):
        a.grid(alpha=0.3)
    a1.legend(fontsize=7)
    a2.legend(fontsize=6, ncol=2)
    fig.suptitle("A3 quicksort, %d records; %s; median, bars min..max" % (cfg["records"], rep.machine_line()), fontsize=9)
    fig.tight_layout()
    md += "\n" + rep.save_fig(fig, "A3", "A3 quicksort")
    best = min((r for r in res if r["lib"] == "weft"), key=lambda r: r["median_s"], default=None)
    if best and best["leaf"] in ser:
        rep.headlines.append("A3 quicksort: best weft run %s (leaf %d, P=%d) vs serial %s at that leaf (%.2fx)" % (
            fmt_s(best["median_s"]), best["leaf"], best["P"], fmt_s(ser[best["leaf"]]["median_s"]),
            ser[best["leaf"]]["median_s"] / best["median_s"]))
    return md
