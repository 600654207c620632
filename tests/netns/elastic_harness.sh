# elastic_harness.sh: what the elastic tests across emulated hosts share (hosts_elastic_test.sh,
# hosts_in_place*_test.sh, hosts_false_eviction_test.sh, hosts_etcd*_test.sh): ddp-launch on
# hosts of tests/netns/hosts.sh, over a tcp rendezvous that host 1's launcher serves. Sourced by
# bash (after `set -uo pipefail`), with $bin (the directory of ddp-launch) and $src (the source
# directory) set. Contract:
#
#   harness_up NAME N   not root or a tool missing: exit 77 (ctest: Skipped). Else hosts 1..N in
#                       set $p (stale sets of dead tests removed first), run id $run_id=NAME<pid>,
#                       a directory $out every host's processes can write, $conf (the
#                       --rdzv-conf: heartbeats 0.2 s x 5, last_call_timeout 0.5; a test may
#                       change it before launching), and an EXIT trap that SIGKILLs the launchers
#                       in $pids, takes the hosts down and removes $out.
#   launch H ARGS...    ddp-launch on host H in the background: endpoint 10.78.0.1:29400, run id
#                       $run_id, --rdzv-conf $conf, --monitor-interval 0.1, --shutdown-timeout 2,
#                       then ARGS (more options, then the program). Output appended to
#                       $out/hostH.log (a host launched again keeps one log); its pid appended to
#                       $pids. For host 1, returns once the endpoint listens (the others connect).
#   wait_until SECS WHAT COND   evaluates the shell condition COND every 0.05 s until it holds;
#                       fail "WHAT within SECS s" if it does not.
#   fail MSG            the tail of every host's log, "FAIL: MSG", exit 1.
#   assert_clean H...   fail when /dev/shm of a host H holds anything or a process of $run_id lives.
#   value_implied STEPS the committed value ddp_elastic_probe --print-steps must finish with: each
#                       step's world summed over steps 1..STEPS, from every host's log (the last
#                       print of a step by time wins: a rolled-back step is taken again, later;
#                       a lost host's prints count, since a survivor may have synced its steps).
#                       Empty when a step was never printed.
#   assert_done_implied STEPS H...   every worker that finished on the hosts H ("done" lines; at
#                       least one per host) took STEPS steps and holds value_implied STEPS: the
#                       state is the same on every rank and what the steps imply. Sets $implied
#                       to that value.
hosts="sh $src/tests/netns/hosts.sh"

harness_up() {
  local rc
  [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
  $hosts sweep
  p=ddpM$$x1 n=$2 run_id=$1$$
  $hosts up "$p" "$n" || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
  out=$(mktemp -d)
  chmod 777 "$out"
  conf=keep_alive_interval=0.2,keep_alive_max_attempt=5,last_call_timeout=0.5
  pids=()
  trap harness_down EXIT
}

harness_down() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  $hosts down "$p" "$n"
  rm -rf "$out"
}

fail() {
  for f in "$out"/host*.log; do echo "== $f"; tail -40 "$f"; done
  echo "FAIL: $*"
  exit 1
}

wait_until() {
  local end=$((SECONDS + $1))
  until eval "$3"; do
    [ $SECONDS -lt $end ] || fail "$2 within $1 s"
    sleep 0.05
  done
}

launch() {
  local h=$1
  shift
  $hosts run "$p" "$h" "$bin/ddp-launch" --rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29400 \
    --rdzv-id "$run_id" --local-addr "10.78.0.$h" --monitor-interval 0.1 --shutdown-timeout 2 \
    --rdzv-conf "$conf" "$@" >> "$out/host$h.log" 2>&1 &
  pids+=($!)
  [ "$h" != 1 ] || wait_until 10 "host 1's launcher listening at 10.78.0.1:29400" store_listening
}

# The store's endpoint listens on host 1 (its launcher still alive).
store_listening() {
  kill -0 "${pids[-1]}" 2> /dev/null || fail "host 1's launcher exited before its store listened"
  [ -n "$($hosts run "$p" 1 ss -Hltn 'sport = :29400')" ]
}

assert_clean() {
  local h left
  for h in "$@"; do
    left=$($hosts run "$p" "$h" sh -c 'ls -A /dev/shm')
    [ -z "$left" ] || fail "host $h's /dev/shm holds: $left"
  done
  left=$(grep -lzx "DDP_RUN_ID=$run_id" /proc/[0-9]*/environ 2> /dev/null)
  [ -z "$left" ] || fail "processes of the job are left: $left"
}

value_implied() {
  cat "$out"/host*.log | awk '/^elastic_job step / { print $NF, $3, $7 }' | sort -n |
    awk -v n="$1" '{ w[$2] = $3 } END { for (s = 1; s <= n; s++) { if (!(s in w)) exit; v += w[s] } print v }'
}

assert_done_implied() {
  local steps=$1 h line
  shift
  implied=$(value_implied "$steps")
  [ -n "$implied" ] || fail "a step of 1..$steps was never printed"
  for h in "$@"; do
    grep -q "^done pid=" "$out/host$h.log" || fail "no worker finished on host $h"
    while read -r line; do
      [[ "$line" =~ ^done\ pid=[0-9]+\ value=$implied\ steps=$steps$ ]] ||
        fail "host $h: '$line', not value=$implied (what the steps imply) steps=$steps"
    done < <(grep "^done pid=" "$out/host$h.log")
  done
}
