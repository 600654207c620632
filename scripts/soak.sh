#!/usr/bin/env bash
# make soak: scripts/soak.sh BUILD_DIR [ITERATIONS] [SECONDS]   (not in CI)
# 1. One long job: ddp-launch, 4 workers (ddp_fault_worker, tcp backend) running checked
#    all_reduces and DDP engine steps (--ddp 1: four parameters in buckets, averaged gradients
#    checked) for SECONDS; each worker's RSS and open descriptors printed near the start and at
#    the end (they should be flat).
# 2. ITERATIONS short jobs, each with a random fault at a random moment (seeded by SOAK_SEED):
#    none, a worker SIGKILLed, a worker SIGSTOPped, the launcher SIGTERMed or SIGKILLed. After
#    each: the job ended within its bound, no process of the job is left, no /dev/shm segment is
#    left, and a clean job (no fault) exited 0. Exit 1 at the first leak or hang.
set -uo pipefail
build=${1:-build}
iterations=${2:-20}
seconds=${3:-60}
seed=${SOAK_SEED:-$RANDOM}
RANDOM=$seed
cd "$(dirname "$0")/.."
launch="$build/bin/ddp-launch"
worker="$build/tests/ddp_fault_worker"
[ -x "$launch" ] && [ -x "$worker" ] || { echo "soak: build $launch and $worker first"; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export DDP_TIMEOUT_MS=5000

job_pids() { grep -l "DDP_SOAK_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
shm_of() {  # /dev/shm segments created by the workers of DIR (named ddp-tcp-<creator pid>-*)
  for f in "$1"/ready.*; do ls /dev/shm/ddp-tcp-"$(cat "$f")"-* 2>/dev/null; done | wc -l
}
sample() {  # sample LABEL DIR: RSS (kB) and open fds of each worker; fails if one is gone
  local out="" ok=0
  for f in "$2"/ready.*; do
    pid=$(cat "$f"); rank=${f##*.}
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
    [ -n "$rss" ] || ok=1
    out+="soak: $1 rank $rank: rss ${rss:-?} kB, fds $fds"$'\n'
  done
  printf '%s' "$out"
  return $ok
}

# --- 1. the long job
dir="$scratch/long"; mkdir -p "$dir"
echo "soak: long job, 4 workers, ${seconds} s of checked all_reduces and DDP steps (seed $seed)"
DDP_SOAK_JOB=long "$launch" --nproc-per-node 4 --rdzv-id "soak-long-$$" --master-port $((20000 + $$ % 20000)) \
  "$worker" --backend tcp --dir "$dir" --seconds "$seconds" --ddp 1 > "$dir/out" 2> "$dir/err" &
lpid=$!
for _ in $(seq 600); do [ -e "$dir/ready.3" ] && break; sleep 0.1; done
sleep 2; sample "start (+2 s)" "$dir"
# The end figures: the last sample (every 5 s) taken while every worker was still running.
t0=$(date +%s); last=""
while kill -0 $lpid 2>/dev/null; do
  sleep 5
  now=$(sample "end (+$(( $(date +%s) - t0 + 2 )) s)" "$dir") && last=$now
done
printf '%s\n' "$last"
wait $lpid; code=$?
[ $code -eq 0 ] || { echo "soak: the long job exited $code"; tail -20 "$dir/err"; exit 1; }
grep -h "iterations" "$dir/out" | head -1

# --- 2. faults
faults=(none kill-worker stop-worker term-launcher kill-launcher)
for i in $(seq "$iterations"); do
  fault=${faults[$((RANDOM % ${#faults[@]}))]}
  rank=$((RANDOM % 4)); delay_ms=$((RANDOM % 1500))
  dir="$scratch/$i"; mkdir -p "$dir"; tag="soak-$$-$i"
  DDP_SOAK_JOB=$tag "$launch" --nproc-per-node 4 --rdzv-id "$tag" --master-port $((20000 + ($$ + i * 7) % 20000)) \
    "$worker" --backend tcp --dir "$dir" --iters $([ "$fault" = none ] && echo 300 || echo 0) > "$dir/out" 2> "$dir/err" &
  lpid=$!
  for _ in $(seq 600); do [ -e "$dir/ready.3" ] && break; sleep 0.1; done
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  case $fault in
    kill-worker) kill -KILL "$(cat "$dir/ready.$rank")" ;;
    stop-worker) kill -STOP "$(cat "$dir/ready.$rank")" ;;
    term-launcher) kill -TERM $lpid ;;
    kill-launcher) kill -KILL $lpid ;;
  esac
  start=$(date +%s)
  for _ in $(seq 600); do kill -0 $lpid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $lpid 2>/dev/null; then echo "soak: $i $fault: the launcher did not end within 60 s"; kill -KILL $lpid; exit 1; fi
  wait $lpid; code=$?
  for _ in $(seq 100); do [ -z "$(job_pids "$tag")" ] && break; sleep 0.1; done
  left=$(job_pids "$tag")
  echo "soak: $i $fault (rank $rank, +${delay_ms} ms): exit $code after $(( $(date +%s) - start )) s, $(echo $left | wc -w) process(es) left, $(shm_of "$dir") segment(s) left in /dev/shm"
  if [ -n "$left" ]; then echo "soak: LEAK: processes $left"; kill -KILL $left; exit 1; fi
  if [ "$fault" = none ] && [ $code -ne 0 ]; then echo "soak: a job without a fault exited $code"; tail -20 "$dir/err"; exit 1; fi
  if [ "$fault" != none ] && [ $code -eq 0 ]; then echo "soak: a faulted job exited 0"; exit 1; fi
  if [ "$(shm_of "$dir")" -gt 0 ]; then echo "soak: LEAK: /dev/shm segments"; ls -l /dev/shm; exit 1; fi
  rm -rf "$dir"
done
echo "soak: $iterations faulted jobs, no process, segment or hang left (seed $seed)"
