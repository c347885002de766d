#!/usr/bin/env bash
# gate.sh - the instruction-count gate: counts the hot paths of a Release build (WEFT_CHECKED
# off, -DWEFT_BUILD_BENCH=ON) with valgrind's callgrind and fails when a row of
# tests/icount/budgets.txt is exceeded. Counts are deterministic (user-mode instructions,
# fixed costs cancelled by counting two sizes), so a budget is a hard limit, not a timing.
#
# usage: tests/icount/gate.sh check BUILD_DIR       count, then compare with the budgets
#        tests/icount/gate.sh count BUILD_DIR       print "ROW COUNT" lines (COUNT "null" when
#                                                   a row could not be counted)
#        tests/icount/gate.sh compare COUNTS_FILE   compare counts (count's format) with the budgets
#        tests/icount/gate.sh rebaseline BUILD_DIR  print budgets.txt with every budget reset to
#                                                   the current count + margin (the reasons kept)
# env:   ICOUNT_BUDGETS   the budgets file (default tests/icount/budgets.txt next to this script)
#
# The rows (bench/README.md defines them; the programs are the benchmarks' own):
#   L1..L7  bench/icount.sh on build/bench/weft_icount, N = 2000 vs 4000 iterations
#           (instructions per operation; L6/L7 per round)
#   T1      build/bench/weft_sweep's T1 at P = 1 (a chain of detached null threads, each
#           creating its successor), 20000 vs 40000 threads, one warm-up + one run each,
#           the whole process counted: (Ir(2N) - Ir(N)) / (2 x N) instructions per thread
#   R1      build/bench/trees/weft_trees --callgrind: fib(18) vs fib(21), one thread per call,
#           nvps = 1: (Ir(21) - Ir(18)) / (spawns(21) - spawns(18)) instructions per spawn
#
# check: exit 0 when every budgeted row was counted and is within its budget; 1 when a row
# exceeds its budget (one line per row naming the row, the budget and the count) or could
# not be counted (a program failed or is missing, a ping-pong pattern failed its verify run,
# or nothing was collected: a count of 0); 77 (skipped) when valgrind is not installed or
# the machine is not x86-64 (the budgets are x86-64 counts). A budget line is
# "ROW BUDGET REASON...": the count may equal the budget; it fails when it is larger.
# Updating the budgets after a deliberate change:
#   tests/icount/gate.sh rebaseline build-test-icount > /tmp/b && mv /tmp/b tests/icount/budgets.txt
# then review the diff (a raised budget's commit says why).
set -euo pipefail
# The system monitor's kernel thread (docs/design.md) would add its own instructions
# to the collected ones whenever it looks, which depends on timing: counted without it.
export WEFT_MONITOR=off
here=$(cd "$(dirname "$0")" && pwd)
budgets=${ICOUNT_BUDGETS:-$here/budgets.txt}
root=$(cd "$here/../.." && pwd)
margin_pct=3 # rebaseline: budget = ceil(count x 1.03), and at least count + 2
margin_min=2

die() { echo "icount gate: $*" >&2; exit 2; }

# count BUILD: "ROW COUNT" lines on stdout, one per row; COUNT is "null" for a row that
# could not be counted (the reason goes to stderr)
count() {
  local build=$1 tmp=$work
  [ -x "$build/bench/weft_icount" ] && [ -x "$build/bench/weft_sweep" ] &&
    [ -x "$build/bench/trees/weft_trees" ] ||
    echo "icount gate: $build lacks weft_icount, weft_sweep or trees/weft_trees (build them with -DWEFT_BUILD_BENCH=ON)" >&2
  # L1..L7: bench/icount.sh's loops and arithmetic (ICOUNT_X4=0: X4 is not gated). Its
  # verify runs check the ping-pong patterns first: a row whose pattern failed is not counted.
  local lrows="L1_create L2 L3 L4_mutex L4_sem L5_trylock L5_trywait L6_mutex_pingpong L6_sem_pingpong L7_cond_pingpong"
  if ICOUNT_N=2000 ICOUNT_X4=0 ICOUNT_MODES="l1 l2 l3 l4m l4s l5m l5s l6m l6s l7" \
      bash "$root/bench/icount.sh" "$build" "$tmp/l" >"$tmp/l.log" 2>&1; then
    local r v mode
    for r in $lrows; do
      # icount.json: {"row": "L2", "lib": "weft", "instructions_per_op": 289.1}
      v=$(grep -o "{\"row\": \"$r\", \"lib\": \"weft\", \"instructions_per_op\": [^}]*}" "$tmp/l/icount.json" |
          sed 's/.*: //; s/}//' | head -1) || v=null
      case $r in L6_mutex*) mode=l6m ;; L6_sem*) mode=l6s ;; L7*) mode=l7 ;; *) mode= ;; esac
      if [ -n "$mode" ] && grep -q "^verify $mode: FAILED" "$tmp/l.log"; then
        echo "icount gate: $r: weft_icount --mode $mode --verify failed:" >&2
        grep "^verify" "$tmp/l.log" >&2
        v=null
      fi
      echo "$r ${v:-null}"
    done
  else
    echo "icount gate: bench/icount.sh failed:" >&2; tail -5 "$tmp/l.log" >&2
    for r in $lrows; do echo "$r null"; done
  fi
  # T1: the whole weft_sweep process at N and 2N threads
  local n=20000 a b
  a=$(ir_sweep "$build" $n "$tmp") && b=$(ir_sweep "$build" $((2 * n)) "$tmp") &&
    awk -v a="$a" -v b="$b" -v n=$n 'BEGIN { printf "T1 %.1f\n", (b - a) / (2 * n) }' ||
    echo "T1 null"
  # R1: fib(18) and fib(21), one counted run each
  a=$(ir_fib "$build" 18 "$tmp") && b=$(ir_fib "$build" 21 "$tmp") &&
    echo "$a $b" | awk '{ printf "R1 %.1f\n", ($3 - $1) / ($4 - $2) }' ||
    echo "R1 null"
}

# ir_sweep BUILD N TMP -> Ir of weft_sweep's T1 at P=1 (one warm-up + one run of N threads)
ir_sweep() {
  local f="$2.cg" ir
  valgrind --tool=callgrind --callgrind-out-file="$3/$f" "$1/bench/weft_sweep" --libs weft \
    --tests T1 --procs 1 --oversub 0 --reps 1 --n "$2" --out "$3/sweep" >"$3/sweep.log" 2>&1 ||
    { echo "icount gate: T1 n=$2 failed:" >&2; tail -3 "$3/sweep.log" >&2; return 1; }
  ir=$(sed -n 's/^summary: *//p' "$3/$f")
  [ -n "$ir" ] || { echo "icount gate: T1 n=$2: no callgrind summary" >&2; return 1; }
  echo "$ir"
}

# ir_fib BUILD N TMP -> "IR SPAWNS" of one counted fib(N) (weft_trees --callgrind)
ir_fib() {
  local f="fib$2.cg" ir spawns
  valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$3/$f" \
    "$1/bench/trees/weft_trees" --bench fib --lib weft --p 1 --n "$2" --reps 1 --callgrind \
    >"$3/fib.log" 2>&1 || { echo "icount gate: R1 fib($2) failed:" >&2; tail -3 "$3/fib.log" >&2; return 1; }
  ir=$(sed -n 's/^summary: *//p' "$3/$f")
  spawns=$(sed -n 's/^RESULT .*"spawns": \([0-9]*\).*/\1/p' "$3/fib.log")
  [ -n "$ir" ] && [ -n "$spawns" ] || { echo "icount gate: R1 fib($2): no summary or spawn count" >&2; return 1; }
  echo "$ir $spawns"
}

# compare COUNTS: every budgeted row must be counted and within budget; exit 0 or 1
compare() {
  [ -r "$budgets" ] || die "no budgets file $budgets"
  awk -v bfile="$budgets" '
    FNR == NR {                                   # the budgets file
      if ($0 ~ /^[ \t]*(#|$)/) next
      if ($2 !~ /^[0-9]+(\.[0-9]+)?$/) { printf "icount gate: %s:%d: bad budget line: %s\n", bfile, FNR, $0; bad = 1; next }
      if ($1 in budget) { printf "icount gate: %s:%d: row %s twice\n", bfile, FNR, $1; bad = 1; next }
      budget[$1] = $2; order[++nrows] = $1; next
    }
    { count[$1] = $2 }                            # the counts
    END {
      if (nrows == 0) { printf "icount gate: %s has no rows\n", bfile; bad = 1 }
      for (i = 1; i <= nrows; i++) {
        r = order[i]
        if (!(r in count) || count[r] !~ /^-?[0-9]+(\.[0-9]+)?$/) {
          printf "icount gate: FAIL %s: could not be counted (budget %s)\n", r, budget[r]; bad = 1
        } else if (count[r] + 0 <= 0) {
          # nothing collected: a program built without valgrind/callgrind.h counts nothing
          printf "icount gate: FAIL %s: counted %s instructions, nothing was collected (budget %s)\n", r, count[r], budget[r]; bad = 1
        } else if (count[r] + 0 > budget[r] + 0) {
          printf "icount gate: FAIL %s: %s instructions, over its budget of %s (%s)\n", r, count[r], budget[r], bfile; bad = 1
        } else {
          printf "icount gate: ok   %-18s %8s <= %s\n", r, count[r], budget[r]
        }
      }
      exit bad
    }' "$budgets" "$1"
}

# rebaseline COUNTS: budgets.txt with each row's budget and measured figure renewed; a row
# line is "ROW BUDGET DESCRIPTION (measured C, +M%)"
rebaseline() {
  [ -r "$budgets" ] || die "no budgets file $budgets"
  awk -v pct="$margin_pct" -v min="$margin_min" '
    FNR == NR { count[$1] = $2; next }
    /^[ \t]*(#|$)/ { print; next }
    {
      r = $1; c = count[r]
      if (c !~ /^[0-9]+(\.[0-9]+)?$/) { print; printf "icount gate: %s not counted: kept\n", r > "/dev/stderr"; next }
      b = c * (1 + pct / 100); b = (b == int(b)) ? b : int(b) + 1
      if (b < c + min) { b = c + min; b = (b == int(b)) ? b : int(b) + 1 }
      d = $0; sub(/^[ \t]*[^ \t]+[ \t]+[^ \t]+[ \t]+/, "", d); sub(/ *\(measured [^)]*\)$/, "", d)
      printf "%-18s %5d  %s (measured %s)\n", r, b, d, c
    }' "$1" "$budgets"
}

have_counter() {
  command -v valgrind >/dev/null || { echo "icount gate: valgrind not installed: skipped (scripts/install-deps.sh installs it)"; return 1; }
  [ "$(uname -m)" = x86_64 ] || { echo "icount gate: the budgets are x86-64 counts; $(uname -m): skipped"; return 1; }
}

cmd=${1:-}; arg=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $cmd in
  count)      [ -n "$arg" ] || die "usage: $0 count BUILD_DIR"; have_counter || exit 77; count "$arg" ;;
  compare)    [ -n "$arg" ] || die "usage: $0 compare COUNTS_FILE"; compare "$arg" ;;
  check|rebaseline)
    [ -n "$arg" ] || die "usage: $0 $cmd BUILD_DIR"
    have_counter || exit 77
    counts=$work/counts
    count "$arg" >"$counts"
    if [ "$cmd" = check ]; then compare "$counts"; else rebaseline "$counts"; fi ;;
  *) die "usage: $0 check|count|rebaseline BUILD_DIR, or $0 compare COUNTS_FILE" ;;
esac
