#!/bin/sh
# hosts.sh: N emulated hosts on one bridge, each a network + IPC + mount + UTS namespace with its
# own /dev/shm (a fresh tmpfs) and hostname PREFIXhK, so same-host detection sees them as
# different hosts, as real ones are. Networking is netns_bridge.sh's: host K has veth0 with
# 10.78.0.K/24 and fd78::K/64, the bridge lives in its own namespace, nothing leaves the machine.
# Each host's IPC and mount namespaces are held by one "holder" process (sleep) started here;
# `run` enters all four namespaces of host K through it (nsenter), keeping the caller's
# environment and working directory. Needs root, iproute2, util-linux (unshare, nsenter).
#
#   hosts.sh up PREFIX N [RATE [DELAY]]  make hosts 1..N; with RATE (e.g. 10gbit) and/or DELAY
#                                        (e.g. 50us; "-" for none), tc netem shapes each host's
#                                        egress on veth0. Where netem is unavailable (no sch_netem
#                                        module), RATE is applied with tc tbf and DELAY dropped;
#                                        what was applied, or "hosts.sh: tc netem unavailable ...",
#                                        goes to stderr. Unshaped links still exit 0.
#   hosts.sh run PREFIX K CMD [ARGS...]  CMD on host K; exits with CMD's status.
#   hosts.sh link PREFIX K up|down       host K's link (veth0 inside it) up or down.
#   hosts.sh down PREFIX N               holders ended, namespaces removed; never fails.
#   hosts.sh sweep                       removes sets named ddpM<pid>x<n>* whose <pid> is gone.
#
# Exit codes: 0 done; 2 usage; 77 not root or a tool missing (tests map it to Skipped); 1 other
# failures (e.g. a namespace that could not be made), after removing what "up" had made.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
state=/run/ddp-hosts
usage() { echo "usage: $0 up PREFIX N [RATE [DELAY]] | run PREFIX K CMD... | link PREFIX K up|down | down PREFIX N | sweep" >&2; exit 2; }
need() {
  [ "$(id -u)" = 0 ] || { echo "hosts.sh: needs root (namespaces)" >&2; exit 77; }
  for t in ip unshare nsenter; do
    command -v "$t" > /dev/null || { echo "hosts.sh: needs $t" >&2; exit 77; }
  done
}
holder() { cat "$state/$1/h$2.pid" 2> /dev/null || { echo "hosts.sh: no host $2 in set $1" >&2; exit 1; }; }

# The holder of host K: in PREFIXnK's network namespace, new IPC, mount and UTS namespaces, a
# fresh tmpfs on /dev/shm, then it sleeps (its pid is the namespaces' handle).
start_holder() {
  p=$1 k=$2
  ip netns exec "${p}n$k" unshare --ipc --mount --uts --propagation private \
    sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && hostname "$1" && echo $$ > "$2.tmp" &&
           mv "$2.tmp" "$2" && exec sleep infinity' sh "${p}h$k" "$state/$p/h$k.pid" \
    < /dev/null > /dev/null 2>&1 &
  i=0
  while [ ! -s "$state/$p/h$k.pid" ]; do
    i=$((i + 1))
    [ $i -le 100 ] || { echo "hosts.sh: host $k's namespaces did not come up" >&2; return 1; }
    sleep 0.05
  done
}

# tc netem on every host's veth0. Where netem is unavailable, a rate alone is still applied with
# tbf (a token bucket: sch_tbf is in more kernels than sch_netem); a delay cannot be, and is a
# notice (not a failure), as are links left unshaped.
shape() {
  p=$1 n=$2 rate=$3 delay=$4
  spec=""
  [ "$delay" = - ] || spec="delay $delay"
  [ "$rate" = - ] || spec="$spec rate $rate"
  [ -n "$spec" ] || return 0
  # shellcheck disable=SC2086
  if ! why=$(each_host "$p" "$n" netem $spec); then
    if [ "$rate" != - ]; then
      if tbf_why=$(each_host "$p" "$n" tbf rate "$rate" burst "$(burst_of "$rate")" latency 5ms); then
        [ "$delay" = - ] || echo "hosts.sh: tc netem unavailable ($why): no delay" >&2
        echo "hosts.sh: links shaped: tbf rate $rate" >&2
        return 0
      fi
      why="$why; tc tbf rate $rate: $tbf_why"
    fi
    echo "hosts.sh: tc netem unavailable ($why): links run unshaped" >&2
    return 0
  fi
  echo "hosts.sh: links shaped: netem $spec" >&2
}

# Adds qdisc "$@" on every host's veth0; on a failure, removes those added and prints tc's error.
each_host() {
  p=$1 n=$2
  shift 2
  k=1
  while [ "$k" -le "$n" ]; do
    if ! tc_err=$(tc -n "${p}n$k" qdisc add dev veth0 root "$@" 2>&1); then
      while [ "$k" -gt 1 ]; do
        k=$((k - 1))
        tc -n "${p}n$k" qdisc del dev veth0 root 2> /dev/null || true
      done
      echo "$tc_err"
      return 1
    fi
    k=$((k + 1))
  done
}

# A token bucket's size for RATE (e.g. 10gbit, 500mbit): 4 ms of the rate (a tick of a 250 Hz
# kernel: the bucket must refill within one), at least 256 KiB (a GSO packet is up to 64 KiB).
burst_of() {
  echo "$1" | awk '{
    r = tolower($1); m = 1
    if (r ~ /gbit$/) m = 1e9; else if (r ~ /mbit$/) m = 1e6; else if (r ~ /kbit$/) m = 1e3
    sub(/[a-z]+$/, "", r)
    b = r * m / 8 * 0.004
    if (b < 262144) b = 262144
    printf "%d\n", b
  }'
}

down() {
  p=$1 n=$2
  for f in "$state/$p"/h*.pid; do
    [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true
  done
  rm -rf "${state:?}/$p"
  sh "$here/netns_bridge.sh" down "$p" "$n"
}

cmd=${1:-}
case "$cmd" in
  up)
    [ $# -ge 3 ] || usage
    need
    p=$2 n=$3
    mkdir -p "$state/$p"
    if ! sh "$here/netns_bridge.sh" up "$p" "$n"; then down "$p" "$n"; exit 1; fi
    k=1
    while [ "$k" -le "$n" ]; do
      start_holder "$p" "$k" || { down "$p" "$n"; exit 1; }
      k=$((k + 1))
    done
    shape "$p" "$n" "${4:--}" "${5:--}"
    ;;
  run)
    [ $# -ge 4 ] || usage
    need
    pid=$(holder "$2" "$3")
    shift 3
    exec nsenter --target "$pid" --net --ipc --mount --uts --wd="$PWD" -- "$@"
    ;;
  link)
    [ $# -eq 4 ] || usage
    need
    ip -n "${2}n$3" link set veth0 "$4"
    ;;
  down)
    [ $# -eq 3 ] || usage
    need
    down "$2" "$3"
    ;;
  sweep)
    need
    for d in "$state"/ddpM*; do
      [ -d "$d" ] || continue
      pid=$(basename "$d" | sed -E 's/^ddpM([0-9]+)x.*/\1/')
      [ -d "/proc/$pid" ] && continue
      for f in "$d"/h*.pid; do
        [ -s "$f" ] && kill "$(cat "$f")" 2> /dev/null || true
      done
      rm -rf "$d"
    done
    sh "$here/netns_bridge.sh" sweep
    ;;
  *) usage ;;
esac
