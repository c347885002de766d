#!/usr/bin/env bash
# bench/io/i0_icount.sh - I0's instruction counts: a weft read that completes at once,
# against the plain call, and a round trip of two parked reads (bench/io/I0_read.c).
#
# usage: bench/io/i0_icount.sh BUILD_DIR [OUT_DIR]    (BUILD_DIR/bench/io/weft_io_i0)
# env:   I0_N (default 2000; 2N is the second count), I0_ENGINES (default "epoll uring")
#
# Each case runs under callgrind with N and with 2N operations, collection on around
# the loop only: (Ir(2N) - Ir(N)) / N per operation, so fixed costs cancel. callgrind
# counts user-mode instructions: a system call's kernel side is not in them (the plain
# calls count their libc wrappers only). In the park case the idle VP polls for at most
# 1 us (cfg.spin_us) between a park and the wake-up, and those polls are counted too:
# the count was the same from run to run here, but it is not gated. Prints a table and, with
# OUT_DIR, writes OUT_DIR/I0_icount.json. Needs valgrind (else: skipped, exit 0).
set -euo pipefail
build=${1:?usage: i0_icount.sh BUILD_DIR [OUT_DIR]}
out=${2:-}
prog=$build/bench/io/weft_io_i0
n=${I0_N:-2000}
command -v valgrind >/dev/null || { echo "i0_icount: valgrind not installed, skipped"; exit 0; }
[ -x "$prog" ] || { echo "i0_icount: $prog missing (build it with -DWEFT_BUILD_BENCH=ON)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WEFT_MONITOR=off

# count ENGINE CASE N -> "IR OPS ENGINE"
count() {
  local f="$tmp/cg.$RANDOM" o
  o=$(WEFT_IO=$1 valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$f" \
        "$prog" --icount "$2" --n "$3" 2>"$tmp/vg.log") || { tail -5 "$tmp/vg.log" >&2; return 1; }
  echo "$(sed -n 's/^summary: *//p' "$f") $(sed -n 's/^ops=//p' <<<"$o") $(sed -n 's/^engine=//p' <<<"$o")"
}

rows=()
printf '%-7s %-12s %s\n' engine case "instructions/op (callgrind, N=$n vs 2N)"
for engine in ${I0_ENGINES:-epoll uring}; do
  for c in weft_pipe plain_pipe weft_file plain_file weft_park plain_park; do
    if a=$(count "$engine" "$c" "$n") && b=$(count "$engine" "$c" $((2 * n))); then
      got=$(awk '{print $3}' <<<"$a")
      if [ "$got" != "$engine" ]; then
        echo "i0_icount: engine $engine not available here (weft chose $got), skipped"
        break
      fi
      v=$(echo "$a $b" | awk '{ printf "%.1f", ($4 - $1) / ($5 - $2) }')
    else
      v=null
    fi
    printf '%-7s %-12s %s\n' "$engine" "$c" "$v"
    rows+=("{\"row\": \"I0\", \"engine\": \"$engine\", \"case\": \"$c\", \"instructions_per_op\": $v}")
  done
done
if [ -n "$out" ]; then
  mkdir -p "$out"
  { echo "{\"id\": \"I0_icount\", \"n\": $n, \"results\": ["
    for i in "${!rows[@]}"; do
      [ "$i" -gt 0 ] && echo ","
      printf '  %s' "${rows[$i]}"
    done
    echo; echo "]}"; } >"$out/I0_icount.json"
fi
