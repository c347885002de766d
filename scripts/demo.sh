#!/usr/bin/env bash
# demo.sh - weft's main job: build weft in Release (./build-release), run the benchmark
# suite of bench/BENCHMARKS.md beside the baselines (POSIX threads, Boost.Fiber, Go,
# OpenMP tasks, oneTBB task_group), fit and project the FastThreads §5 queueing model (M1),
# and write a report with one figure per benchmark:
#
#   report/README.md        the report: machine, tables (median ± spread), figures, the
#                           model's validation error, a closing note with headline ratios
#   report/figures.md       the measured figures the documentation quotes (docs/figures.md
#                           is a committed copy), generated from the run's JSON
#   report/figures/*.png    one PNG per benchmark, shaped like the paper's figure
#   report/raw/*.json       the raw results (and raw/logs/*.log, raw/skipped.txt)
# The steps are the rows of one table (below: name, CMake targets, outputs, command).
#
# usage: scripts/demo.sh [--full] [--out DIR]
#   (default)  the quick suite: fewer repetitions and points; about 5 minutes on 2 cores
#   --full     every row with the binaries' full defaults (5 repetitions, all leaf sizes,
#              oversubscribed points); several times longer
# Installs what it needs first (scripts/install-deps.sh). A baseline that is not installed
# is skipped with a line saying so; a benchmark that fails is reported, never fatal.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=quick
out=report
while [ $# -gt 0 ]; do
  case $1 in
    --full) mode=full ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

t_start=$SECONDS
bash scripts/install-deps.sh || echo "install-deps failed: going on with what is installed"

build=build-release
raw=$out/raw
# Only what an earlier run wrote is removed (--out may name a directory with other files).
rm -rf "$raw" "$out/figures" "$out/README.md"
mkdir -p "$raw/logs"
skipped=$raw/skipped.txt
: >"$skipped"
skip() { echo "$*" | tee -a "$skipped"; }

# ---- progress: one line per step, redrawn every second on a terminal -----------------
steps_total=0
step_no=0
failed=()
elapsed() { local s=$((SECONDS - t_start)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
# step NAME CMD...: runs CMD with its output in raw/logs/NAME.log, shows progress.
step() {
  local name=$1; shift
  step_no=$((step_no + 1))
  local log=$raw/logs/$name.log t0=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$!
  if [ -t 1 ]; then
    while kill -0 "$pid" 2>/dev/null; do
      printf '\r[%2d/%d] %-28s %4ds   (total %s)  ' "$step_no" "$steps_total" "$name" $((SECONDS - t0)) "$(elapsed)"
      sleep 1
    done
  else
    printf '[%2d/%d] %-28s ...\n' "$step_no" "$steps_total" "$name"
  fi
  wait "$pid"
  local rc=$?
  local verdict="ok"
  if [ $rc -ne 0 ]; then verdict="FAILED (exit $rc; see $log)"; failed+=("$name"); fi
  [ -t 1 ] && printf '\r'
  printf '[%2d/%d] %-28s %4ds   (total %s)  %s\n' "$step_no" "$steps_total" "$name" \
    $((SECONDS - t0)) "$(elapsed)" "$verdict"
}

# Python with matplotlib (Debian's /usr/bin/python3 has it even when another python3 comes
# first in PATH).
py=""
for c in python3 /usr/bin/python3; do
  if "$c" -c 'import matplotlib' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { py=python3; skip "figures: matplotlib not installed (python3-matplotlib): report without figures"; }

go=""
if command -v go >/dev/null; then go=$(command -v go)
elif [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go
fi

# ---- parameters: quick vs full ---------------------------------------------------------
cores=$(nproc)
if [ "$mode" = quick ]; then
  lat_args=(--benchmark_repetitions=3 --benchmark_min_time=0.03)
  go_lat=(-count 3 -benchtime 0.05s)
  go_sw=(-count 3 -benchtime 200000x)
  sweep_args=(--reps 3 --n 200000 --slow-n 5000 --t2-n 50000 --t3-n 200000)
  tasks_args=(--reps 3 --n 200000 --l2-n 100000)
  spin_args=(--reps 3 --n 200000 --s2-n 5000 --s3-n 20000 --s4-rounds 5000 --s5-n 200000 --oversub "")
  s6_args=(--quick --reps 3)
  a3_args=(--leaf 5,50,150 --reps 3)
  a1_args=(--reps 5)            # the default 1024 x 4096 matrix: --quick's is ~7 ms a run
  a2_args=(--quick)
  icount_n=10000
  l3s_args=(--quick)
  x2_args=(--n 200000 --reps 3)
  a4_args=(--quick)
  m1_args=(--quick)
  # R1-R3 at smaller sizes than the rows' fib(30), 12 queens and 10^6 live Go threads, and
  # smaller still for Boost.Fiber (tens of microseconds per fiber); the report says so
  trees_args=(--r1-n 27 --r2-n 11 --r3-n 1000000 --reps 3 --r3-reps 2 --timeout 45
    --size boost_fiber:fib=24 --size boost_fiber:queens=10 --size go:live=200000
    --size boost_fiber:live=50000)
  # I1/I2: shorter runs, and 1,000 connections at most (10,000 in --full)
  io_args=(--i1-rounds 5000 --i1-warmup 500 --i1-reps 3 --i2-conns 1,100,1000 --i2-duration 3
    --idle 1000 --timeout 60)
  i3_args=(--quick)
  i0_args=(--quick)
  # M2/M3 under mpiexec -n 2: fewer round trips and repetitions, less compute per run
  m2_args=(5000 5 1)
  m3_args=(--reps 3 --work-ms 30 --cases 100:1024)  # the case where messages can be hidden
else
  lat_args=()
  go_lat=(-count 5 -benchtime 0.2s)
  go_sw=(-count 5 -benchtime 1000000x)
  sweep_args=(--reps 5)
  tasks_args=(--reps 5)
  spin_args=(--reps 5)
  s6_args=(--reps 5)
  a3_args=(--reps 5)
  a1_args=(--procs "1,2,$((2 * cores))")
  a2_args=(--procs "1,2,$((2 * cores))")
  icount_n=50000
  l3s_args=()
  x2_args=(--reps 5)
  a4_args=()
  m1_args=()
  trees_args=(--r1-n 30,32 --r2-n 12,13 --r3-n 1000000 --reps 5 --r3-reps 3 --timeout 600
    --procs "1,2,$((2 * cores))" --size boost_fiber:fib=30 --size boost_fiber:queens=12
    --icount-fib 18,21 --icount-queens 8,9)
  io_args=(--i1-rounds 20000 --i1-reps 5 --i2-conns 1,100,1000,10000 --i2-duration 10 --i2-reps 3
    --idle 10000)
  i3_args=()
  i0_args=()
  m2_args=(20000 7 1)
  m3_args=(--reps 5 --work-ms 200)
fi

# ---- the suite: one row per step ----------------------------------------------------------
# name | targets | outputs (under raw/) | command (evaluated when the step runs)
# targets: the CMake targets the step runs (built by the build step; a missing one skips
# the step, with the reason); "?target": built when it exists, not required; "@go",
# "@valgrind": a tool that must be installed. B is the build's bench/ directory.
read -r -d '' STEPS <<'TABLE'
latency           | weft_bench_latency                        | latency.json        | "$B/weft_bench_latency" "${lat_args[@]}" --benchmark_out="$raw/latency.json" --benchmark_out_format=json
go_latency        | @go                                       | go_latency.txt      | go_run -bench "^BenchmarkL" -cpu 1 "${go_lat[@]}" >"$raw/go_latency.txt"
go_sweep          | @go                                       | go_sweep.txt        | go_run -bench "T1|T5" -cpu "$(seq -s, 1 "$cores"),$((2 * cores))" "${go_sw[@]}" >"$raw/go_sweep.txt"
latency_L3_sites  | weft_l3_sites                             | L3_sites.json       | "$B/weft_l3_sites" --out "$raw" "${l3s_args[@]}"
icount            | @valgrind weft_icount ?weft_icount_cpp ?weft_icount_fiber | icount.json | ICOUNT_N="$icount_n" bench/icount.sh "$build" "$raw"
icount_X1_nohooks | @valgrind weft_icount                     | nohooks/icount.json | icount_nohooks
memory            | weft_mem_per_thread                       | memory.json         | "$B/weft_mem_per_thread" --out "$raw"
calibrate         | weft_calibrate                            | calibrate.json      | "$B/weft_calibrate" --out "$raw"
sweep_T1_T5       | weft_sweep                                | sweep.json          | "$B/weft_sweep" --out "$raw" "${sweep_args[@]}"
tasks_L2_T1_T5    | weft_tasks                                | tasks.json          | "$B/tasks/weft_tasks" --out "$raw" "${tasks_args[@]}"
spin_S1_S5        | weft_bench_spin                           | S1.json S5.json     | "$B/sync/weft_bench_spin" --out "$raw" "${spin_args[@]}"
contention_S6     | weft_s6_contention                        | S6.json             | "$B/sync/weft_s6_contention" --out "$raw" "${s6_args[@]}"
quicksort_A3      | weft_a3_quicksort                         | A3.json             | "$B/apps/weft_a3_quicksort" --out "$raw" "${a3_args[@]}"
vecmat_A1         | weft_a1_vecmat                            | A1.json             | "$B/apps/weft_a1_vecmat" --out "$raw" "${a1_args[@]}"
sorts_A2          | weft_a2_sort                              | A2.json             | "$B/apps/weft_a2_sort" --out "$raw" "${a2_args[@]}"
trees_R1_R2_R3    | weft_trees ?weft_trees_shared ?weft_trees_omp ?weft_trees_tbb ?weft_trees_fiber | R.json | "$py" bench/trees/R_run.py --build "$build" --out "$raw" ${go:+--go "$go"} "${trees_args[@]}"
io_I1_I2          | weft_io_client weft_io_peer ?weft_example_echo_server ?weft_example_http_server | I.json | "$py" bench/io/I_run.py --build "$build" --out "$raw" ${go:+--go "$go"} "${io_args[@]}"
io_I3             | weft_io_i3                                | I3.json             | "$B/io/weft_io_i3" --out "$raw" "${i3_args[@]}"
io_I0             | weft_io_i0                                | I0.json             | "$B/io/weft_io_i0" --out "$raw" "${i0_args[@]}"
icount_I0         | @valgrind weft_io_i0                      | I0_icount.json      | bench/io/i0_icount.sh "$build" "$raw"
simulation_A4     | weft_a4_pdes                              | A4.json             | "$B/apps/weft_a4_pdes" --out "$raw" "${a4_args[@]}"
scheduler_X2      | weft_x2_t1                                | X2.json             | "$B/weft_x2_t1" --out "$raw" "${x2_args[@]}"
mpi_M2            | @mpiexec weft_bench_mpi_m2                | M2.json             | timeout 600 mpiexec -n 2 "$B/mpi/weft_bench_mpi_m2" --out "$raw" "${m2_args[@]}"
mpi_M3            | @mpiexec weft_bench_mpi_m3                | M3.json             | timeout 900 mpiexec -n 2 "$B/mpi/weft_bench_mpi_m3" --out "$raw" "${m3_args[@]}"
model_inputs_M1   | weft_sweep weft_calibrate weft_m1_linexfer | M1_inputs.json     | "$py" bench/model/measure.py --build "$build" --out "$raw" "${m1_args[@]}"
TABLE

trim() { local v=$1; v=${v#"${v%%[![:space:]]*}"}; printf '%s' "${v%"${v##*[![:space:]]}"}"; }
names=() targets=() outputs=() commands=()
while IFS= read -r line; do
  [ -n "$line" ] || continue
  IFS='|' read -r n t o c <<<"$line"
  names+=("$(trim "$n")"); targets+=("$(trim "$t")"); outputs+=("$(trim "$o")"); commands+=("$(trim "$c")")
done <<<"$STEPS"
steps_total=$((${#names[@]} + 2))   # + build + report
printf 'weft demo (%s mode): results in %s/\n' "$mode" "$out"
# Other jobs on the machine skew every timing; the report quotes the load around the run.
echo "start $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >"$raw/loadavg.txt"

# ---- build: the targets of the table that this configuration defines ----------------------
build_weft() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
    -DWEFT_BUILD_BENCH=ON || return
  local known want=()
  # ninja's help lists the targets of subdirectories (phony aliases) but not the
  # executables of the top directory (the examples): its target list has both
  known=$({ cmake --build "$build" --target help; cmake --build "$build" -- -t targets all; } 2>/dev/null |
    sed -n 's/^\([A-Za-z0-9_]*\): .*/\1/p' | sort -u)
  for t in ${targets[*]}; do
    t=${t#\?}
    case $t in @*) continue ;; esac
    grep -qx "$t" <<<"$known" && want+=("$t")
  done
  cmake --build "$build" -j "$cores" --target $(printf '%s\n' "${want[@]}" | sort -u)
}
step build build_weft
if [ ${#failed[@]} -ne 0 ]; then
  tail -n 30 "$raw/logs/build.log"
  echo "demo.sh: the build failed; nothing to measure"
  exit 1
fi
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
printf 'machine: %s, %s cores, Linux %s\n' "${model:-unknown}" "$cores" "$(uname -r)"
B=$build/bench
grep -q 'Boost.Fiber/Context >= 1.74 not found' "$raw/logs/build.log" 2>/dev/null &&
  skip "Boost.Fiber: not installed (libboost-fiber-dev): Boost.Fiber columns left blank"
grep -q 'Google Benchmark not found' "$raw/logs/build.log" 2>/dev/null &&
  skip "L1-L8: Google Benchmark not installed (libbenchmark-dev): latency rows skipped"
[ -x "$B/tasks/weft_tasks" ] || skip "OpenMP tasks, oneTBB task_group: neither found: task-system columns left blank"

if [ -n "$go" ]; then
  go_run() { (cd bench/go && GOTOOLCHAIN=local "$go" test -run '^$' "$@"); }
else
  skip "Go: no go toolchain (PATH or /usr/local/go/bin): Go columns left blank"
fi
command -v valgrind >/dev/null || skip "instruction counts: valgrind not installed"
# M2/M3 need libweft_mpi (built only where CMake finds MPI) and mpiexec
if ! command -v mpiexec >/dev/null || [ ! -x "$B/mpi/weft_bench_mpi_m2" ]; then
  skip "MPI: no MPI found (mpich: libmpich-dev and mpiexec): M2/M3 skipped"
fi
# X1's middle column (hooks compiled out): a second build with -DWEFT_HOOKS=OFF, the
# library and weft_icount only (about 10 s on 2 cores), counted on L2 and L3.
icount_nohooks() {
  cmake -S . -B "$build-nohooks" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
    -DWEFT_BUILD_BENCH=ON -DWEFT_HOOKS=OFF && cmake --build "$build-nohooks" -j "$cores" --target weft_icount &&
    ICOUNT_N="$icount_n" ICOUNT_MODES="l2 l3" bench/icount.sh "$build-nohooks" "$raw/nohooks"
}
# The reason a step cannot run (empty: it can): a missing tool or a target not built.
missing() {
  local t
  for t in $1; do
    case $t in
      \?*) ;;
      @go) [ -n "$go" ] || { echo "no go toolchain"; return; } ;;
      @valgrind) command -v valgrind >/dev/null || { echo "valgrind not installed"; return; } ;;
      @mpiexec) command -v mpiexec >/dev/null || { echo "no mpiexec (MPI)"; return; } ;;
      *) [ -n "$(find "$B" -maxdepth 2 -type f -name "$t" -perm -u+x 2>/dev/null)" ] ||
        { echo "$t not built"; return; } ;;
    esac
  done
}
for i in "${!names[@]}"; do
  why=$(missing "${targets[$i]}")
  if [ -n "$why" ]; then
    case $why in no\ go*|valgrind*|no\ mpiexec*|weft_bench_mpi_*) ;; *) skip "${names[$i]}: $why: skipped" ;; esac
    step_no=$((step_no + 1))
    continue
  fi
  step "${names[$i]}" eval "${commands[$i]}"
  for o in ${outputs[$i]}; do
    [ -s "$raw/$o" ] || echo "  (${names[$i]} wrote no $raw/$o: its report section says so)"
  done
done
echo "end $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >>"$raw/loadavg.txt"
for f in "$raw"/logs/*.log; do
  grep -h 'not built' "$f" 2>/dev/null | sed 's/^/baseline /' >>"$skipped"
done
sort -u -o "$skipped" "$skipped"
step report "$py" bench/report/make_report.py "$raw" "$out" --mode "$mode"

echo
printf 'done in %s: %s/README.md, %d figures in %s/figures/, raw JSON in %s/\n' "$(elapsed)" \
  "$out" "$(ls "$out"/figures/*.png 2>/dev/null | wc -l)" "$out" "$raw"
if [ -s "$skipped" ]; then
  echo "skipped:"
  sed 's/^/  /' "$skipped"
fi
if [ ${#failed[@]} -ne 0 ]; then
  echo "steps that failed (their sections say so in the report): ${failed[*]}"
fi
# The headline: the closing note of the report.
sed -n '/^## Closing note/,$p' "$out/README.md" 2>/dev/null | sed -n '1,/^Figures:/p' | grep -v '^Figures:'
exit 0
