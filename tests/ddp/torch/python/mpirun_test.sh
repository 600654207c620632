#!/usr/bin/env bash
# collectives_test.py with the mpi backend under the plugin, started by Open MPI's mpirun (the
# mpi backend rendezvouses through MPI_COMM_WORLD; PyTorch's env:// still needs a master, so a
# free local port is picked here).
# Usage: mpirun_test.sh MPIRUN NP PYTHON SCRIPT
set -euo pipefail
mpirun=$1 np=$2 python=$3 script=$4
port=$("$python" "$(dirname "$0")/ports.py")
exec "$mpirun" -np "$np" --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
  -x PYTHONPATH -x OMP_NUM_THREADS -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x DDP_TORCH_TEST_BACKEND=mpi \
  "$python" "$script"
