#!/usr/bin/env bash
# x2_icount.sh - X2 in instructions per operation (callgrind, N and 2N, difference / N,
# as bench/icount.sh): the L2, L3 and T1 loops run by threads of the root bundle
# (with an attribute), of examples/custom_sched.c's scheduler and of the scheduler
# library's FIFO (ext/X2_icount.c), one VP.
# usage: bench/ext/x2_icount.sh [BUILD_DIR]     env: ICOUNT_N (default 20000)
set -euo pipefail
build=${1:-build}
n=${ICOUNT_N:-20000}
command -v valgrind >/dev/null || { echo "x2_icount: valgrind not installed, skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # MODE SCHED N -> "IR OPS"
  local f="$tmp/cg.$RANDOM" ops ir
  ops=$(valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$f" \
          "$build/bench/weft_x2_icount" --mode "$1" --sched "$2" --n "$3" 2>"$tmp/vg.log" |
        sed -n 's/^ops=//p')
  ir=$(sed -n 's/^summary: *//p' "$f")
  [ -n "$ops" ] && [ -n "$ir" ] || { echo "x2_icount: $1 $2 failed" >&2; tail -5 "$tmp/vg.log" >&2; return 1; }
  echo "$ir $ops"
}
printf '%-4s %-8s %s\n' row sched "instructions/op (callgrind, N=$n vs 2N)"
for mode in ${X2_MODES:-l2 l3 t1}; do
  for s in default example fifo; do
    a=$(run "$mode" "$s" "$n") && b=$(run "$mode" "$s" $((2 * n))) &&
      v=$(echo "$a $b" | awk '{ printf "%.1f\n", ($3 - $1) / ($4 - $2) }') || v=null
    printf '%-4s %-8s %s\n' "$mode" "$s" "$v"
  done
done
