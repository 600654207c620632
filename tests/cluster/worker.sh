#!/bin/bash
# One rank of the cluster tests, started by ddp-launch: prints what it was told, then
#   ok    meets the others in the launcher's store (PROBE: ddp_store_probe, through DDP_STORE)
#   fail  rank 3 exits 3 once every other rank waits; the others wait for SIGTERM
#   wait  every rank waits for SIGTERM
# A waiting rank writes OUT/pid.RANK; on SIGTERM it writes OUT/term.RANK and exits 143.
# usage: worker.sh ok|fail|wait OUT PROBE
mode=$1 out=$2 probe=$3
echo "worker rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE local_world=$LOCAL_WORLD_SIZE" \
  "node=$GROUP_RANK nodes=$GROUP_WORLD_SIZE master=$MASTER_ADDR host=$(hostname)" \
  "master_ip=$(getent hosts "$MASTER_ADDR" | awk '{ print $1; exit }')" \
  "slurm_procid=${SLURM_PROCID:-} ompi_rank=${OMPI_COMM_WORLD_RANK:-}"
# Blocks in `read` on a FIFO nobody writes: no child process that a signal could end first.
wait_term() {
  trap 'echo "$(hostname)" > "$out/term.$RANK"; exit 143' TERM
  mkfifo "$out/fifo.$RANK"
  exec 3<> "$out/fifo.$RANK"
  echo $$ > "$out/pid.$RANK"
  read -r -u 3
  echo "worker rank=$RANK: its FIFO was written to" >&2
  exit 1
}
case "$mode" in
  ok) exec "$probe" ;;
  wait) wait_term ;;
  fail)
    [ "$RANK" = 3 ] || wait_term
    for _ in $(seq 300); do
      [ "$(ls "$out"/pid.* 2> /dev/null | wc -l)" -ge $((WORLD_SIZE - 1)) ] && exit 3
      sleep 0.1
    done
    echo "worker rank=$RANK: the other ranks never waited" >&2
    exit 1
    ;;
esac
