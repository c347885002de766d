"""core.py - what every report section shares: the section registry, the results
directory, figures, Markdown tables and number formatting.

A section is one function decorated with @section; it gets a Report and returns the
section's Markdown body (or None to leave the section out). See bench/report/README.md.
"""
import json
import os
import statistics

SECTIONS = []


class Section:
    def __init__(self, key, title, fn, inputs, order):
        self.key, self.title, self.fn, self.inputs, self.order = key, title, fn, inputs, order


def section(key, title, inputs=(), order=100):
    """Registers fn(report) -> Markdown (str) or None as the report section `key`.

    inputs: the raw files (names in the results directory) it reads; when none of them
    exists the report prints "not run" for the section instead of calling fn. order:
    sections are printed by increasing order (latency 10, sweeps 20, sync 30, S6 40,
    applications 50-60, model 90)."""
    def deco(fn):
        SECTIONS.append(Section(key, title, fn, tuple(inputs), order))
        return fn
    return deco


class Report:
    """The results of one run: raw_dir holds the benchmarks' JSON (and logs), out_dir is
    where the Markdown report and figures/ go."""

    def __init__(self, raw_dir, out_dir, mode="quick"):
        self.raw_dir, self.out_dir, self.mode = raw_dir, out_dir, mode
        self.fig_dir = os.path.join(out_dir, "figures")
        os.makedirs(self.fig_dir, exist_ok=True)
        self.headlines = []   # (text) lines for the closing note
        self.figures = []     # (title, relative path) for the closing note
        self.machine = self._machine()

    def path(self, name):
        return os.path.join(self.raw_dir, name)

    def has(self, name):
        return os.path.exists(self.path(name))

    def load(self, name):
        """The parsed JSON file `name` of the results directory, or None."""
        try:
            with open(self.path(name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def text(self, name):
        try:
            with open(self.path(name)) as f:
                return f.read()
        except OSError:
            return None

    def _machine(self):
        for name in ("sweep.json", "A3.json", "memory.json", "tasks.json", "S1.json", "A1.json", "A2.json"):
            doc = self.load(name)
            if doc and "machine" in doc:
                return doc["machine"]
        return {"cpu_model": "unknown", "cores": os.cpu_count(), "kernel": os.uname().release}

    def save_fig(self, fig, name, title):
        """Saves a matplotlib figure as figures/<name>.png; returns the Markdown image."""
        import matplotlib.pyplot as plt
        rel = "figures/%s.png" % name
        fig.savefig(os.path.join(self.out_dir, rel), dpi=100)
        plt.close(fig)
        self.figures.append((title, rel))
        return "![%s](%s)\n" % (title, rel)

    def machine_line(self):
        m = self.machine
        return "%s, %s cores, Linux %s" % (m.get("cpu_model"), m.get("cores"), m.get("kernel"))


def plt():
    """matplotlib.pyplot with the Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as p
    return p


def shade_oversub(ax, cores, maxp):
    """Greys the processor counts past the core count and labels them."""
    if maxp > cores:
        ax.axvspan(cores + 0.5, maxp + 0.5, color="0.92", zorder=0)
        ax.text(cores + 0.6, 0.02, "oversubscribed", va="bottom", fontsize=7,
                transform=ax.get_xaxis_transform())


def table(headers, rows):
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join("" if c is None else str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def fmt_ns(ns):
    if ns is None:
        return "-"
    if ns < 10:
        return "%.2f ns" % ns
    if ns < 1000:
        return "%.1f ns" % ns
    if ns < 1e6:
        return "%.2f µs" % (ns / 1e3)
    if ns < 1e9:
        return "%.2f ms" % (ns / 1e6)
    return "%.2f s" % (ns / 1e9)


def fmt_s(s):
    return fmt_ns(s * 1e9) if s is not None else "-"


def spread_pct(med, lo, hi):
    """Half the min..max range as a percentage of the median."""
    return 100.0 * (hi - lo) / 2 / med if med else 0.0


def cell(med, lo, hi, unit="ns"):
    """'median ±spread%' for a value in ns (unit='ns') or seconds (unit='s')."""
    f = fmt_ns if unit == "ns" else fmt_s
    return "%s ±%.0f%%" % (f(med), spread_pct(med, lo, hi))


def summarize(values):
    """(median, min, max) of a list."""
    v = sorted(values)
    return statistics.median(v), v[0], v[-1]


def not_run(what, why):
    return "*%s: not run (%s).*\n" % (what, why)
