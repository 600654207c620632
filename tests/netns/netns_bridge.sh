#!/bin/sh
# netns_bridge.sh up|down PREFIX N | sweep
# N network namespaces PREFIXn1..PREFIXnN on one bridge that lives in its own namespace PREFIXbr,
# like N hosts on one subnet: in PREFIXnK, veth0 has 10.78.0.K/24 and fd78::K/64, a route for the
# multicast groups 239.0.0.0/8 (IPv6 multicast routes exist on every interface), loopback up.
# Nothing is created in the caller's namespace, so no datagram can leave the machine. The bridge
# floods multicast (snooping off). Needs root and iproute2. "down" never fails.
# "sweep" removes sets named ddpM<pid>x<n>* whose test process <pid> is gone.
set -eu
cmd=$1 p=${2:-} n=${3:-0}
case "$cmd" in
  up)
    ip netns add "${p}br"
    ip -n "${p}br" link add br0 type bridge mcast_snooping 0
    ip -n "${p}br" link set br0 up
    ip -n "${p}br" link set lo up
    k=1
    while [ "$k" -le "$n" ]; do
      ns="${p}n$k"
      ip netns add "$ns"
      ip -n "${p}br" link add "p$k" type veth peer name veth0 netns "$ns"
      ip -n "${p}br" link set "p$k" master br0
      ip -n "${p}br" link set "p$k" up
      ip -n "$ns" link set lo up
      ip -n "$ns" addr add "10.78.0.$k/24" dev veth0
      ip -n "$ns" addr add "fd78::$k/64" dev veth0 nodad
      ip -n "$ns" link set veth0 up
      ip -n "$ns" route add 239.0.0.0/8 dev veth0
      k=$((k + 1))
    done
    ;;
  down)
    k=1
    while [ "$k" -le "$n" ]; do
      ip netns del "${p}n$k" 2>/dev/null || true
      k=$((k + 1))
    done
    ip netns del "${p}br" 2>/dev/null || true
    ;;
  sweep)
    for ns in $(ip netns list | awk '{print $1}' | grep -E '^ddpM[0-9]+x[0-9]+(br|n[0-9]+)$' || true); do
      pid=$(echo "$ns" | sed -E 's/^ddpM([0-9]+)x.*/\1/')
      [ -d "/proc/$pid" ] || ip netns del "$ns" 2>/dev/null || true
    done
    ;;
  *)
    echo "usage: $0 up|down PREFIX N | sweep" >&2
    exit 2
    ;;
esac
