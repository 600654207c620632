#!/usr/bin/env bash
# Installs the Debian 12 packages ddp-launch builds with. Idempotent and quiet: does nothing
# when everything is present. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  mold  # the linker (CMakeLists.txt: DDP_LINKER)
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev doctest-dev libssl-dev
  libgloo-dev libopenmpi-dev openmpi-bin
  iproute2 procps python3
  help2man  # ddp-launch.1, generated from --help
  etcd-server etcd-client libcurl4-openssl-dev  # EtcdStore (libcurl: etcd's v3 JSON gateway) and its tests
  # A real Slurm cluster and munge on emulated hosts for tests/cluster (about 13 MiB).
  slurm-wlm munge
  # LibTorch and PyTorch for ddp/torch and its comparisons; the demo's data set.
  libtorch-dev python3-torch zlib1g-dev dataset-fashion-mnist
  # pybind11 and Python headers for the torch.distributed plugin (ddp/torch/python).
  pybind11-dev python3-dev
  # `pip install .` (pyproject.toml: the plugin as a Python package) and its test's venv.
  python3-pip python3-setuptools python3-wheel python3-build python3-venv
  # `make benchmarks` (bench/report.py): the plots of docs/benchmarks.md; scripts/timeline_png.py.
  python3-matplotlib
)
# `make format` / `format-check` / `lint` (DDP_LINT_DEPS=1): clang-format and clang-tidy 14.
if [ "${DDP_LINT_DEPS:-0}" = 1 ]; then
  packages+=(clang-format-14 clang-tidy-14)
fi
# `make fuzz` (DDP_FUZZ_DEPS=1): clang 14 and libFuzzer.
if [ "${DDP_FUZZ_DEPS:-0}" = 1 ]; then
  packages+=(clang libfuzzer-14-dev libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" > /tmp/ddp-install-deps.log 2>&1 ||
  { cat /tmp/ddp-install-deps.log; exit 1; }
