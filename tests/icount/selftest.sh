#!/usr/bin/env bash
# selftest.sh - tests the icount gate's checker (tests/icount/gate.sh compare and rebaseline)
# on made-up budgets and counts, without valgrind: a count within its budget passes, a count
# above it fails naming the row, the budget and the count, and a budgeted row that was not
# counted (missing, "null" or 0) or a malformed budgets file fails. Exit 0 when every case
# behaves, 1 otherwise (the failing cases are listed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gate=$here/gate.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

cat >"$tmp/budgets" <<'EOF'
# a comment, then a blank line

L2     298  null thread (measured 289.1)
L3      64  switch (measured 61.5)
EOF

# expect NAME WANT_RC WANT_TEXT COUNTS... : compare the counts against $tmp/budgets
expect() {
  local name=$1 want=$2 text=$3 out rc; shift 3
  printf '%s\n' "$@" >"$tmp/counts"
  out=$(ICOUNT_BUDGETS="$tmp/budgets" bash "$gate" compare "$tmp/counts" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "selftest FAIL: $name: exit $rc (want $want), output lacks '$text':"; sed 's/^/    /' <<<"$out"
    bad=1
  else
    echo "selftest ok: $name"
  fi
}

expect "within budget"        0 "ok   L3"  "L2 289.1" "L3 61.5"
expect "equal to the budget"  0 "ok   L2"  "L2 298" "L3 64"
expect "over budget"          1 "FAIL L2: 298.1 instructions, over its budget of 298" "L2 298.1" "L3 61.5"
expect "over budget, another row" 1 "FAIL L3: 70.0 instructions, over its budget of 64" "L2 289.1" "L3 70.0"
expect "row not counted"      1 "FAIL L3: could not be counted (budget 64)" "L2 289.1"
expect "row counted as null"  1 "FAIL L2: could not be counted (budget 298)" "L2 null" "L3 61.5"
expect "nothing collected"    1 "FAIL L3: counted 0.0 instructions, nothing was collected" "L2 289.1" "L3 0.0"
expect "unbudgeted rows ignored" 0 "ok   L3" "L2 289.1" "L3 61.5" "X1 999"

printf 'L2 two-hundred null thread\n' >"$tmp/budgets"
expect "malformed budget"     1 "bad budget line" "L2 289.1"
printf 'L2 298 a\nL2 300 b\n' >"$tmp/budgets"
expect "row twice"            1 "row L2 twice" "L2 289.1"
printf '# nothing\n' >"$tmp/budgets"
expect "no rows"              1 "has no rows" "L2 289.1"

# the lowered real budgets: every row's budget below the measured figure it records
# (count = that figure) must fail, and the file as it is must pass on those figures
real=$here/budgets.txt
sed -n 's/^\([A-Za-z0-9_]*\) .*(measured \([0-9.]*\))$/\1 \2/p' "$real" >"$tmp/counts"
ICOUNT_BUDGETS="$real" bash "$gate" compare "$tmp/counts" >/dev/null 2>&1 ||
  { echo "selftest FAIL: budgets.txt rejects its own measured figures"; bad=1; }
awk '/^[ \t]*(#|$)/ { print; next } { $2 = 1; print }' "$real" >"$tmp/low"
out=$(ICOUNT_BUDGETS="$tmp/low" bash "$gate" compare "$tmp/counts" 2>&1)
if [ $? -ne 1 ] || [ "$(grep -c 'FAIL .*over its budget of 1 ' <<<"$out")" -ne "$(wc -l <"$tmp/counts")" ]; then
  echo "selftest FAIL: budgets of 1 do not fail every row:"; sed 's/^/    /' <<<"$out"; bad=1
else
  echo "selftest ok: lowered budgets.txt fails all $(wc -l <"$tmp/counts") rows"
fi

exit $bad
