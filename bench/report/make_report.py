#!/usr/bin/env python3
"""make_report.py - writes the Markdown report of one run of scripts/demo.sh.

usage: python3 bench/report/make_report.py RAW_DIR OUT_DIR [--mode quick|full]

RAW_DIR holds the benchmarks' JSON (and skipped.txt, one line per baseline or row that
was not run); OUT_DIR gets README.md and figures/*.png. Every module in
bench/report/sections/ is imported; each registers its sections with @core.section.
A section that raises is reported as failed, and the rest of the report is still written.
"""
import datetime
import importlib
import os
import pkgutil
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "model"))

import core  # noqa: E402


def load_sections():
    sys.path.insert(0, os.path.join(HERE, "sections"))
    for mod in sorted(m.name for m in pkgutil.iter_modules([os.path.join(HERE, "sections")])):
        importlib.import_module(mod)
    return sorted(core.SECTIONS, key=lambda s: (s.order, s.key))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    mode = "full" if "--mode=full" in sys.argv or ("--mode" in sys.argv and "full" in sys.argv) else "quick"
    raw, out = (args + ["report/raw", "report"])[:2] if len(args) < 2 else args[:2]
    rep = core.Report(raw, out, mode)
    body, toc, failed = [], [], []
    for s in load_sections():
        if s.inputs and not any(rep.has(i) for i in s.inputs):
            md = core.not_run(s.title, "none of %s in this run" % ", ".join(s.inputs))
        else:
            try:
                md = s.fn(rep)
            except Exception:  # a broken section must not lose the others
                failed.append(s.key)
                md = "*This section failed to render:*\n\n```\n%s```\n" % traceback.format_exc()
        if md is None:
            continue
        anchor = s.key.lower()
        toc.append("- [%s](#%s)" % (s.title, anchor))
        body.append('<a id="%s"></a>\n\n## %s\n\n%s' % (anchor, s.title, md))

    skipped = rep.text("skipped.txt") or ""
    head = ["# weft: the papers' benchmarks on this machine\n",
            "- machine: **%s**" % rep.machine_line(),
            "- run: %s mode, %s UTC, by `scripts/demo.sh%s`" % (
                mode, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
                " --full" if mode == "full" else ""),
            "- every cell: median of the repetitions ± spread (half the min..max range over the "
            "median, or the coefficient of variation where marked); every baseline measured in this "
            "same run; processor counts past the core count are labelled *oversubscribed*",
            "- raw results: [raw/](raw/) (JSON, one file per benchmark binary; logs in raw/logs/)"]
    load = rep.text("loadavg.txt")
    if load:
        lines = dict(l.split(" ", 1) for l in load.strip().splitlines() if " " in l)
        head.append("- load average (1, 5, 15 min) at the start / end of the run: %s / %s (on %s cores; "
                    "a load above the core count means other jobs shared the processors, which slows "
                    "and spreads every P > 1 point: compare ratios within this run)"
                    % (lines.get("start", "?"), lines.get("end", "?"), rep.machine.get("cores")))
    head.append("")
    if skipped.strip():
        head += ["Skipped in this run:", ""] + ["- " + l for l in skipped.strip().splitlines()] + [""]
    head += ["## Contents", ""] + toc + ["- [Closing note](#closing)", ""]
    close = ['<a id="closing"></a>\n\n## Closing note\n']
    if rep.headlines:
        close.append("Headline ratios (baseline time over weft time, same run; >1 means weft is faster):\n")
        close += ["- " + h for h in rep.headlines]
        close.append("")
    close.append("Figures:\n")
    close += ["- [%s](%s)" % (t, p) for t, p in rep.figures]
    if failed:
        close.append("\nSections that failed to render: %s" % ", ".join(failed))
    text = "\n".join(head) + "\n" + "\n".join(body) + "\n" + "\n".join(close) + "\n"
    path = os.path.join(out, "README.md")
    with open(path, "w") as f:
        f.write(text)
    print("wrote %s (%d sections, %d figures)" % (path, len(body), len(rep.figures)))
    figures = write_figures(rep, raw, out, mode, close)
    for a in sys.argv[1:]:
        if a.startswith("--figures="):  # a second copy, e.g. docs/figures.md
            with open(a.split("=", 1)[1], "w") as f:
                f.write(figures)
            print("wrote %s" % a.split("=", 1)[1])
    return 1 if failed else 0


def write_figures(rep, raw, out, mode, close):
    """OUT/figures.md: the measured figures the documentation quotes, in one place, from
    this run's JSON: the headline table (bench/headline.py), every instruction count
    (icount.json, X1 included) and the closing note's ratios. Generated: never edited."""
    import contextlib
    import io
    sys.path.insert(0, os.path.join(HERE, ".."))
    import headline
    buf = io.StringIO()
    argv, sys.argv = sys.argv, ["headline.py", raw]
    try:
        with contextlib.redirect_stdout(buf):
            headline.main()
    finally:
        sys.argv = argv
    # the run's end: when demo.sh wrote the load average the last time (else: now)
    try:
        run_end = datetime.datetime.utcfromtimestamp(os.path.getmtime(rep.path("loadavg.txt")))
    except OSError:
        run_end = datetime.datetime.utcnow()
    lines = ["# Measured figures\n",
             "Generated by `bench/report/make_report.py` from the JSON of one run of "
             "`scripts/demo.sh` (%s mode, ended %s UTC); do not edit: regenerate with "
             "`scripts/demo.sh` (it writes `report/figures.md`), or from an existing run with "
             "`python3 bench/report/make_report.py RAW OUT --figures=docs/figures.md`. "
             "The full tables, spreads and figures of every row are in that run's report "
             "(`report/README.md`); row definitions: `bench/BENCHMARKS.md`, `bench/README.md`.\n"
             % (mode, run_end.strftime("%Y-%m-%d %H:%M")),
             "- machine: %s" % rep.machine_line()]
    load = rep.text("loadavg.txt")
    if load:
        la = dict(l.split(" ", 1) for l in load.strip().splitlines() if " " in l)
        lines.append("- load average (1, 5, 15 min) at the start / end of the run: %s / %s (other "
                     "jobs shared the processors when it exceeds the core count: compare ratios "
                     "within the run)" % (la.get("start", "?"), la.get("end", "?")))
    lines += ["", "## Headline table\n", "```", buf.getvalue().rstrip(), "```\n"]
    ic = rep.load("icount.json")
    if ic:
        lines += ["## Instructions per operation (callgrind, user mode)\n",
                  "| row | library | instructions |", "|---|---|---|"]
        for r in ic.get("rows", []):
            v = r.get("instructions_per_op")
            lines.append("| %s | %s | %s |" % (r["row"], r["lib"], "-" if v is None else "%.1f" % v))
        nh = rep.load("nohooks/icount.json")
        for r in (nh or {}).get("rows", []):
            v = r.get("instructions_per_op")
            lines.append("| %s | %s, `WEFT_HOOKS=OFF` | %s |" % (r["row"], r["lib"], "-" if v is None else "%.1f" % v))
        lines.append("")
    ratios = [l for l in close if not l.startswith("Figures:") and not l.startswith("- [")
              and "closing" not in l]
    if ratios:
        lines += ["## Headline ratios\n"] + ratios
    text = "\n".join(lines).rstrip() + "\n"
    path = os.path.join(out, "figures.md")
    with open(path, "w") as f:
        f.write(text)
    print("wrote %s" % path)
    return text


if __name__ == "__main__":
    sys.exit(main())
