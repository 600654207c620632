#!/usr/bin/env bash
# hosts.sh's promises (root only; exit 77, Skipped, otherwise): three hosts with their own
# hostname, IPC namespace and /dev/shm (a file made on one is absent on another), reachable from
# each other over the bridge, `run` passing the command's exit status through, `link down`
# cutting a host off, "down" leaving no namespace or holder behind, and a RATE shaping each
# host's link (netem, else tbf) or saying why not, and a rate tc cannot read named, links unshaped.
# usage: hosts_test.sh <source dir>
set -uo pipefail
src=$1
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 77; }
$hosts sweep
p=ddpM$$x3
$hosts up "$p" 3 || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
trap '$hosts down "$p" 3' EXIT
fail() { echo "FAIL: $*"; exit 1; }
probe='import socket, sys
s = socket.socket(); s.settimeout(1)
try: s.connect((sys.argv[1], 9)); print("open")
except ConnectionRefusedError: print("refused")
except OSError as e: print("unreachable", e)'

[ "$($hosts run "$p" 1 hostname)" = "${p}h1" ] || fail "host 1's hostname"
[ "$($hosts run "$p" 2 hostname)" = "${p}h2" ] || fail "host 2's hostname"
ipc1=$($hosts run "$p" 1 readlink /proc/self/ns/ipc) ipc2=$($hosts run "$p" 2 readlink /proc/self/ns/ipc)
[ "$ipc1" != "$ipc2" ] && [ "$ipc1" != "$(readlink /proc/self/ns/ipc)" ] || fail "hosts share an IPC namespace"
$hosts run "$p" 1 touch /dev/shm/ddp_hosts_probe || fail "host 1 cannot write its /dev/shm"
$hosts run "$p" 1 test -e /dev/shm/ddp_hosts_probe || fail "host 1 lost its /dev/shm file"
$hosts run "$p" 2 test -e /dev/shm/ddp_hosts_probe && fail "host 2 sees host 1's /dev/shm"
test -e /dev/shm/ddp_hosts_probe && fail "the caller sees host 1's /dev/shm"
$hosts run "$p" 3 sh -c 'exit 5'
[ $? = 5 ] || fail "run did not pass the exit status through"
[ "$($hosts run "$p" 1 /usr/bin/python3 -c "$probe" 10.78.0.3)" = refused ] || fail "host 3 unreachable from host 1"
$hosts link "$p" 3 down || fail "link down"
[[ "$($hosts run "$p" 1 /usr/bin/python3 -c "$probe" 10.78.0.3)" != refused ]] || fail "host 3 reachable after link down"
$hosts down "$p" 3
trap - EXIT
ip netns list | grep -q "$p" && fail "namespaces left behind"
[ -e "/run/ddp-hosts/$p" ] && fail "state left behind"

# RATE: every host's link carries the rate in its qdisc, or hosts.sh says it could not.
p=ddpM$$x4
err=$($hosts up "$p" 2 300mbit 2>&1 > /dev/null) || fail "up with a rate: $err"
trap '$hosts down "$p" 2' EXIT
for k in 1 2; do
  q=$(tc -n "${p}n$k" qdisc show dev veth0)
  case "$err" in
    *"links shaped"*) [[ "$q" == *"rate 300Mbit"* ]] || fail "host $k's link not shaped: $q ($err)" ;;
    *"links run unshaped"*) echo "hosts.sh: no netem or tbf here: $err" ;;
    *) fail "up with a rate said neither shaped nor unshaped: $err" ;;
  esac
done
$hosts down "$p" 2
trap - EXIT

# A rate tc cannot read: the hosts still come up, unshaped, and the notice names the value.
p=ddpM$$x5
err=$($hosts up "$p" 2 garbage 2>&1 > /dev/null) || fail "up with a bad rate failed: $err"
trap '$hosts down "$p" 2' EXIT
[[ "$err" == *"links run unshaped"*garbage* || "$err" == *garbage*"links run unshaped"* ]] ||
  fail "a bad rate was not named: $err"
[[ "$(tc -n "${p}n1" qdisc show dev veth0)" != *rate* ]] || fail "a bad rate shaped a link"
$hosts down "$p" 2
trap - EXIT
echo "hosts: ok"
