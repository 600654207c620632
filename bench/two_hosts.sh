#!/usr/bin/env bash
# ddp-bench collective across two "hosts": N network namespaces on one bridge
# (tests/netns/netns_bridge.sh), RANKS_PER_HOST ranks in each, our tcp backend (sockets between
# hosts) beside Gloo's own algorithms (and any other --compare peer) in the same run.
#
#   sudo bench/two_hosts.sh [ddp-bench args...]      e.g. --op all_reduce --sizes 64K,1M,16M,64M
#
# HOSTS (default 2), RANKS_PER_HOST (default 1), COMPARE (default gloo), BIN (default build/bin).
# Prints rank 0's rows (format table unless given). Needs root and iproute2; the namespaces
# exist only for the run, nothing leaves the machine. A floor for the link: the first line
# reports one TCP stream's throughput between host 1 and host 2 (python, 1 s).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$here/build/bin}
hosts=${HOSTS:-2}
per=${RANKS_PER_HOST:-1}
compare=${COMPARE:-gloo}
[ "$(id -u)" = 0 ] || { echo "two_hosts.sh: needs root (network namespaces)" >&2; exit 77; }
p=ddpbench$$x
sh "$here/tests/netns/netns_bridge.sh" up "$p" "$hosts"
trap 'sh "$here/tests/netns/netns_bridge.sh" down "$p" "$hosts"' EXIT

ip netns exec "${p}n2" /usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("10.78.0.2", 29999)); s.listen(1)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
' &
sleep 0.3
ip netns exec "${p}n1" /usr/bin/python3 -c '
import socket, time
s = socket.create_connection(("10.78.0.2", 29999)); buf = b"x" * (1 << 20); t = time.time(); n = 0
while time.time() - t < 1: s.sendall(buf); n += len(buf)
s.close(); print("# one TCP stream host1 -> host2: %.2f GB/s" % (n / (time.time() - t) / 1e9))
'
wait

args=("$@")
[[ " ${args[*]} " == *" --format "* ]] || args+=(--format table)
pids=()
for h in $(seq 1 "$hosts"); do
  ip netns exec "${p}n$h" env DDP_BENCH_GLOO_HOST=10.78.0.$h DDP_SOCKET_IFNAME=veth0 \
    "$bin/ddp-launch" --nnodes "$hosts" --node-rank $((h - 1)) --nproc-per-node "$per" \
      --master-addr 10.78.0.1 --local-addr 10.78.0.$h \
      "$bin/ddp-bench" collective --compare "$compare" "${args[@]}" \
    > "/tmp/$p.$h.out" 2> "/tmp/$p.$h.err" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
grep -v "^\\[" "/tmp/$p.1.out" | sed "s/^\\[default0\\]://; s/^\\[0\\]://"
if [ $status != 0 ]; then cat /tmp/$p.*.err >&2; fi
rm -f /tmp/$p.*
exit $status
