#!/usr/bin/env bash
# The test command: installs what the build needs, then builds and runs the whole
# test suite (GoogleTest through ctest) in every configuration CI checks:
#   release   gcc, assembly context switch, checked assertions on
#   asan      clang, ASan+UBSan
#   tsan      clang, TSan (fiber annotations on the assembly path); one ctest test per
#             test executable rather than per case (WEFT_TEST_PER_CASE=OFF: start-up time)
#   ucontext  gcc, the portable ucontext fallback
#   aarch64   cross-built with gcc-aarch64-linux-gnu, run under qemu-aarch64
# and, after release's tests, the install check (tests/install/run.sh): install to a
# temporary prefix, then build and run C, C++ and C-Threads clients against it through
# find_package(weft) and pkg-config, shared and static; then the instruction-count gate
#   icount    the shipped build (Release, WEFT_CHECKED off, x86-64) in build-test-icount:
#             builds the counting programs (bench/icount.sh's weft_icount, weft_sweep,
#             trees/weft_trees), counts L1-L7, T1 and R1 with callgrind and fails when a row
#             exceeds its budget in tests/icount/budgets.txt (tests/icount/gate.sh; about
#             a minute); its checker's self-test runs first. Skipped, with a message, where
#             valgrind is missing or the machine is not x86-64.
# Usage: scripts/test.sh [config...]   (default: all of them)
#   scripts/test.sh install   builds only the release libraries and runs the install check
#   scripts/test.sh icount    only the instruction-count gate
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

configs=("$@")
[ ${#configs[@]} -eq 0 ] && configs=(release icount asan tsan ucontext aarch64)
jobs=$(nproc)
failed=()

run_config() {
  local name=$1; shift
  local dir=build-test-$name
  echo "=== [$name] configure + build"
  cmake -S . -B "$dir" -G Ninja -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_TESTS=ON -DWEFT_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "=== [$name] ctest"
  # The log is kept so that the end of this script can name what failed: CI shows only the
  # last lines of a run, and a failure in the first configuration would scroll out of them.
  if ! ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 2>&1 | tee "$dir/ctest.log"; then
    failed+=("$name")
  fi
}

# For each failed configuration: the last lines its failed tests printed (ctest's
# --output-on-failure blocks, each from a test's status line to the next one), then, last of all
# because CI may show only the final twenty lines or so, the failed tests and their first telling
# lines (a sanitizer's warning, a failed expectation, an abort).
failure_summary() {
  local name dir
  for name in "$@"; do
    dir=build-test-$name
    [ -f "$dir/ctest.log" ] || continue
    echo "=== [$name] output of the failed tests"
    awk '/^[[:space:]]*[0-9]+\/[0-9]+ Test +#[0-9]+: /{ keep = ($0 ~ /\*\*\*/ && $0 !~ /\*\*\*Skipped/) }
         keep' "$dir/ctest.log" | tail -n 80
  done
  for name in "$@"; do
    dir=build-test-$name
    [ -f "$dir/ctest.log" ] || continue
    echo "=== [$name] failed:"
    grep -E '^[[:space:]]*[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*' "$dir/ctest.log" | grep -v '\*\*\*Skipped' | head -n 6 || true
    grep -E 'WARNING: [A-Za-z]+Sanitizer|ERROR: [A-Za-z]+Sanitizer|Failure$|FAILED  \]|weft: .*(abort|assert)|Assertion|Timeout' \
      "$dir/ctest.log" | head -n 6 || true
  done
}

release_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_CHECKED=ON)

install_check() {
  echo "=== [install] install to a temporary prefix, build and run clients against it"
  if ! bash tests/install/run.sh build-test-release; then
    failed+=("install")
  fi
}

# The counts are taken on what ships: Release, no checked assertions, no sanitizer, native.
icount_gate() {
  local dir=build-test-icount
  echo "=== [icount] checker self-test"
  if ! bash tests/icount/selftest.sh; then
    failed+=("icount"); return
  fi
  echo "=== [icount] configure + build the counting programs (Release, WEFT_CHECKED=OFF)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_CHECKED=OFF -DWEFT_BUILD_TESTS=OFF \
    -DWEFT_BUILD_BENCH=ON -DWEFT_WERROR=ON -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >/dev/null
  cmake --build "$dir" -j "$jobs" --target weft_icount weft_sweep weft_trees
  echo "=== [icount] instruction counts against tests/icount/budgets.txt"
  local rc=0
  bash tests/icount/gate.sh check "$dir" || rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || failed+=("icount")
}

for c in "${configs[@]}"; do
  case $c in
    release)  run_config release "${release_flags[@]}"
              install_check ;;
    install)  echo "=== [install] configure + build the release libraries"
              cmake -S . -B build-test-release -G Ninja -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_TESTS=ON \
                -DWEFT_WERROR=ON "${release_flags[@]}" >/dev/null
              cmake --build build-test-release -j "$jobs" --target weft_libraries
              install_check ;;
    icount)   icount_gate ;;
    asan)     ASAN_OPTIONS=detect_leaks=1 WEFT_TEST_SCALE=0.2 \
              run_config asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address \
                -DWEFT_CHECKED=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ ;;
    tsan)     TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" WEFT_TEST_SCALE=0.05 \
              run_config tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread \
                -DWEFT_CHECKED=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
                -DWEFT_TEST_PER_CASE=OFF ;;
    ucontext) run_config ucontext -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_CONTEXT=ucontext -DWEFT_CHECKED=ON ;;
    aarch64)  WEFT_TEST_SCALE=0.05 \
              run_config aarch64 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_CHECKED=ON \
                -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ;;
    *) echo "unknown config $c"; exit 2 ;;
  esac
done

if [ ${#failed[@]} -ne 0 ]; then
  failure_summary "${failed[@]}"
  echo "FAILED configurations: ${failed[*]}"
  exit 1
fi
echo "all configurations passed: ${configs[*]}"
