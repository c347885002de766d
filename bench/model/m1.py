"""m1.py - the hierarchical queueing model of FastThreads §5 (M1 of BENCHMARKS.md).

Processors are the customers of two closed networks, solved by mean-value analysis
(mva.py) and iterated to convergence:

  high level (lock contention): a delay centre for the time a processor spends outside
    shared locks per cycle (thread management outside locks + user work), and one
    queueing centre per shared lock (its hold time per cycle). A processor waiting at a
    lock spin-waits. Alternatives (FastThreads §3): "central" - one ready-queue lock taken by
    every create and every dispatch; "local" - per-processor ready queues, whose locks
    are uncontended (modelled inside the delay centre).
  low level (memory/bus contention): a queueing centre for the memory system ("bus":
    on today's machines the coherence fabric and memory) and a delay centre for the
    rest. A cycle's bus demand is the bus fraction of each part of the work, plus the
    cache-line transfers that spinning processors cause. The bus residence time over
    the bus demand is the inflation applied to the bus part of every demand above.

The high level gives the time spent spinning (an input to the low level); the low level
gives the inflation (an input to the high level); iterate until the cycle time moves by
less than 1e-9 relative.

A cycle is one thread's life (T1, T2) or one lock acquisition (S1). Times in ns.
"""
from mva import mva


class Params:
    """d_tm: time per cycle outside shared locks (thread management, loop), at P = 1.
    b_tm: its bus fraction. z: user work per cycle; b_user: its bus fraction.
    locks: [(name, hold_ns, bus_fraction)], one acquisition per cycle each (shared by all
      processors). transfer_ns: time to move one contended cache line between processors.
    lines: cache lines that move when a lock changes holder (the lock and the data it
      guards); a holder change happens with probability (P-1)/P.
    spin_lines: extra line transfers per hand-off per processor spinning at the lock
      (read-spinning locks: every spinner re-reads the line after a release; 0 for
      queue locks); spin_bus: bus fraction of spin-waiting time (0: spinning in cache)."""

    def __init__(self, d_tm, b_tm=0.0, z=0.0, b_user=0.0, locks=(), transfer_ns=0.0,
                 lines=2, spin_lines=0.0, spin_bus=0.0):
        self.d_tm, self.b_tm, self.z, self.b_user = d_tm, b_tm, z, b_user
        self.locks = list(locks)
        self.transfer_ns, self.lines, self.spin_lines, self.spin_bus = transfer_ns, lines, spin_lines, spin_bus

    def copy(self, **kw):
        p = Params(self.d_tm, self.b_tm, self.z, self.b_user, self.locks, self.transfer_ns,
                   self.lines, self.spin_lines, self.spin_bus)
        for k, v in kw.items():
            setattr(p, k, v)
        return p


def _inflate(d, b, f):
    return d * (1 - b) + d * b * f


def solve(p, n, tol=1e-9, max_iter=500):
    """Solves the model for n processors. Returns X (cycles per ns, all processors),
    cycle_ns (time per cycle on one processor), spin_ns (spin-waiting per cycle),
    bus_inflation, bus_util, converged, iterations."""
    f, spin, cycle, it, conv = 1.0, 0.0, None, 0, False
    handoff = (n - 1) / n if n > 1 else 0.0
    while it < max_iter:
        it += 1
        # High level: lock contention.
        delay = _inflate(p.d_tm, p.b_tm, f) + _inflate(p.z, p.b_user, f)
        centres = [("outside", "delay", delay)]
        xfer = {}
        for name, hold, b in p.locks:
            xfer[name] = p.lines * p.transfer_ns * handoff
            centres.append((name, "queue", _inflate(hold, b, f) + xfer[name]))
        hi = mva(centres, n)
        spin = sum(hi["r"][name] - d for name, kind, d in centres if kind == "queue")
        waiting = sum(hi["q"][name] - hi["u"][name] for name, _, _ in p.locks) if p.locks else 0.0
        # Low level: the bus. Per cycle: the bus part of the work, the lines that move at
        # hand-offs, and what spinning processors add.
        bus = p.b_tm * p.d_tm + p.b_user * p.z + sum(h * b for _, h, b in p.locks)
        bus += sum(xfer.values())
        bus += p.spin_lines * p.transfer_ns * waiting
        bus += p.spin_bus * spin
        other = max(0.0, hi["R"] - bus * f)  # the rest of the cycle, bus excluded
        if bus > 0:
            lo = mva([("bus", "queue", bus), ("rest", "delay", other)], n)
            f_new = lo["r"]["bus"] / bus
            util = lo["u"]["bus"]
        else:
            f_new, util = 1.0, 0.0
        new_cycle = hi["R"]
        if cycle is not None and abs(new_cycle - cycle) <= tol * new_cycle and abs(f_new - f) <= tol:
            conv = True
            cycle = new_cycle
            break
        cycle, f = new_cycle, 0.5 * f + 0.5 * f_new  # damped: the levels feed each other
    return {"X": n / cycle, "cycle_ns": cycle, "spin_ns": spin, "bus_inflation": f,
            "bus_util": util, "converged": conv, "iterations": it}


def bus_slowdown(b, k):
    """Slowdown of k identical private copies (no shared software state) whose cycle
    spends fraction b at the bus: the low-level model alone (FastThreads §5.1)."""
    if b <= 0:
        return 1.0
    return mva([("bus", "queue", b), ("rest", "delay", 1 - b)], k)["R"]


def fit_bus_fraction(slowdown, k):
    """The bus fraction b whose k-copy slowdown matches the measured one (FastThreads §5.1:
    "match a curve from our model of the bus to the measured curve"). Clamped to [0, 1]."""
    if slowdown <= 1 or k < 2:
        return 0.0
    if slowdown >= bus_slowdown(1.0, k):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if bus_slowdown(mid, k) < slowdown:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
