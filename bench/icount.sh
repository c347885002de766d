#!/usr/bin/env bash
# icount.sh - instructions per operation for the L1 (create), L2 (null thread), L3 (switch), L4/L5
# (uncontested lock, semaphore, try) and L6/L7 (ping-pong, per round) loops, X4 (futures
# against semaphores, per thread), counted by
# valgrind's callgrind: each loop runs N and 2N times, only the loop is collected, and
# (Ir(2N) - Ir(N)) / (ops(2N) - ops(N)) cancels every fixed cost.
# User-mode instructions only: pthreads are not counted (their switch is kernel work).
# Before counting, the ping-pong patterns run once in weft_icount's verify mode (strict
# alternation, one partner pass per round); a failure is reported, never fatal.
#
# usage: bench/icount.sh [BUILD_DIR] [OUT_DIR]    (defaults: build, bench-results)
# env:   ICOUNT_N (default 50000); ICOUNT_MODES: the loops to count (default all:
#        "l2 l3 l4m l4s l5m l5s l6m l6s l7"; X1's WEFT_HOOKS=OFF column needs only "l2 l3")
# Prints a table and writes OUT_DIR/icount.json.
set -euo pipefail
# The system monitor's kernel thread (docs/design.md) would add its own instructions
# to the collected ones whenever it looks, which depends on timing: counted without it.
export WEFT_MONITOR=off
build=${1:-build}
out=${2:-bench-results}
n=${ICOUNT_N:-50000}
modes=${ICOUNT_MODES:-l1 l2 l3 l4m l4s l5m l5s l6m l6s l7}
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "icount: valgrind not installed, skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run PROG MODE ITERATIONS [EXTRA] -> "IR OPS"
run() {
  local f="$tmp/cg.$RANDOM" ops ir
  ops=$(valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$f" \
          "$1" --mode "$2" --n "$3" ${4:+"--$4"} 2>"$tmp/vg.log" | sed -n 's/^ops=//p')
  ir=$(sed -n 's/^summary: *//p' "$f")
  [ -n "$ops" ] && [ -n "$ir" ] || { echo "icount: $1 $2 $3 failed:" >&2; tail -5 "$tmp/vg.log" >&2; return 1; }
  echo "$ir $ops"
}

# per_op PROG MODE [EXTRA] -> instructions per operation
per_op() {
  local a b
  a=$(run "$1" "$2" "$n" "${3:-}") && b=$(run "$1" "$2" $((2 * n)) "${3:-}") || { echo "null"; return; }
  echo "$a $b" | awk '{ printf "%.1f\n", ($3 - $1) / ($4 - $2) }'
}

rows=()
add() { rows+=("{\"row\": \"$1\", \"lib\": \"$2\", \"instructions_per_op\": $3}"); }
for mode in l6m l6s l7; do
  "$build/bench/weft_icount" --mode "$mode" --n 20000 --verify | grep '^verify' || echo "verify $mode: FAILED"
done
printf '%-18s %-12s %s\n' row lib "instructions/op (callgrind, N=$n vs 2N)"
declare -A row_of=([l1]=L1_create [l2]=L2 [l3]=L3 [l4m]=L4_mutex [l4s]=L4_sem [l5m]=L5_trylock
  [l5s]=L5_trywait [l6m]=L6_mutex_pingpong [l6s]=L6_sem_pingpong [l7]=L7_cond_pingpong)
for mode in $modes; do
  row=${row_of[$mode]}
  v=$(per_op "$build/bench/weft_icount" "$mode"); add "$row" weft "$v"
  printf '%-18s %-12s %s\n' "$row" weft "$v"
  # X3: the C++ layer (weft/weft.hpp) on the same loops
  if [ -x "$build/bench/weft_icount_cpp" ] && [[ " l1 l2 l3 l4m " == *" $mode "* ]]; then
    v=$(per_op "$build/bench/weft_icount_cpp" "$mode"); add "$row" weft_cpp "$v"
    printf '%-18s %-12s %s\n' "$row" weft_cpp "$v"
  fi
  if [ -x "$build/bench/weft_icount_fiber" ] && [[ " l2 l3 l4m l4s l6m l6s l7 " == *" $mode "* ]]; then
    v=$(per_op "$build/bench/weft_icount_fiber" "$mode"); add "$row" boost_fiber "$v"
    printf '%-18s %-12s %s\n' "$row" boost_fiber "$v"
  fi
done
# X1's third column: L2 and L3 with one counting callback on every event (weft/hook.h);
# skipped in a build with WEFT_HOOKS=OFF (the push fails there)
for mode in l2 l3; do
  row="X1_${row_of[$mode]}_one_callback"
  v=$(per_op "$build/bench/weft_icount" "$mode" hooked 2>/dev/null); add "$row" weft "$v"
  printf '%-18s %-12s %s\n' "$row" weft "$v"
done
# X4: futures against semaphores, per thread of a chain (T1's shape) and of a fork-join
# (T5's), one VP (ext/X4_futures.c); ICOUNT_X4=0 skips it
if [ "${ICOUNT_X4:-1}" != 0 ] && [ -x "$build/bench/weft_x4_futures" ]; then
  for mode in chain_future chain_sem forkjoin_future forkjoin_sem; do
    v=$(per_op "$build/bench/weft_x4_futures" "$mode"); add "X4_$mode" weft "$v"
    printf '%-18s %-12s %s\n' "X4_$mode" weft "$v"
  done
fi
{
  printf '{"tool": "valgrind --tool=callgrind", "n": %d, "rows": [' "$n"
  (IFS=,; printf '%s' "${rows[*]}")
  printf ']}\n'
} >"$out/icount.json"
