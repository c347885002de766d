"""M2: an 8-byte MPI ping-pong from a weft thread against plain MPI; M3: N threads per
rank alternating a compute slice with an exchange, weft against POSIX threads, OpenMP
threads and the compute alone. Inputs: M2.json of weft_bench_mpi_m2 and M3.json of
weft_bench_mpi_m3 (bench/mpi/README.md), both run under `mpiexec -n 2`."""
from core import section, table, cell, fmt_s

NAME = {"compute": "compute only (bound)", "weft": "weft (1 VP)", "pthread": "MPI + POSIX threads",
        "omp": "MPI + OpenMP threads"}


def _load_line(doc):
    c = doc.get("config", {})
    return ("load average (1, 5, 15 min) at the start / end of the program: %s / %s; other jobs "
            "shared the processors when it exceeds the core count, so compare within this run"
            % (c.get("loadavg_start", "?"), doc.get("loadavg_end", "?")))


@section("m2", "M2: MPI ping-pong latency from a weft thread", inputs=("M2.json",), order=92)
def m2(rep):
    doc = rep.load("M2.json")
    if not doc or not doc.get("results"):
        return None
    c = doc["config"]
    md = ("Two MPI ranks on this machine; rank 0 sends %d bytes, rank 1 sends them back, %s "
          "round trips per repetition, %d repetitions, the modes interleaved. plain MPI = "
          "`MPI_Send`/`MPI_Recv` from `main` (weft not running); weft = `weft_mpi_send`/"
          "`weft_mpi_recv` from one weft thread (VPs: %d; weft_mpi's default policy: test for up "
          "to 20 µs, yielding, then park). One-way latency = round trip / 2 (median ± half the "
          "min..max of the repetitions).\n\n"
          % (c["bytes"], "{:,}".format(c["round_trips"]), c["reps"], c["vps"]))
    res = doc["results"]
    base = next((r for r in res if r["lib"] == "plain MPI"), None)
    rows = [[r["lib"], cell(r["median_s"], r["min_s"], r["max_s"], "s"), fmt_s(r["min_s"]),
             fmt_s(r["max_s"]), "%.2f" % (r["median_s"] / base["median_s"]) if base else "-"]
            for r in res]
    md += table(["mode", "one-way latency (median)", "min", "max", "/ plain MPI"], rows)
    md += "\n- machine: %s\n- %s\n" % (rep.machine_line(), _load_line(doc))
    w = next((r for r in res if r["lib"] != "plain MPI"), None)
    if base and w:
        rep.headlines.append("M2: 8-byte MPI one-way latency from a weft thread %s, plain MPI %s"
                             % (fmt_s(w["median_s"]), fmt_s(base["median_s"])))
    return md


@section("m3", "M3: MPI with many threads: overlap of compute and messages", inputs=("M3.json",),
         order=93)
def m3(rep):
    doc = rep.load("M3.json")
    if not doc or not doc.get("results"):
        return None
    c = doc["config"]
    res = doc["results"]
    md = ("Two MPI ranks (`mpiexec -n 2`) on this machine's %s cores; weft runs 1 VP per rank. "
          "Each rank runs N threads; each thread alternates a compute slice (a calibrated busy "
          "loop) with an exchange with its peer thread on the other rank (same index, tagged by "
          "it: send and receive the message size). Rounds per thread = max(1, %.0f ms / (N x slice)), "
          "so every N computes about the same (more at N x slice beyond it). weft: `weft_mpi_sendrecv` "
          "(`MPI_Irecv` + `MPI_Isend`, then the thread parks and the VP runs the others); POSIX threads and "
          "OpenMP threads (one parallel region of N threads; not tasks, which deadlock when a "
          "tied task blocks in MPI): `MPI_Sendrecv` under `MPI_THREAD_MULTIPLE`; compute only: "
          "the same slices on the main thread with no messages, the lower bound. Time of a run "
          "= the slower rank's; median ± half the min..max of %d runs, the modes interleaved. "
          "Rows marked † run more kernel threads than cores (2 ranks x N).\n\n"
          % (rep.machine.get("cores", "?"), c["work_ms"], c["reps"]))
    cases = []
    for r in res:
        k = (r["slice_us"], r["bytes"])
        if k not in cases:
            cases.append(k)
    libs = [l for l in ("weft", "pthread", "omp") if any(r["lib"] == l for r in res)]
    for sl, by in cases:
        md += "**compute slice %g µs, message %s bytes**\n\n" % (sl, "{:,}".format(by))
        rows = []
        for n in sorted({r["N"] for r in res if (r["slice_us"], r["bytes"]) == (sl, by)}):
            at = {r["lib"]: r for r in res if (r["slice_us"], r["bytes"], r["N"]) == (sl, by, n)}
            bound = at.get("compute")
            row = [n, at[next(iter(at))]["rounds"],
                   cell(bound["median_s"], bound["min_s"], bound["max_s"], "s") if bound else "-"]
            for l in libs:
                r = at.get(l)
                if not r:
                    row.append("-")
                    continue
                v = cell(r["median_s"], r["min_s"], r["max_s"], "s") + ("†" if r.get("oversubscribed") else "")
                if bound:
                    v += " (%.2fx)" % (r["median_s"] / bound["median_s"])
                row.append(v)
            rows.append(row)
        md += table(["N", "rounds", "compute only"] + [NAME[l] + " (/ bound)" for l in libs], rows)
        md += "\n"
        # the closing note: weft against the bound and against POSIX threads at the largest N
        nmax = max(r["N"] for r in res if (r["slice_us"], r["bytes"]) == (sl, by))
        at = {r["lib"]: r for r in res if (r["slice_us"], r["bytes"], r["N"]) == (sl, by, nmax)}
        if "weft" in at and "compute" in at and "pthread" in at:
            rep.headlines.append("M3 (slice %g µs, %s B, N = %d): weft %.2fx the compute-only bound, "
                                 "MPI + POSIX threads %.2fx" % (sl, "{:,}".format(by), nmax,
                                 at["weft"]["median_s"] / at["compute"]["median_s"],
                                 at["pthread"]["median_s"] / at["compute"]["median_s"]))
    md += "- machine: %s\n- %s\n" % (rep.machine_line(), _load_line(doc))
    return md
