#!/usr/bin/env bash
# `pip install .` as a user runs it: a fresh virtual environment of Debian's python3 (system site
# packages, for PyTorch), the package built from the source tree offline (--no-build-isolation:
# Debian's setuptools and wheel), then, from another folder, `import ddp_torch` resolves into
# the environment and a 2-rank all_reduce runs on backend "ddp" under ddp-launch.
# usage: pip_install_test.sh <source dir> <ddp-launch> [CMake arguments matching the build's]
# The CMake arguments (CMAKE_ARGS) give the package's build this build's flags, so that ccache
# hands back what the build compiled.
set -euo pipefail
source=$1
launch=$2
export CMAKE_ARGS=${3:-}
python=/usr/bin/python3
work=$(mktemp -d /tmp/ddp-pip-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$python" -c 'import torch.distributed' 2> /dev/null || { echo "no PyTorch for $python"; exit 77; }
"$python" -m venv --system-site-packages "$work/venv"
venv_python=$work/venv/bin/python
echo "== pip install $source"
start=$(date +%s)
"$venv_python" -m pip install --no-build-isolation --no-index --no-cache-dir "$source" > "$work/pip.log" 2>&1 ||
  { tail -60 "$work/pip.log"; exit 1; }
echo "pip install took $(($(date +%s) - start)) s"

echo "== import ddp_torch from elsewhere"
cd "$work"
where=$("$venv_python" -c 'import ddp_torch; print(ddp_torch.__file__)')
echo "ddp_torch from $where"
[[ "$where" == "$work/venv/"* ]] || { echo "ddp_torch was not imported from the virtual environment"; exit 1; }

echo "== all_reduce on 2 ranks under ddp-launch"
cat > "$work/all_reduce.py" <<'PY'
import torch
import torch.distributed as dist

import ddp_torch  # registers backend "ddp"

dist.init_process_group("ddp")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.arange(4, dtype=torch.float32) + rank
dist.all_reduce(t)
expected = torch.arange(4, dtype=torch.float32) * world + sum(range(world))
assert torch.equal(t, expected), (t, expected)
print(f"rank {rank}/{world}: all_reduce {t.tolist()} from {ddp_torch.__name__}")
dist.destroy_process_group()
PY
OMP_NUM_THREADS=1 "$launch" --standalone --nproc-per-node 2 "$venv_python" "$work/all_reduce.py"
