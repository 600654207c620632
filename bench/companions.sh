#!/usr/bin/env bash
# DDP's companions across 2 emulated hosts (tests/netns/hosts.sh), one rank on each, every host's
# link shaped to RATE (default 1gbit), each host on CPUs of its own (half of those this script may
# use; all of them when fewer than 2). One run measures:
#   - ddp-bench hooks: the 6 x Linear(2048) MLP's step time and bytes per step with no collective
#     (compute only), plain, fp16 and PowerSGD rank 1, 2 and 4 gradients, and ZeRO's optimizer
#     state per rank (hooks.jsonl), the load average before and after (load.txt);
#   - the demo (ddp-train-fashion-mnist, 1 epoch on a slice: 6,400 training images) with the same
#     hooks (PowerSGD from step 20): its epoch line, samples/s over both ranks (demo.txt).
#
#   sudo bench/companions.sh OUT_DIR      (BIN: default build/bin; RATE: e.g. 1gbit, 10gbit;
#                                          DEMO=0: the hooks only; HOOKS, STEPS: ddp-bench hooks' --hooks, --steps)
# Exit: 0; 77 not root; else the failed run's status, with its stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$here/build/bin}
rate=${RATE:-1gbit}
out=${1:?usage: companions.sh OUT_DIR}
hosts="sh $here/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "companions.sh: needs root (network namespaces)" >&2; exit 77; }
mkdir -p "$out"
p=ddpM$$x7
mapfile -t cpus < <(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ if (NF == 2) for (c = $1; c <= $2; c++) print c; else print $1 }')
pin=() # pin[K]: host K's CPUs for taskset ("" when the hosts share them)
if [ ${#cpus[@]} -ge 2 ]; then
  half=$((${#cpus[@]} / 2))
  pin[1]=$(IFS=,; echo "${cpus[*]:0:half}")
  pin[2]=$(IFS=,; echo "${cpus[*]:half:half}")
fi
$hosts sweep
$hosts up "$p" 2 "$rate"
tmp=$(mktemp -d)
trap '$hosts down "$p" 2; rm -rf "$tmp"' EXIT

# launch NAME CMD...: CMD as one rank on each host under ddp-launch; rank 0's stdout to $tmp/NAME.
port=29500
launch() {
  local name=$1 h status=0 pids=()
  shift
  port=$((port + 2))  # the store takes master_port + 1
  for h in 1 2; do
    local cmd=(env DDP_SOCKET_IFNAME=veth0 "$bin/ddp-launch" --nnodes 2 --node-rank $((h - 1))
      --nproc-per-node 1 --master-addr 10.78.0.1 --master-port "$port" --local-addr "10.78.0.$h" "$@")
    [ -n "${pin[h]:-}" ] && cmd=(taskset -c "${pin[h]}" "${cmd[@]}")
    $hosts run "$p" $h "${cmd[@]}" > "$tmp/$name.$h.out" 2> "$tmp/$name.$h.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  if [ $status != 0 ]; then cat "$tmp/$name".*.err >&2; exit $status; fi
  sed 's/^\[[a-z]*0\]://; s/^\[0\]://' "$tmp/$name.1.out" > "$tmp/$name"
}

uptime > "$out/load.txt" # others' work on the machine: compare the hooks within one run
launch hooks "$bin/ddp-bench" hooks ${HOOKS:+--hooks "$HOOKS"} ${STEPS:+--steps "$STEPS"}
uptime >> "$out/load.txt"
grep '^{' "$tmp/hooks" > "$out/hooks.jsonl"
cat "$out/hooks.jsonl" "$out/load.txt"
[ "${DEMO:-1}" = 0 ] && exit 0
: > "$out/demo.txt"
slice=(--train-limit 6400 --test-limit 2000 --epochs 1 --threads 1)
for flags in "" "--fp16" "--powersgd 1 --powersgd-start 20" "--powersgd 2 --powersgd-start 20" \
  "--powersgd 4 --powersgd-start 20"; do
  # shellcheck disable=SC2086 # the flags split on purpose
  launch demo "$bin/ddp-train-fashion-mnist" "${slice[@]}" $flags
  echo "${flags:-plain}: $(grep '^epoch' "$tmp/demo")" | tee -a "$out/demo.txt"
done
echo "# $(lscpu | sed -n 's/^Model name: *//p'), links $rate" | tee -a "$out/demo.txt"
