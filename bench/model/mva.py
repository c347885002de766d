"""mva.py - mean-value analysis of closed product-form queueing networks (Lazowska et al.,
"Quantitative System Performance", ch. 6-7), the solver of the M1 model (FastThreads §5).

A centre is (name, kind, demand): kind "queue" (load-independent queueing centre) or
"delay" (infinite server); demand is the total service demand per customer cycle.
"""


def mva(centres, n):
    """Exact single-class MVA for population n >= 1.

    Returns a dict: X (throughput, cycles per time unit), R (cycle time), and per centre
    name: r (residence time per cycle), q (mean customers), u (utilization, queue centres).
    """
    if n < 1:
        raise ValueError("population must be >= 1")
    for name, kind, d in centres:
        if kind not in ("queue", "delay") or d < 0:
            raise ValueError("bad centre %r" % (name,))
    q = {name: 0.0 for name, _, _ in centres}
    out = {}
    for k in range(1, n + 1):
        r = {name: d if kind == "delay" else d * (1 + q[name]) for name, kind, d in centres}
        rt = sum(r.values())
        x = k / rt if rt > 0 else float("inf")
        q = {name: x * r[name] for name in r}
        out = {"X": x, "R": rt, "r": r, "q": q}
    out["u"] = {name: out["X"] * d for name, kind, d in centres if kind == "queue"}
    return out


def mva_schweitzer(classes, centres, tol=1e-10, max_iter=100000):
    """Approximate multi-class MVA (Bard-Schweitzer) for large populations.

    classes: {class: population}; centres: [(name, kind, {class: demand})].
    Returns {class: {"X": throughput, "R": cycle time, "r": {centre: residence}}}.
    """
    q = {(c, name): (n / len(centres)) for c, n in classes.items() for name, _, _ in centres}
    for _ in range(max_iter):
        res, newq, delta = {}, {}, 0.0
        for c, n in classes.items():
            r = {}
            for name, kind, dem in centres:
                d = dem.get(c, 0.0)
                if kind == "delay":
                    r[name] = d
                else:
                    others = sum(q[(c2, name)] for c2 in classes if c2 != c)
                    own = q[(c, name)] * (n - 1) / n if n > 0 else 0.0
                    r[name] = d * (1 + others + own)
            rt = sum(r.values())
            x = n / rt if rt > 0 and n > 0 else 0.0
            res[c] = {"X": x, "R": rt, "r": r}
            for name in r:
                newq[(c, name)] = x * r[name]
        delta = max(abs(newq[k] - q[k]) for k in q)
        q = newq
        if delta < tol:
            break
    return res


def machine_repairman_throughput(d, z, n):
    """Closed form for one queueing centre (demand d, exponential) and a delay z with n
    customers (the M/M/1//n machine-repairman model): X = (1 - p0) / d with
    p0 = 1 / sum_{k=0..n} n!/(n-k)! (d/z)^k. Used to test mva()."""
    rho = d / z
    term, total = 1.0, 1.0
    for k in range(1, n + 1):
        term *= (n - k + 1) * rho
        total += term
    return (1 - 1 / total) / d
