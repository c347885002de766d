#!/usr/bin/env bash
# demo.sh - weft's main job for now: build weft in Release into ./build-release, run the
# benchmarks beside POSIX threads, Boost.Fiber and (if installed) Go, and print one
# headline table (L1-L8 latency; T1, T4, T5 throughput at P = 1..cores; instruction
# counts; memory per unstarted thread), with the spin-waiting rows S1-S5 and the lock
# contention row S6 printed as their own tables. About 5 minutes on a 2-core machine.
#
# usage: scripts/demo.sh [RESULTS_DIR]      (default: ./bench-results)
# Installs what it needs first (scripts/install-deps.sh). Results: RESULTS_DIR/*.json, *.png.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
out=${1:-bench-results}
build=build-release
mkdir -p "$out"

section() { printf '\n==== %s ====\n' "$*"; }

section "build (Release, $build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF \
  -DWEFT_BUILD_BENCH=ON >/dev/null
if ! cmake --build "$build" >"$out/build.log" 2>&1; then
  cat "$out/build.log"
  exit 1
fi
tail -n 1 "$out/build.log"

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
printf 'machine: %s, %s cores, Linux %s\n' "${model:-unknown}" "$(nproc)" "$(uname -r)"

section "latency: L1 L2 L3 L8 (Google Benchmark, 5 repetitions)"
if [ -x "$build/bench/weft_bench_latency" ]; then
  "$build/bench/weft_bench_latency" --benchmark_out="$out/latency.json" \
    --benchmark_out_format=json | grep -E '_(median|cv) '
else
  echo "weft_bench_latency not built (Google Benchmark missing): skipped"
fi

section "latency baseline: Go goroutines (optional)"
if command -v go >/dev/null; then
  (cd bench/go && GOTOOLCHAIN=local go test -run '^$' -bench . -cpu 1 -count 5 -benchtime 0.2s) \
    | tee "$out/go_latency.txt" | grep '^Benchmark' || echo "go benchmark failed: Go column left blank"
else
  echo "go not installed: Go column left blank"
fi

section "instruction counts: L2 L3 (callgrind)"
bench/icount.sh "$build" "$out"

section "memory per created-but-unstarted thread"
"$build/bench/weft_mem_per_thread" --out "$out"

section "machine parallelism: independent work on P pinned kernel threads"
"$build/bench/weft_calibrate" --out "$out"

section "throughput sweep: T1 T4 T5"
"$build/bench/weft_sweep" --out "$out"

section "spin-waiting and atomic integers: S1-S5 (papers/004 Fig 4.1-4.3, papers/000 Fig 1-2)"
if [ -x "$build/bench/sync/weft_bench_spin" ]; then
  "$build/bench/sync/weft_bench_spin" --out "$out"
else
  echo "weft_bench_spin not built: skipped"
fi

section "lock contention with statistics: S6 (papers/002 Fig 5-2..5-5, quick set-up)"
if [ -x "$build/bench/contention/weft_s6_contention" ]; then
  "$build/bench/contention/weft_s6_contention" --quick --out "$out"
else
  echo "weft_s6_contention not built: skipped"
fi

# Figures need matplotlib; the system python has it on Debian even when another python3
# comes first in PATH.
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    section "figures"
    "$py" bench/plot.py "$out"
    "$py" bench/sync/plot_sync.py "$out" || echo "S-row figures failed"
    break
  fi
done

section "HEADLINE"
python3 bench/headline.py "$out"
