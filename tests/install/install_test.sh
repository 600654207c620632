#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a tiny outside program
# against it twice: with CMake (find_package(ddp) -> ddp::ddp) and with pkg-config.
# usage: install_test.sh <build dir> <source dir of this test> [compiler flags of the build]
set -euo pipefail
build=$1
here=$2
flags_of_build=${3:-}
work=$(mktemp -d /tmp/ddp-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
# Checked before dirname: dirname "" is ".", so a check on the directory could never fail.
lib=$(find "$prefix" -name 'libddp.so' -print -quit)
[ -n "$lib" ] || { echo "libddp.so was not installed under $prefix"; exit 1; }
libdir=$(dirname "$lib")
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== find_package(ddp)"
cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$flags_of_build" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/cmake-build/consumer"

echo "== pkg-config --cflags --libs ddp"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ddp)
echo "flags: $flags"
${CXX:-c++} -std=c++20 $flags_of_build "$here/consumer/main.cc" -o "$work/pc-consumer" $flags
"$work/pc-consumer"

# The torch.distributed plugin, when this build has it: installed, and importable from there.
if compgen -G "$build/python/ddp_torch*.so" > /dev/null; then
  echo "== python module ddp_torch"
  module=$(find "$prefix" -name 'ddp_torch*.so' -print -quit)
  [ -n "$module" ] || { echo "ddp_torch was not installed under $prefix"; exit 1; }
  (cd "$work" && PYTHONPATH=$(dirname "$module") /usr/bin/python3 -c \
    'import ddp_torch, torch.distributed as d; assert "DDP" in d.Backend._plugins; print("ddp_torch from", ddp_torch.__file__)')
fi
