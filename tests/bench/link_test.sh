#!/bin/sh
# ddp-bench link over loopback (a smoke test, not a timing test): one way, both ways on one
# connection, and a ring of three each print a rate per call size and the best; nonsense
# arguments are refused by name. $1: ddp-bench. Ports: below the kernel's ephemeral range
# (32768 up), where other tests' connections take theirs; a pair whose listener still finds its
# port taken tries the next (pair()).
set -u
bench=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "link_test: $*"; for f in "$d"/*; do echo "== $f"; cat "$f"; done; exit 1; }
port=$((10000 + $$ % 10000))

# pair NAME "LISTENER ARGS" "SENDER ARGS": a listener and a sender on the next free port, their
# output in $d/NAME.l and $d/NAME.s; both must succeed. A port someone else holds ("Address
# already in use") is given up for the next, 5 times at most.
pair() {
  name=$1
  for _ in 1 2 3 4 5; do
    port=$((port + 1))
    # shellcheck disable=SC2086
    "$bench" link --listen 127.0.0.1:$port $2 > "$d/$name.l" 2>&1 &
    listener=$!
    # shellcheck disable=SC2086
    "$bench" link --connect 127.0.0.1:$port --timeout 10 $3 > "$d/$name.s" 2>&1
    sent=$?
    wait $listener
    heard=$?
    if grep -q "Address already in use" "$d/$name.l"; then
      echo "link_test: $name: port $port is taken, trying the next"
      continue
    fi
    [ $sent = 0 ] || fail "$name: sender failed"
    [ $heard = 0 ] || fail "$name: receiver failed"
    return 0
  done
  fail "$name: no free port in 5 tries"
}

# one way: the receiver prints nothing, the sender its rates, then the best alone
pair oneway "--seconds 0.3" "--seconds 0.3 --calls 4K,64K"
[ ! -s "$d/oneway.l" ] || fail "one way: the receiver printed"
grep -q '^# 4096 bytes per call: [0-9.]* GB/s$' "$d/oneway.s" || fail "one way: no 4K row"
grep -q '^# 65536 bytes per call: [0-9.]* GB/s$' "$d/oneway.s" || fail "one way: no 64K row"
tail -1 "$d/oneway.s" | grep -Eq '^[0-9]+\.[0-9]+$' || fail "one way: last line is not the best"

# --zerocopy over loopback: every send's completion is read back, and the kernel copied them
# all (it always does on loopback)
pair zerocopy "--seconds 0.3" "--seconds 0.3 --zerocopy"
line=$(grep '^# zerocopy:' "$d/zerocopy.s") || fail "zerocopy: no zerocopy line"
# shellcheck disable=SC2086
set -- $line
[ "$3" -gt 0 ] && [ "$3" = "$5" ] && [ "$5" = "$7" ] || fail "zerocopy: sends, completions, copies differ: $line"
echo "$line" | grep -q "no zero-copy on this path" || fail "zerocopy: loopback's copies not said: $line"

# both ways on one connection: each side reports (json)
port=$((port + 1))
"$bench" link --listen 127.0.0.1:$port --both-ways --seconds 0.3 --format json > "$d/a" 2>&1 &
"$bench" link --connect 127.0.0.1:$port --both-ways --seconds 0.3 --format json > "$d/b" 2>&1 || fail "both ways: connector failed"
wait $! || fail "both ways: listener failed"
for f in a b; do grep -q '"both_ways":true' "$d/$f" && grep -q '"best_GBps":' "$d/$f" && grep -q '"machine":' "$d/$f" || fail "both ways: $f's row"; done

# a ring of three, started in any order
port=$((port + 10))
for k in 0 1 2; do
  "$bench" link --listen 127.0.0.1:$((port + k)) --connect 127.0.0.1:$((port + (k + 1) % 3)) --seconds 0.3 > "$d/ring$k" 2>&1 &
done
wait || true
for k in 0 1 2; do tail -1 "$d/ring$k" | grep -Eq '^[0-9]+\.[0-9]+$' || fail "ring: member $k"; done

# nonsense
e=$("$bench" link 2>&1) && fail "no endpoint accepted"
echo "$e" | grep -q "give --listen, --connect or both" || fail "no endpoint: $e"
e=$("$bench" link --listen 127.0.0.1:1 --connect 127.0.0.1:2 --both-ways 2>&1) && fail "both-ways with two connections accepted"
echo "$e" | grep -q "one connection" || fail "both-ways with two: $e"
e=$("$bench" link --connect 127.0.0.1:1 --calls 3Q 2>&1) && fail "bad --calls accepted"
echo "$e" | grep -q "3Q" || fail "bad --calls: $e"
for bad in "--calls 32K,0" "--calls 2G" "--buffer 1T" "--seconds 1e300" "--seconds 0" "--timeout -1" "--seconds nan"; do
  # shellcheck disable=SC2086
  e=$("$bench" link --connect 127.0.0.1:1 $bad 2>&1) && fail "$bad accepted"
  echo "$e" | grep -q -- "${bad%% *}" || fail "$bad: not named: $e"
done

# silence: nobody connects; a peer that connects and then neither sends nor closes
port=$((port + 10))
e=$(timeout 20 "$bench" link --listen 127.0.0.1:$port --timeout 1 2>&1) && fail "nobody connected, yet success"
echo "$e" | grep -q "no peer connected within 1000 ms" || fail "nobody connected: $e"
port=$((port + 1))
# The silent peer starts first, says when it is trying (a slow interpreter start must not count
# against the listener's second), and connects as soon as the listener listens.
/usr/bin/python3 -c 'import socket, sys, time
open(sys.argv[2], "w").close()
for _ in range(400):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); break
    except OSError: time.sleep(0.05)
time.sleep(8)' $port "$d/trying" &
mute=$!
for _ in $(seq 200); do [ -e "$d/trying" ] && break; sleep 0.05; done
timeout 20 "$bench" link --listen 127.0.0.1:$port --timeout 1 > "$d/silent" 2>&1 &
listener=$!
wait $listener && fail "a silent peer, yet success"
kill $mute 2> /dev/null
grep -q "nothing from the peer on 127.0.0.1:$port for 1000 ms, and it has not closed its end" "$d/silent" ||
  fail "silent peer: $(cat "$d/silent")"
echo "link_test: ok"
