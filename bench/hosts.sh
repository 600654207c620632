#!/usr/bin/env bash
# ddp-bench collective across N emulated hosts (tests/netns/hosts.sh: each host its own network,
# IPC and mount namespace and /dev/shm, on one bridge), RANKS_PER_HOST ranks on each under
# ddp-launch. One run measures, on the same hosts:
#   - the link floor: one TCP connection host 1 -> host 2 (ddp-bench link, 1 s), then every
#     host sending to the next at once (a ring: each link loaded both ways, as in an all_reduce),
#     and from their mean rate the floor of each all_reduce size given (--sizes);
#   - the adds an all_reduce makes on each host, from 1 MiB: (W - 1) / N passes of a += b over
#     the buffer, timed on host 1's CPUs (what a host's CPUs add to the floor where they also
#     carry its streams' copies, as on unshaped emulated links);
#   - ours with the transport chosen automatically (hierarchical when RANKS_PER_HOST > 1: shared
#     memory within hosts, sockets between), beside Gloo's own algorithms (COMPARE) in the same
#     processes, interleaved repeat by repeat;
#   - ours flat (DDP_TCP_TRANSPORT=socket), beside the same peers again;
#   - Open MPI (mpirun started across the hosts, ddp-bench --backend mpi-direct), where it runs.
#
#   sudo bench/hosts.sh [ddp-bench args...]      e.g. --op all_reduce --sizes 4,64K,1M,16M,64M,256M
#
# HOSTS (default 2), RANKS_PER_HOST (default 2), COMPARE (default gloo; none: ours alone, as
# peers' ops between ours disturb ours where many ranks share few cores), MODES (default
# "auto flat mpi"; mpi: Open MPI's MPI_Allreduce under mpirun across the same hosts, its own run),
# LOGS (a folder: every rank's stdout and stderr are copied there, e.g. with DDP_LOG_LEVEL=debug),
# RATE / DELAY (tc netem on every host's link, e.g. RATE=10gbit DELAY=50us; where netem is
# unavailable, RATE alone through tc tbf, and hosts.sh says so), BIN (default build/bin). Any other
# DDP_* variable passes through to the ranks (e.g. DDP_TCP_SOCKET_ALGO=ring). HOST_CPUS gives
# each host CPUs of its own, as real hosts have: auto (the default) splits the CPUs this script
# may run on evenly among the hosts (host 1 the first share, and so on) where each gets at least
# one; N gives each host N (HOSTS x N must fit); none lets every host use every CPU. Every process
# of host K (ddp-launch and its ranks, the link floors' streams, Open MPI's daemons and ranks) is
# started on its share (taskset), and ddp-launch tells its ranks how many CPUs they share
# (DDP_LOCAL_CPUS), so they size their threads and waits for their host, as on a real one, and
# Gloo's and Open MPI's ranks get the same CPUs as ours. With none, hosts share the cores: when the
# ranks of all hosts outnumber them, shared memory does not spin (see below).
# Prints rank 0's rows per mode (format table unless given). Exit: 0; 77 not root; else the
# failed run's status, with its stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$here/build/bin}
n=${HOSTS:-2}
per=${RANKS_PER_HOST:-2}
compare=${COMPARE:-gloo}
modes=${MODES:-auto flat mpi}
hosts="sh $here/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "hosts.sh: needs root (network namespaces)" >&2; exit 77; }
p=ddpM$$x9
# Each host's CPUs (HOST_CPUS): cpus[K] is host K's list for taskset, empty when hosts share all.
allowed=()
for part in $(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status | tr ',' ' '); do
  if [ "${part#*-}" != "$part" ]; then
    for c in $(seq "${part%-*}" "${part#*-}"); do allowed+=("$c"); done
  else
    allowed+=("$part")
  fi
done
share=${HOST_CPUS:-auto}
[ "$share" = auto ] && share=$((${#allowed[@]} / n))
[ "$share" = none ] && share=0
case "$share" in
  '' | *[!0-9]*) echo "hosts.sh: HOST_CPUS='${HOST_CPUS:-}': auto, none or a count" >&2; exit 2 ;;
esac
if [ $((share * n)) -gt ${#allowed[@]} ]; then
  echo "hosts.sh: HOST_CPUS=$share for $n hosts needs $((share * n)) CPUs; this script may use ${#allowed[@]}" >&2
  exit 2
fi
cpus=()
for h in $(seq 1 "$n"); do
  list=""
  for i in $(seq $(((h - 1) * share)) $((h * share - 1))); do list="$list${list:+,}${allowed[$i]}"; done
  cpus[h]=$list
done
on() { # on HOST CMD...: CMD on that host's CPUs
  local h=$1
  shift
  if [ -n "${cpus[h]}" ]; then $hosts run "$p" "$h" taskset -c "${cpus[h]}" "$@"; else $hosts run "$p" "$h" "$@"; fi
}
$hosts sweep
$hosts up "$p" "$n" "${RATE:--}" "${DELAY:--}"
out=$(mktemp -d)
trap '$hosts down "$p" "$n"; [ -z "${LOGS:-}" ] || cp -r "$out/." "$LOGS"; rm -rf "$out"' EXIT

# What one TCP connection carries (ddp-bench link: 1 s, the best of several bytes-per-call sizes,
# from one thread polling both directions, as a rank's progress does).
link() {
  local h=$1
  shift
  on "$h" "$bin/ddp-bench" link --seconds 1 "$@"
}
link 2 --listen 10.78.0.2:29999 > /dev/null &
echo "# link floor: one TCP connection host 1 -> host 2: $(link 1 --connect 10.78.0.2:29999 | tail -1) GB/s"
wait
# An all_reduce loads every link at once, both ways: host K sends to K+1 while it receives from
# K-1 (a ring; with 2 hosts, both ways on the one connection). On emulated hosts every stream's
# copies share this machine's cores and one bridge, so each gets less than one stream alone
# (real NICs are full duplex, each its own).
if [ "$n" = 2 ]; then
  link 2 --listen 10.78.0.2:29998 --both-ways > "$out/ring.2" &
  link 1 --connect 10.78.0.2:29998 --both-ways > "$out/ring.1" &
else
  for h in $(seq 1 "$n"); do
    link "$h" --listen "10.78.0.$h:29998" --connect "10.78.0.$((h % n + 1)):29998" > "$out/ring.$h" &
  done
fi
wait
for h in $(seq 1 "$n"); do tail -1 "$out/ring.$h" > "$out/ring.$h.best"; done
ring=$(for h in $(seq 1 "$n"); do printf 'host %s -> %s %s GB/s, ' "$h" $((h % n + 1)) "$(cat "$out/ring.$h.best")"; done)
mean=$(cat "$out"/ring.*.best | awk '{ t += $1 } END { printf "%.2f", t / NR }')
echo "# every host sending to the next at once: ${ring%, } (mean $mean GB/s)"
# The --sizes given for ddp-bench (empty when none).
sizes_given() {
  local sizes="" prev="" a
  for a in "${args[@]}"; do
    [ "$prev" = --sizes ] && sizes=$a
    case "$a" in --sizes=*) sizes=${a#--sizes=} ;; esac
    prev=$a
  done
  echo "$sizes"
}
# A whole size with an optional K, M or G suffix, in bytes; 0 for anything else (a fraction such
# as 1.5M, or garbage: left out of the adds; ddp-bench reads or refuses it itself).
bytes_of() {
  [[ "$1" =~ ^[0-9]{1,12}[KkMmGg]?$ ]] || { echo 0; return; }
  case "$1" in
    *[Kk]) echo $((${1%?} << 10)) ;;
    *[Mm]) echo $((${1%?} << 20)) ;;
    *[Gg]) echo $((${1%?} << 30)) ;;
    *) echo "$1" ;;
  esac
}
# The least any all_reduce must send from each host (reduce_scatter + all_gather among the hosts:
# 2 (N-1)/N of the buffer), at the ring streams' mean rate: the op's floor on these links. The
# mean, not the slowest: emulated links share the cores, so one stream's loss is another's gain.
floors() {
  local sizes
  sizes=$(sizes_given)
  [ -n "$sizes" ] || return 0
  awk -v sizes="$sizes" -v n="$n" -v gbps="$mean" 'BEGIN {
    k = split(sizes, s, ","); line = ""
    for (i = 1; i <= k; i++) {
      b = s[i]; m = 1
      if (b ~ /[Kk]$/) m = 1024; else if (b ~ /[Mm]$/) m = 1048576; else if (b ~ /[Gg]$/) m = 1073741824
      sub(/[KkMmGg]$/, "", b); bytes = b * m
      us = 2 * (n - 1) / n * bytes / (gbps * 1e3)
      line = line sprintf((us < 100 ? "%s%s %.2f us" : "%s%s %.0f us"), (i > 1 ? ", " : ""), s[i], us)
    }
    printf "# all_reduce floor (each host sends 2(N-1)/N of the buffer at %s GB/s): %s\n", gbps, line
  }'
}
# The adds an all_reduce makes on each host: every element of the W = N x RANKS_PER_HOST inputs
# added once, W - 1 adds per element, so (W - 1) / N passes of a += b over the buffer per host at
# least, timed on host 1's CPUs (ddp-bench floors: pass_us; from 1 MiB, below which the pass
# times its threads' start). Where links bind, the adds overlap the sends; where a host's CPUs
# carry its streams' copies too (unshaped emulated links), the floor plus the adds is the least.
adds() {
  local a list=()
  for a in $(sizes_given | tr ',' ' '); do
    [ "$(bytes_of "$a")" -ge $((1 << 20)) ] && list+=("$a")
  done
  [ ${#list[@]} -gt 0 ] || return 0
  if ! on 1 "$bin/ddp-bench" floors --sizes "$(IFS=,; echo "${list[*]}")" --repeats 5 --format json \
      > "$out/floors" 2> "$out/floors.err"; then
    echo "# the adds: ddp-bench floors failed: $(tail -1 "$out/floors.err")"
    return 0
  fi
  sed -nE 's/^\{.*"bytes":([0-9]+).*"pass_us":([0-9.]+).*/\1 \2/p' "$out/floors" | awk -v w=$((n * per)) -v n="$n" '
    { us = $2 * (w - 1) / n; b = $1; s = b / 1048576 >= 1024 ? sprintf("%dG", b / 1073741824) : sprintf("%dM", b / 1048576)
      line = line sprintf("%s%s %.0f us", (NR > 1 ? ", " : ""), s, us) }
    END { printf "# adds per host ((W - 1) / N = %d / %d passes of a += b over the buffer, on host 1'"'"'s CPUs): %s\n", w - 1, n, line }'
}
# The emulated hosts share this machine's cores: when their ranks outnumber them, shared memory
# gets the settings the backend itself picks for ranks that outnumber a host's cores (never
# spin: a spinning rank holds the core its peer needs), unless set here already.
if [ "$share" = 0 ] && [ $((n * per)) -gt "$(nproc)" ] && [ -z "${DDP_TCP_SPIN_US:-}" ]; then
  export DDP_TCP_SPIN_US=0 DDP_TCP_YIELD_US=50 DDP_TCP_INLINE_SPIN_US=2000
  echo "# $((n * per)) ranks on $(nproc) cores: DDP_TCP_SPIN_US=0 DDP_TCP_YIELD_US=50 DDP_TCP_INLINE_SPIN_US=2000"
fi
args=("$@")
[[ " ${args[*]} " == *" --format "* ]] || args+=(--format table)
if [ "$share" = 0 ]; then
  echo "# $n hosts x $per ranks; peers: $compare; the hosts share this machine's ${#allowed[@]} CPUs"
else
  echo "# $n hosts x $per ranks; peers: $compare; each host on $share CPUs of its own:$(for h in $(seq 1 "$n"); do printf ' %s' "${cpus[h]}"; done)"
fi
floors
adds
# Open MPI beside: mpirun on host 1 starts its daemons on the others through an rsh agent that
# enters host K (hosts.sh run), then ddp-bench --backend mpi-direct (MPI_Allreduce: its tuned
# algorithms, vader within a host, tcp between). The launcher is forced to rsh: an environment
# may preset another (a 16-core machine here sets OMPI_MCA_plm=isolated, which starts every rank
# on host 1: 8 ranks over shared memory, measured as if across hosts). Ranks are placed, then
# checked by hostname. A run that fails says so, with the end of its stderr, and is skipped.
run_mpi() {
  command -v mpirun > /dev/null || { echo "## Open MPI: no mpirun here, skipped"; return 0; }
  cat > "$out/agent.sh" << AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
k=\${host##*h}
c=\$(cat "$out/cpus.\$k" 2> /dev/null)
if [ -n "\$c" ]; then
  exec sh $here/tests/netns/hosts.sh run $p "\$k" taskset -c "\$c" sh -c "\$*"
fi
exec sh $here/tests/netns/hosts.sh run $p "\$k" sh -c "\$*"
AGENT
  for h in $(seq 1 "$n"); do printf '%s' "${cpus[h]}" > "$out/cpus.$h"; done
  chmod +x "$out/agent.sh"
  hostlist=$(for h in $(seq 1 "$n"); do printf '%s' "${p}h$h:$per,"; done)
  local mpi=(mpirun --allow-run-as-root --host "${hostlist%,}" -np $((n * per))
    --mca plm rsh --mca plm_rsh_agent "$out/agent.sh" --mca btl tcp,self,vader --mca btl_tcp_if_include veth0
    --mca oob_tcp_if_include veth0 --bind-to none --mca mpi_yield_when_idle 1)
  echo "## Open MPI (mpirun across the hosts, mpi-direct)"
  # Where mpirun put the ranks (each emulated host has its own hostname): figures only when
  # every host runs its share, never a run that piled ranks onto fewer hosts.
  local names placed
  names=$(on 1 "${mpi[@]}" hostname 2> "$out/mpi.err" | sort) || true
  placed=$(uniq -c <<< "$names" | awk '{print $1}' | sort -u | tr '\n' ' ')
  if [ "$placed" != "$per " ] || [ "$(uniq <<< "$names" | grep -c .)" != "$n" ]; then
    echo "# Open MPI did not place $per ranks on each of the $n hosts (ranks per host seen: ${placed:-none}); skipped:"
    tail -40 "$out/mpi.err" | sed "s/^/#   /"
    return 0
  fi
  if ! on 1 "${mpi[@]}" "$bin/ddp-bench" collective --backend mpi-direct "${args[@]}" \
      > "$out/mpi.out" 2> "$out/mpi.err"; then
    echo "# Open MPI did not run across the hosts:"
    tail -40 "$out/mpi.err" | sed "s/^/#   /"
    return 0
  fi
  grep -v "^\[" "$out/mpi.out"
}

peers=(--compare "$compare")
[ "$compare" = none ] && peers=()
for mode in $modes; do
  if [ "$mode" = mpi ]; then run_mpi; continue; fi
  transport=auto
  [ "$mode" = flat ] && transport=socket
  pids=()
  for h in $(seq 1 "$n"); do
    on "$h" env DDP_TCP_TRANSPORT=$transport DDP_BENCH_GLOO_HOST=10.78.0.$h DDP_SOCKET_IFNAME=veth0 \
      "$bin/ddp-launch" --nnodes "$n" --node-rank $((h - 1)) --nproc-per-node "$per" \
        --master-addr 10.78.0.1 --local-addr 10.78.0.$h \
        "$bin/ddp-bench" collective "${peers[@]}" "${args[@]}" \
      > "$out/$mode.$h.out" 2> "$out/$mode.$h.err" &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  echo "## ours: DDP_TCP_TRANSPORT=$transport"
  { grep -v "^\\[" "$out/$mode.1.out" || true; } | sed "s/^\\[default0\\]://; s/^\\[0\\]://"
  if [ $status != 0 ]; then cat "$out"/$mode.*.err >&2; exit $status; fi
done
