#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and checks that it is the API: exactly the
# headers docs/design.md lists ("## The installed API"), each compiling alone from the prefix,
# and a libddp.so exporting only names those headers declare. Then builds and runs a tiny
# outside program against it twice: with CMake (find_package(ddp) -> ddp::ddp) and pkg-config.
# Where the build has LibTorch, a second program links ddp::torch (find_package(ddp COMPONENTS
# torch)) and trains a few steps on 2 ranks under the installed ddp-launch.
# usage: install_test.sh <build dir> <source dir of this test> [compiler flags of the build]
#        [compiler launcher of the build, its arguments separated by '|']
# The optional parts, as CMake configured them (tests/install/CMakeLists.txt): DDP_INSTALL_MAN,
# DDP_INSTALL_TORCH and DDP_INSTALL_PYTHON, each "built" (then it must be installed and work),
# "off: <why>" (left out of this build on purpose: nothing to test) or "missing" (CMake found
# no prerequisite). A missing part fails the test where the Debian packages that provide it
# are installed (scripts/install-deps.sh installs them all: CMake should have found them);
# elsewhere it is said loudly and the test, once everything else passed, exits 77 (Skipped).
# The work folder is fixed, inside the build tree, so that the compiler launcher (ccache, whose
# base folder is the source tree) finds the consumers' objects again on a later run.
set -euo pipefail
build=$(cd "$1" && pwd)
here=$2
flags_of_build=${3:-}
launcher=${4:-}
launcher=${launcher//|/;}
work=$build/install-test
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

installed() { dpkg-query -W -f='${Status}' "$1" 2> /dev/null | grep -q 'install ok installed'; }
untested=()
# part <name> <state> <packages...>: 0 when the part must be tested; otherwise says why not,
# and fails when the part is missing although every package that provides it is installed.
part() {
  local name=$1 state=$2 absent=()
  shift 2
  case $state in
    built) return 0 ;;
    off:*) echo "== $name: not in this build (${state#off: })"; return 1 ;;
    missing)
      for p in "$@"; do installed "$p" || absent+=("$p"); done
      if [ ${#absent[@]} -eq 0 ]; then
        echo "FAIL: $name: $* installed, yet the build has no $name (re-run cmake and read its 'ddp' lines)"
        exit 1
      fi
      echo "!! $name NOT TESTED: missing ${absent[*]} (scripts/install-deps.sh installs them)"
      untested+=("$name")
      return 1 ;;
    *) echo "FAIL: $name: unknown state '$state' (tests/install/CMakeLists.txt passes built, off: <why> or missing)"; exit 1 ;;
  esac
}

# alone <consumer build> <header...>: each header compiles alone, with the consumer's own compile
# command (its compiler and flags: the installed include dir and, for ddp/torch, LibTorch's;
# nothing of the source tree), two at a time.
alone() {
  local build=$1
  shift
  local cmd
  cmd=$(/usr/bin/python3 -c '
import json, shlex, sys
c = json.load(open(sys.argv[1]))[0]
a = c.get("arguments") or shlex.split(c["command"])
a = a[next(i for i, x in enumerate(a) if not x.endswith(("ccache", "cmake", "-E", "env")) and "=" not in x):]
out, skip = [], False
for x in a:
    if skip: skip = False; continue
    if x in ("-o", "-c"): skip = x == "-o"; continue
    if x == c["file"] or x.endswith(".cc"): continue
    out.append(x)
print(shlex.join(out))' "$build/compile_commands.json")
  printf '%s\n' "$@" | xargs -P 2 -I{} bash -c \
    "echo '#include <{}>' | $cmd -fsyntax-only -x c++ - || { echo '{} does not compile alone'; exit 255; }"
}

cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
# Checked before dirname: dirname "" is ".", so a check on the directory could never fail.
lib=$(find "$prefix" -name 'libddp.so' -print -quit)
[ -n "$lib" ] || { echo "libddp.so was not installed under $prefix"; exit 1; }
libdir=$(dirname "$lib")

echo "== what libddp.so exports"
# The API only: no instantiation of std::, fmt, spdlog or nlohmann templates (a program's own
# copies of those libraries must never bind to ours).
leaked=$(nm -DC --defined-only "$lib" | awk '{$1=""; $2=""; sub(/^ +/, ""); print}' \
  | grep -E '^(std::|fmt::|spdlog::|nlohmann::|gloo::|typeinfo (name )?for std::|vtable for std::)' || true)
if [ -n "$leaked" ]; then echo "libddp.so exports what is not its API:"; echo "$leaked" | head -20; exit 1; fi
# Read whole, then matched: `nm | grep -q` under pipefail fails when grep's early exit kills nm
# with SIGPIPE (a flaky 'not exported').
exports=$(nm -D --defined-only "$lib")
grep -q ' T ddp_init_process_group$' <<< "$exports" || { echo "the C ABI is not exported"; exit 1; }
echo "exports: $(wc -l <<< "$exports") symbols, none of std/fmt/spdlog/nlohmann"

echo "== libddp.so needs no backend's dependency"
if ldd "$lib" | grep -E 'libmpi|libgloo|libnccl|libcudart'; then echo "libddp.so links a backend's dependency"; exit 1; fi

echo "== headers: exactly docs/design.md's list, as <ddp/...>"
inc=$prefix/include
# The list: every ddp/....h in the code block under "## The installed API"; ddp/torch/ only
# where this build has LibTorch.
listed=$(awk '/^## The installed API/ {on = 1} on && /^```/ {n++; next} on && n == 1' "$here/../../docs/design.md" \
  | grep -oE 'ddp/[a-z_/]+\.h' | sort -u)
[ -n "$listed" ] || { echo "no header list under '## The installed API' in docs/design.md"; exit 1; }
[ "${DDP_INSTALL_TORCH:?}" = built ] || listed=$(grep -v '^ddp/torch/' <<< "$listed")
actual=$(cd "$inc" && find . -type f | sed 's|^\./||' | sort)
if [ "$listed" != "$actual" ]; then
  echo "the installed headers are not docs/design.md's list (< listed, > installed):"
  diff <(echo "$listed") <(echo "$actual") || true
  exit 1
fi
echo "installed: $(wc -l <<< "$actual") headers, the list"
if grep -rEn '#include "(common|rendezvous|comm)/' "$inc/ddp"; then echo "an installed header includes outside ddp/"; exit 1; fi
# Every export is declared by an installed header: the first name in it that is not a
# namespace (lower case, before ::) is a class or function one of them declares.
declared=$(cat $(find "$inc" -name '*.h') | sed 's|//.*||' \
  | grep -oE '(class|struct) +[A-Za-z_][A-Za-z0-9_]*|DDP_DECLARE_ERROR\([A-Za-z]+|[A-Za-z_][A-Za-z0-9_]* *\(' | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u)
undeclared=$(nm -DC --defined-only "$lib" | awk '{$1=""; $2=""; sub(/^ +/, ""); print}' \
  | sed -E 's/^(typeinfo name for |typeinfo for |vtable for )//; s/[(<\[].*//; s/^([a-z_]+::)*//; s/::.*//' \
  | sort -u | comm -23 - <(echo "$declared"))
if [ -n "$undeclared" ]; then echo "libddp.so exports names no installed header declares:"; echo "$undeclared" | head -20; exit 1; fi
[ -f "$prefix/share/ddp/ddp-launch.schema.json" ] || { echo "the config schema was not installed"; exit 1; }

echo "== bash completion"
[ -f "$prefix/share/bash-completion/completions/ddp-launch" ] || { echo "no bash completion installed"; exit 1; }
if part "man page" "${DDP_INSTALL_MAN:?}" help2man; then
  echo "== man page"
  man=$prefix/share/man/man1/ddp-launch.1
  [ -f "$man" ] || { echo "no man page installed"; exit 1; }
  grep -q '^\.TH DDP-LAUNCH "1"' "$man" && grep -q 'nproc\\-per\\-node' "$man" || { echo "the man page is not ddp-launch --help"; head "$man"; exit 1; }
fi
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== find_package(ddp)"
cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$flags_of_build" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
echo "-- each header alone"
alone "$work/cmake-build" $(grep -v '^ddp/torch/' <<< "$actual")
cmake --build "$work/cmake-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/cmake-build/consumer"

echo "== backends as plugins"
for plugin in "$libdir"/libddp_backend_*.so; do
  [ -e "$plugin" ] || continue
  backend=$(basename "$plugin" .so); backend=${backend#libddp_backend_}
  [ "$backend" = nccl ] && continue  # needs a GPU: the gpu-labelled tests cover nccl
  echo "-- $backend"
  "$work/cmake-build/consumer" "$backend"
  # Without its plugin, the backend is an error naming the file, not a crash.
  mv "$plugin" "$plugin.away"
  if "$work/cmake-build/consumer" "$backend" > "$work/missing.log" 2>&1; then echo "$backend ran without its plugin"; exit 1; fi
  grep -q "libddp_backend_$backend.so" "$work/missing.log" || { cat "$work/missing.log"; echo "the error does not name the plugin"; exit 1; }
  mv "$plugin.away" "$plugin"
done

echo "== pkg-config --cflags --libs ddp"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ddp)
echo "flags: $flags"
# -I<prefix>/include only (from the .pc): <ddp/...> must be all a program needs.
${CXX:-c++} -std=c++20 $flags_of_build "$here/consumer/main.cc" -o "$work/pc-consumer" $flags
"$work/pc-consumer"

# ddp::torch, when this build has LibTorch: an outside LibTorch program trains on 2 ranks.
if part "LibTorch consumer" "${DDP_INSTALL_TORCH:?}" libtorch-dev; then
  echo "== find_package(ddp COMPONENTS torch)"
  cmake -S "$here/torch_consumer" -B "$work/torch-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$flags_of_build" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
    > "$work/torch-configure.log" 2>&1 || { cat "$work/torch-configure.log"; exit 1; }
  echo "-- each ddp/torch header alone"
  alone "$work/torch-build" $(grep '^ddp/torch/' <<< "$actual")
  cmake --build "$work/torch-build" > "$work/torch-build.log" 2>&1 || { cat "$work/torch-build.log"; exit 1; }
  OMP_NUM_THREADS=1 "$prefix/bin/ddp-launch" --standalone --nproc-per-node 2 "$work/torch-build/torch_consumer"
  # Without LibTorch the component is not found, and a project that requires it is told why.
  cmake -S "$here/torch_consumer" -B "$work/torch-missing" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON > "$work/torch-missing.log" 2>&1 && { echo "configured without LibTorch"; exit 1; }
  grep -q "needs LibTorch" "$work/torch-missing.log" || { cat "$work/torch-missing.log"; echo "no reason given"; exit 1; }
fi

# The torch.distributed plugin, when this build has it: installed, and importable from there.
if part "Python module" "${DDP_INSTALL_PYTHON:?}" libtorch-dev python3-torch pybind11-dev python3-dev; then
  echo "== python module ddp_torch"
  module=$(find "$prefix" -name 'ddp_torch*.so' -print -quit)
  [ -n "$module" ] || { echo "ddp_torch was not installed under $prefix"; exit 1; }
  (cd "$work" && PYTHONPATH=$(dirname "$module") /usr/bin/python3 -c \
    'import ddp_torch, torch.distributed as d; assert "DDP" in d.Backend._plugins; print("ddp_torch from", ddp_torch.__file__)')
fi

if [ ${#untested[@]} -gt 0 ]; then
  echo "!! everything else passed; NOT TESTED: ${untested[*]} (exit 77: Skipped)"
  exit 77
fi
