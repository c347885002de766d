#!/usr/bin/env bash
# install-deps.sh - installs everything weft's build, tests and benchmarks need on a fresh
# Debian 12 (bookworm): compilers, CMake + Ninja, GoogleTest, Google Benchmark, Boost.Fiber
# and Boost.Context, oneTBB (baselines), valgrind (instruction counts, and the test command's
# instruction-count gate: callgrind and its valgrind/callgrind.h), matplotlib (figures), and the
# aarch64 cross toolchain + qemu-user (the arm64 context switch), and pkgconf (the install
# check builds clients through pkg-config), gdb (the gdb extension's test), liburing (the
# io_uring engine), MPICH (libweft_mpi and its tests) and wrk (the I2 HTTP load). Run as root
# (or with sudo available). Idempotent and quiet: installs only what is missing.
set -euo pipefail

pkgs=(build-essential cmake ninja-build clang libclang-rt-14-dev libgtest-dev liburing-dev libbenchmark-dev
      libboost-fiber-dev libboost-context-dev libtbb-dev valgrind python3 python3-matplotlib
      gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user googletest pkgconf gdb
      mpich libmpich-dev wrk)
pkgs+=(libunwind-dev)  # weft_dump's backtraces (optional: found by CMake)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (missing: ${missing[*]})" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
