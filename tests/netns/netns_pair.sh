#!/bin/sh
# netns_pair.sh up|down NS_A NS_B
# Two network namespaces joined by a veth pair: NS_A has 10.77.0.1/24, NS_B has 10.77.0.2/24,
# loopback up in both. The addresses exist only inside the namespaces (nothing on the host's own
# interfaces), so traffic between them never leaves the machine. Needs root and iproute2.
# "down" removes both namespaces (and with them the veth pair); it never fails.
# "sweep" removes pairs named ddpA<pid>x<n>/ddpB<pid>x<n> whose test process <pid> is gone (a
# test killed by a timeout cannot clean up after itself).
set -eu
cmd=$1 a=${2:-} b=${3:-}
case "$cmd" in
  up)
    ip netns add "$a"
    ip netns add "$b"
    ip -n "$a" link add veth0 type veth peer name veth0 netns "$b"
    ip -n "$a" addr add 10.77.0.1/24 dev veth0
    ip -n "$b" addr add 10.77.0.2/24 dev veth0
    for ns in "$a" "$b"; do
      ip -n "$ns" link set lo up
      ip -n "$ns" link set veth0 up
    done
    ;;
  down)
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    ;;
  sweep)
    for ns in $(ip netns list | awk '{print $1}' | grep -E '^ddp[AB][0-9]+x[0-9]+$' || true); do
      pid=$(echo "$ns" | sed -E 's/^ddp[AB]([0-9]+)x.*/\1/')
      [ -d "/proc/$pid" ] || ip netns del "$ns" 2>/dev/null || true
    done
    ;;
  *)
    echo "usage: $0 up|down NS_A NS_B | sweep" >&2
    exit 2
    ;;
esac
