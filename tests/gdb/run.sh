#!/bin/sh
# tests/gdb/run.sh TARGET SCRIPT - runs gdb -batch on TARGET (tests/gdb/gdb_target.c)
# with the extension SCRIPT loaded by hand, stops where every thread is parked, and
# checks `info weft-threads` (threads in weft's I/O and in weft_blocking too) and `weft-thread NAME bt` (a thread in switch mode ALL
# too, whose frame resumes through weft__ctx_fp_resume); then writes a core of it there
# (gcore; WEFT_STACK_GUARD=mprotect, since gcore cannot read stack mappings holding
# MADV_GUARD_INSTALL guard regions) and checks the listing, backtraces (the frame
# unwinder) and `weft-thread NAME select` with `frame` and `info locals` on the core
# (not in sanitizer builds, WEFT_TEST_SANITIZED).
# A loaded machine may make the system monitor run VP 0's queue on a spare kernel thread:
# 'running on VP 0 (spare 1)' is accepted.
# Exit 77 (skipped) without gdb, under an emulator, or where ptrace is not allowed.
target=$1
script=$2
[ -n "$WEFT_TEST_EMULATED" ] && { echo "skipped: emulated"; exit 77; }
command -v gdb >/dev/null 2>&1 || { echo "skipped: no gdb"; exit 77; }
out=$(gdb -batch -nx -ex "set debuginfod enabled off" -ex "source $script" \
  -ex "break weft_gdb_test_ready" -ex run -ex "info weft-threads" \
  -ex "weft-thread on-mutex bt" -ex "weft-thread on-cond bt" -ex "weft-thread joiner bt" \
  -ex "weft-thread fp-all bt" -ex "weft-thread late-joiner bt" -ex "bt 1" -ex kill "$target" 2>&1)
echo "$out"
case $out in
  *"ptrace: Operation not permitted"*|*"Could not trace the inferior"*|*"not allowed"*)
    echo "skipped: ptrace not permitted"; exit 77 ;;
esac
fail=0
check() {
  if printf '%s\n' "$out" | grep -Eq -- "$1"; then :; else echo "MISSING: $1"; fail=1; fi
}
check '"on-mutex" +blocked on mutex 0x[0-9a-f]+'
check '"on-cond" +blocked on condition 0x[0-9a-f]+'
check '"on-sem" +blocked on semaphore 0x[0-9a-f]+'
check '"joiner" +blocked in weft_join on thread [0-9]+'
check '"on-read" +waiting in weft I/O for fd [0-9]+ to be readable'
check '"pooled" +in weft_blocking, running 0x[0-9a-f]+ gdb_pool_job on a pool kernel thread'
check ' +running on VP [0-9]+( \(spare [0-9]+\))? \(main\)'
# each backtrace reaches the thread's own function through weft's frames
check '#[0-9]+ .*(weft_mutex_lock|lock_common|lock_slow|lock_queue)'
check '#[0-9]+ .*mutex_waiter'
check '#[0-9]+ .*weft_cond_(timed)?wait'
check '#[0-9]+ .*cond_waiter'
check '#[0-9]+ .*weft_join'
check '#[0-9]+ .*joiner'
check '"fp-all" +blocked on mutex 0x[0-9a-f]+'
check '#[0-9]+ .*fp_all_waiter'
# weft_join's general path: the backtrace goes on past weft_join
check '"late-joiner" +blocked in weft_join on thread [0-9]+'
check '#[0-9]+ .*late_joiner'
# no backtrace stopped early (gdb: "previous frame inner to this frame")
if printf '%s\n' "$out" | grep -q "previous frame inner"; then echo "MISSING: whole backtraces"; fail=1; fi
# the registers were put back: the stopped thread's own frame is still there
check '#0 +weft_gdb_test_ready'

# the same from a core file (not in a sanitizer build: the core would hold the
# sanitizer's shadow memory, terabytes of reserved address space)
if [ -n "$WEFT_TEST_SANITIZED" ]; then
  echo "core file part skipped: sanitizer build"; exit $fail
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
gc=$(WEFT_STACK_GUARD=mprotect gdb -batch -nx -ex "set debuginfod enabled off" \
  -ex "break weft_gdb_test_ready" -ex run -ex "gcore $tmp/core" -ex kill "$target" 2>&1)
if [ ! -s "$tmp/core" ]; then
  echo "$gc"; echo "MISSING: a core from gcore"; exit 1
fi
out=$(gdb -batch -nx -ex "set debuginfod enabled off" -ex "source $script" \
  -ex "info weft-threads" -ex "weft-thread on-mutex bt" -ex "weft-thread joiner bt" \
  -ex "weft-thread fp-all bt" -ex "weft-thread late-joiner bt" -ex "weft-thread on-cond select" -ex "bt" -ex "frame function cond_waiter" \
  -ex "info locals" -ex "weft-thread none" -ex "bt" "$target" "$tmp/core" 2>&1)
echo "--- core file"
echo "$out"
check '"on-mutex" +blocked on mutex 0x[0-9a-f]+'
check '"on-cond" +blocked on condition 0x[0-9a-f]+'
check '"joiner" +blocked in weft_join on thread [0-9]+'
check '"on-read" +waiting in weft I/O for fd [0-9]+ to be readable'
check '"pooled" +in weft_blocking, running 0x[0-9a-f]+ gdb_pool_job on a pool kernel thread'
check ' +running on VP [0-9]+( \(spare [0-9]+\))? \(main\)'
check '^#[0-9]+ .*(weft_mutex_lock|lock_common|lock_slow|lock_queue)'
check '^#[0-9]+ .*mutex_waiter'
check '^#[0-9]+ .*weft_join'
check '^#[0-9]+ .*joiner'
check '^#[0-9]+ .*fp_all_waiter'
check '^#[0-9]+ .*late_joiner'
if printf '%s\n' "$out" | grep -q "previous frame inner"; then echo "MISSING: whole backtraces"; fail=1; fi
# select: #0 stays the kernel thread's, the thread's frames follow; frame and locals
check '^#1 +0x[0-9a-f]+ in .*weft__'
check '^#[0-9]+ .*cond_waiter'
check '^#[0-9]+ +0x[0-9a-f]+ in cond_waiter'
check '^rounds = 1$'
# none: the kernel thread's own caller again
check '^#1 +0x[0-9a-f]+ in main \('
exit $fail
