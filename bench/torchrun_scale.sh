#!/usr/bin/env bash
# torchrun 1.13 (through bench/torchrun_shim.py, which makes it start on Python 3.11) behind
# bench/scale.sh's ddp-launch command line, for side-by-side rows: the flags' torchrun spellings
# (underscores) and --no_python (the worker is a shell). torchrun's static job waits for a lost
# node to come back rather than ending, so run it with KILL=0:
#   KILL=0 LABEL="torchrun 1.13" bench/scale.sh bench/torchrun_scale.sh
set -euo pipefail
if [ "${1:-}" = --version ]; then
  exec /usr/bin/python3 -c 'import torch; print("torchrun (torch " + torch.__version__ + ")")'
fi
args=()
for a in "$@"; do
  case "$a" in
    --nproc-per-node) a=--nproc_per_node ;;
    --rdzv-backend) a=--rdzv_backend ;;
    --rdzv-endpoint) a=--rdzv_endpoint ;;
    --rdzv-id) a=--rdzv_id ;;
    --rdzv-conf) a=--rdzv_conf ;;
  esac
  args+=("$a")
done
exec /usr/bin/python3 "$(dirname "$0")/torchrun_shim.py" --no_python "${args[@]}"
