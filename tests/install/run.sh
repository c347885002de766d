#!/usr/bin/env bash
# tests/install/run.sh BUILD_DIR - the install check: installs the libraries built in
# BUILD_DIR to a temporary prefix, then builds a C client, a C++ client (weft/weft.hpp)
# and a C-Threads client against that prefix alone, through find_package(weft) and
# through pkg-config, shared and static, runs each and checks what it prints. It also
# checks what a program from a non-system prefix relies on: versioned SONAMEs, and
# libweft_cthreads.so finding libweft.so.0 next to itself ($ORIGIN); and, after moving
# the install elsewhere, that pkg-config still finds it; that the gdb extension is
# installed where gdb auto-loads it for libweft.so and that gdb loads it from there
# (skipped without gdb or ptrace). Exits non-zero if any check fails. Where
# libweft_mpi was built, an MPI client (one process) too.
# scripts/test.sh runs it on the release configuration's build.
#
# Environment: CC, CXX (default cc, c++) for the pkg-config builds and the client project.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
cc=${CC:-cc}
cxx=${CXX:-c++}
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

failures=0
ok() { echo "  ok    $*"; }
fail() { echo "  FAIL  $*"; failures=$((failures + 1)); }

# readelf -d FILE, one dynamic tag's values (NEEDED, SONAME, RUNPATH) one per line
dyn() { readelf -d "$2" | sed -n "s/.*($1).*\[\(.*\)\]/\1/p"; }

echo "install check: $build -> temporary prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; echo "install check: cmake --install failed"; exit 1; }
pc=$(find "$prefix" -name weft.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || { echo "install check: no weft.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")

# ---- the installed shared libraries ----
for lib in weft weft_cthreads; do
  so=$libdir/lib$lib.so
  if [ ! -e "$so" ]; then fail "lib$lib.so installed"; continue; fi
  soname=$(dyn SONAME "$so")
  if [[ $soname =~ ^lib$lib\.so\.[0-9]+$ ]] && [ -e "$libdir/$soname" ]; then
    ok "lib$lib.so has the versioned SONAME $soname, installed"
  else
    fail "lib$lib.so: SONAME '$soname' (want lib$lib.so.MAJOR, installed beside it)"
  fi
done
if dyn RUNPATH "$libdir/libweft_cthreads.so" | tr ':' '\n' | grep -qx '\$ORIGIN'; then
  ok "libweft_cthreads.so finds libweft.so.0 beside itself (RUNPATH \$ORIGIN)"
else
  fail "libweft_cthreads.so: RUNPATH '$(dyn RUNPATH "$libdir/libweft_cthreads.so")' (want \$ORIGIN)"
fi

# check_run NAME EXE EXPECTED_LINE LINKAGE: runs EXE with no library path from the
# environment and checks its output; LINKAGE says which weft libraries it must (not) need:
#   static        no libweft* at all
#   shared        libweft.so.0
#   cthreads      libweft_cthreads.so.0
#   cthreads-only libweft_cthreads.so.0 and not libweft.so.0 (which then comes through
#                 libweft_cthreads.so's own RUNPATH)
check_run() {
  local name=$1 exe=$2 want=$3 linkage=$4 needed out rc=0
  needed=$(dyn NEEDED "$exe" | tr '\n' ' ')
  case $linkage in
    static) [[ " $needed" != *" libweft"* ]] ||
      { fail "$name: a static build needs [$needed]"; return; } ;;
    shared) [[ " $needed" == *" libweft.so."[0-9]* ]] ||
      { fail "$name: needs [$needed], not libweft.so.MAJOR"; return; } ;;
    cthreads) [[ " $needed" == *" libweft_cthreads.so."[0-9]* ]] ||
      { fail "$name: needs [$needed], not libweft_cthreads.so.MAJOR"; return; } ;;
    cthreads-only)
      [[ " $needed" == *" libweft_cthreads.so."[0-9]* && " $needed" != *" libweft.so"* ]] ||
      { fail "$name: needs [$needed], want libweft_cthreads.so.MAJOR alone"; return; } ;;
  esac
  out=$(env -u LD_LIBRARY_PATH timeout 60 "$exe" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$name: exit status $rc: $out"
  elif [ "$out" != "$want" ]; then
    fail "$name: printed '$out', want '$want'"
  else
    ok "$name"
  fi
}
want_c="weft C client: 8000"
want_cpp="weft C++ client: 8000"
want_ct="weft C-Threads client: 8000"
want_mpi="weft MPI client: 28000"

# ---- find_package(weft) ----
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if CC=$cc CXX=$cxx cmake -S "$here" -B "$work/cmake" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
     -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake" -j 2 >>"$work/cmake.log" 2>&1; then
  found=$(sed -n 's/^weft_DIR:PATH=//p' "$work/cmake/CMakeCache.txt")
  if [[ $found == "$prefix"/* ]]; then
    ok "find_package(weft) found the temporary prefix; every target built"
    b=$work/cmake
    check_run "find_package C, weft::weft" "$b/c_shared" "$want_c" shared
    check_run "find_package C, weft::weft_shared" "$b/c_shared_named" "$want_c" shared
    check_run "find_package C, weft::weft_static" "$b/c_static" "$want_c" static
    check_run "find_package C++, weft::weft" "$b/cpp_shared" "$want_cpp" shared
    check_run "find_package C++, weft::weft_static" "$b/cpp_static" "$want_cpp" static
    check_run "find_package C-Threads, weft::cthreads" "$b/cthreads_shared" "$want_ct" cthreads
    check_run "find_package C-Threads, weft::cthreads_shared" "$b/cthreads_shared_named" "$want_ct" cthreads
    check_run "find_package C-Threads, weft::cthreads_static" "$b/cthreads_static" "$want_ct" static
    if [ -e "$libdir/libweft_mpi.so" ]; then
      if [ -x "$b/mpi_shared" ]; then
        check_run "find_package MPI, weft::mpi" "$b/mpi_shared" "$want_mpi" shared
      else
        fail "find_package: libweft_mpi is installed but weft::mpi was not found"
      fi
    fi
  else
    fail "find_package(weft) found '$found', not the temporary prefix"
  fi
else
  tail -n 30 "$work/cmake.log"
  fail "find_package client project: configure or build failed (log above)"
fi

# ---- pkg-config: the temporary prefix's modules, and the system's (weft.pc may
# require liburing, the io_uring engine's library) after them ----
sys_pc=$(env -u PKG_CONFIG_LIBDIR -u PKG_CONFIG_PATH pkg-config --variable=pc_path pkg-config 2>/dev/null || true)
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig${sys_pc:+:$sys_pc}
unset PKG_CONFIG_PATH
for m in weft weft-cthreads; do
  if pkg-config --validate "$m" >"$work/pc.log" 2>&1 && pkg-config --exists "$m"; then
    ok "pkg-config module $m is valid"
  else
    fail "pkg-config module $m: $(cat "$work/pc.log")"
  fi
done
if pkg-config --static --libs weft | tr ' ' '\n' | grep -qx -- '-pthread'; then
  ok "pkg-config --static --libs weft has -pthread"
else
  fail "pkg-config --static --libs weft: '$(pkg-config --static --libs weft)' has no -pthread"
fi

# pc_build NAME COMPILER SOURCE MODULE MODE(shared|static) -> $work/pc/NAME
# Shared builds link with --as-needed (the default of several distributions) and an
# rpath to the prefix only; static builds link with -static.
pc_build() {
  local name=$1 compiler=$2 src=$3 module=$4 mode=$5 flags=() pcflags exe=$work/pc/$1
  mkdir -p "$work/pc"
  [ "$compiler" = "$cxx" ] && flags+=(-std=c++17)
  local pcargs=(--cflags --libs "$module")
  [ "$mode" = static ] && pcargs=(--static "${pcargs[@]}")
  pcflags=$(pkg-config "${pcargs[@]}" 2>&1) ||
    { fail "pkg-config $name: pkg-config ${pcargs[*]}: $pcflags"; return 1; }
  if [ "$mode" = static ]; then
    # shellcheck disable=SC2086  # pkg-config prints separate words
    "$compiler" "${flags[@]}" -static -o "$exe" "$here/$src" $pcflags >"$work/pc.log" 2>&1
  else
    # shellcheck disable=SC2086
    "$compiler" "${flags[@]}" -Wl,--as-needed -o "$exe" "$here/$src" $pcflags \
      -Wl,-rpath,"$libdir" >"$work/pc.log" 2>&1
  fi || { tail -n 30 "$work/pc.log"; fail "pkg-config $name: build failed (log above)"; return 1; }
}
# Each installed header compiles on its own, as C11 and as C++17, under the warnings a
# strict user builds with (-Werror): a header must not break a -Wshadow build (a
# function named like its struct tag warned in C++). weft/mpi.h needs MPI's header.
hdr_fail=0
for h in "$prefix"/include/weft/*.h "$prefix"/include/weft/*.hpp; do
  [ -e "$h" ] || continue
  rel=${h#"$prefix"/include/}
  [ "$rel" = weft/mpi.h ] && continue
  printf '#include <%s>\nint weft_header_check_unused;\n' "$rel" >"$work/hdr.src"
  langs=(c++)
  [ "${rel%.h}" != "$rel" ] && langs=(c c++)
  for lang in "${langs[@]}"; do
    if [ "$lang" = c ]; then
      "$cc" -std=c11 -x c -fsyntax-only -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror \
        -I"$prefix/include" "$work/hdr.src" >"$work/hdr.log" 2>&1
    else
      "$cxx" -std=c++17 -x c++ -fsyntax-only -Wall -Wextra -Wshadow -Werror \
        -I"$prefix/include" "$work/hdr.src" >"$work/hdr.log" 2>&1
    fi || { hdr_fail=1; fail "header $rel as $lang: $(head -n 3 "$work/hdr.log")"; }
  done
done
[ "$hdr_fail" = 0 ] && ok "every installed header compiles alone as C11 and C++17 with -Wall -Wextra -Wshadow -Werror"

pc_build c_shared "$cc" client.c weft shared &&
  check_run "pkg-config C, weft, shared" "$work/pc/c_shared" "$want_c" shared
pc_build c_static "$cc" client.c weft static &&
  check_run "pkg-config C, weft, static" "$work/pc/c_static" "$want_c" static
pc_build cpp_shared "$cxx" client.cc weft shared &&
  check_run "pkg-config C++, weft, shared" "$work/pc/cpp_shared" "$want_cpp" shared
pc_build cpp_static "$cxx" client.cc weft static &&
  check_run "pkg-config C++, weft, static" "$work/pc/cpp_static" "$want_cpp" static
pc_build ct_shared "$cc" client_cthreads.c weft-cthreads shared &&
  check_run "pkg-config C-Threads, weft-cthreads, shared" "$work/pc/ct_shared" "$want_ct" cthreads-only
pc_build ct_static "$cc" client_cthreads.c weft-cthreads static &&
  check_run "pkg-config C-Threads, weft-cthreads, static" "$work/pc/ct_static" "$want_ct" static

# weft-mpi: where libweft_mpi was built (an MPI was found); one process, no mpiexec
if [ -e "$libdir/libweft_mpi.so" ]; then
  if pkg-config --validate weft-mpi >"$work/pc.log" 2>&1 && pkg-config --exists weft-mpi; then
    ok "pkg-config module weft-mpi is valid"
    # its prefix is the install's (it once resolved to .../lib/pkgconfig itself, and its
    # -I and -L named directories that do not exist; the link worked only through weft)
    mpi_prefix=$(pkg-config --variable=prefix weft-mpi)
    if [ "$(realpath -m "$mpi_prefix")" = "$(realpath -m "$prefix")" ]; then
      ok "pkg-config module weft-mpi names the install prefix"
    else
      fail "pkg-config module weft-mpi: prefix $mpi_prefix, not $prefix"
    fi
    pc_build mpi_shared "$cc" client_mpi.c weft-mpi shared &&
      check_run "pkg-config MPI, weft-mpi, shared" "$work/pc/mpi_shared" "$want_mpi" shared
  else
    fail "pkg-config module weft-mpi: $(cat "$work/pc.log")"
  fi
fi

# ---- the gdb extension: installed where gdb auto-loads it for libweft.so
# (<prefix>/share/gdb/auto-load/<real libdir>/<real library name>-gdb.py), and loaded
# from there by a gdb told about the prefix's auto-load directory ----
autoload=$prefix/share/gdb/auto-load
real_so=$(realpath "$libdir/libweft.so")
gdbpy=$autoload$(dirname "$real_so")/$(basename "$real_so")-gdb.py
if [ -f "$gdbpy" ]; then
  ok "gdb extension installed as ${gdbpy#"$prefix"/}"
else
  fail "gdb extension: no $gdbpy (installed: $(find "$prefix" -name '*-gdb.py' | tr '\n' ' '))"
fi
if ! command -v gdb >/dev/null 2>&1; then
  echo "  skip  gdb auto-load: no gdb"
elif [ ! -x "$work/pc/c_shared" ]; then
  fail "gdb auto-load: no shared client to debug"
else
  gout=$(env -u LD_LIBRARY_PATH timeout 120 gdb -batch -nx -iex "set debuginfod enabled off" \
    -iex "add-auto-load-safe-path $autoload" -iex "add-auto-load-scripts-directory $autoload" \
    -ex "break main" -ex run -ex "info auto-load python-scripts" -ex "help info weft-threads" \
    -ex "help weft-thread" -ex kill "$work/pc/c_shared" 2>&1) || true
  case $gout in
    *"ptrace: Operation not permitted"*|*"Could not trace the inferior"*|*"not allowed"*)
      echo "  skip  gdb auto-load: ptrace not permitted" ;;
    *)
      if printf '%s\n' "$gout" | awk -v p="$gdbpy" '$1 == "Yes" && $2 == p { f = 1 } END { exit !f }' &&
         printf '%s\n' "$gout" | grep -q "^List weft's user-level threads" &&
         printf '%s\n' "$gout" | grep -q "^weft-thread ID|NAME"; then
        ok "gdb auto-loads the extension with libweft.so from the prefix; its commands are there"
      else
        printf '%s\n' "$gout" | tail -n 20
        fail "gdb auto-load: the extension was not loaded from $autoload (output above)"
      fi ;;
  esac
fi

# ---- a moved install: weft.pc finds its prefix from where it lies, and libweft_cthreads.so
# its libweft.so.0 ----
moved=$work/moved
mv "$prefix" "$moved"
libdir=$moved${libdir#"$prefix"}
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig${sys_pc:+:$sys_pc}
if [[ $(pkg-config --variable=libdir weft) -ef $libdir ]]; then
  ok "moved install: pkg-config weft finds the new prefix"
else
  fail "moved install: pkg-config weft's libdir is '$(pkg-config --variable=libdir weft)', not $libdir"
fi
pc_build ct_moved "$cc" client_cthreads.c weft-cthreads shared &&
  check_run "moved install: pkg-config C-Threads, weft-cthreads, shared" "$work/pc/ct_moved" "$want_ct" cthreads-only

if [ "$failures" -ne 0 ]; then
  echo "install check: $failures check(s) FAILED"
  exit 1
fi
echo "install check: passed"
