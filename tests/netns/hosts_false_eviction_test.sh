#!/usr/bin/env bash
# A slow but live host keeps its place; a stopped one is lost within the heartbeat's bound
# (tests/netns/hosts.sh, elastic_harness.sh). 2 hosts run ddp-launch --nnodes 1:2 over the tcp
# rendezvous hosted on host 1, heartbeats 0.5 s x 8 (a 4 s bound), each one worker,
# ddp_elastic_probe --print-steps (a counter all_reduced every 20 ms, committed). Once both
# workers took a step at world 2 (round 0, or 1 where host 2 came after round 0 closed):
#   stop-short  host 2's launcher SIGSTOPped for 1 s, then SIGCONTinued: well under the bound
#               (the contract, launcher/heartbeat.h: a node is named after at least the bound
#               less half an interval of silence; 3 s are left to a loaded machine's late beats).
#   hog         host 2 saturated: its launcher and worker pinned to one CPU beside 3 busy loops
#               (more than that host's one CPU), in host 2's namespaces, until the job ends.
#   stop-long   host 2's launcher SIGSTOPped and left so: host 1 must name host 2 lost within the
#               bound plus one interval of the SIGSTOP (heartbeat.h: the checker by the bound of
#               the last beat, the others one interval later), plus 2 s of slack for a loaded
#               2-core machine (the launchers' threads and this test's 50 ms poll woken late):
#               4.5 + 2 = 6.5 s, asserted. Host 1's worker goes on in place (same PID, steps in a
#               group of 1). Then host 2's launcher is SIGCONTinued: it finds its round ended and
#               joins the next, its worker (same PID) in place; both launchers exit 0, both
#               workers finish in a new group of 2 with the value the steps imply (a loss
#               recorded is not a ban).
# stop-short and hog: nothing is lost (no log names a loss), both workers (the same PIDs from
# their first group) are still in the group of 2 they had when the stop or the hog began, every
# step from then on is at world 2, both launchers exit 0 and both workers finish with the value
# the steps imply (elastic_harness.sh, assert_done_implied). The stop and the hog must cover part
# of the job (no worker done before they end). Every mode: no process of the job and nothing in
# /dev/shm left on the hosts. 10-20 s. Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_false_eviction_test.sh <bin dir> <tests bin dir> <source dir> stop-short|hog|stop-long
set -uo pipefail
bin=$1 tbin=$2 src=$3 mode=$4
. "$src/tests/netns/elastic_harness.sh"
case $mode in
  stop-short | hog | stop-long) ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
command -v taskset > /dev/null || { echo "no taskset: skipped"; exit 77; }
harness_up "evict-$mode" 2
interval_ms=500 attempts=8
bound_ms=$((interval_ms * attempts))
slack_ms=2000
conf=keep_alive_interval=0.5,keep_alive_max_attempt=$attempts,last_call_timeout=0.5
steps=400
[ "$mode" = stop-long ] && steps=600  # the detection, then steps at world 1, then back at world 2
job=(--nnodes 1:2 "$tbin/ddp_elastic_probe" $steps 20 --print-steps)
cpu=$(($(nproc) - 1))  # host 2's one CPU (hog)
hogs=() rc2= what=

launch 1 "${job[@]}"
if [ "$mode" = hog ]; then
  # launch's ddp-launch, pinned: taskset runs it in host 2's namespaces on CPU $cpu.
  $hosts run "$p" 2 taskset -c "$cpu" "$bin/ddp-launch" --rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29400 \
    --rdzv-id "$run_id" --local-addr 10.78.0.2 --monitor-interval 0.1 --shutdown-timeout 2 \
    --rdzv-conf "$conf" "${job[@]}" >> "$out/host2.log" 2>&1 &
  pids+=($!)
else
  launch 2 "${job[@]}"
fi
launcher2=${pids[1]}
# hosts.sh run execs nsenter, which execs (no fork without --pid): the pid becomes the launcher's.
comm2() { cat "/proc/$launcher2/comm" 2> /dev/null; }
wait_until 10 "pid $launcher2 becoming host 2's launcher" '[ "$(comm2)" = ddp-launch ]'
stepped() { grep -q '^elastic_job step .* world 2 ' "$out/host1.log" "$out/host2.log" 2> /dev/null; }
wait_until 20 "a step at world 2 on both hosts" stepped
worker1=$(grep -o '^group pid=[0-9]*' "$out/host1.log" | head -1 | cut -d= -f2)
worker2=$(grep -o '^group pid=[0-9]*' "$out/host2.log" | head -1 | cut -d= -f2)
# The round of the group of 2 (0, or 1 where host 2 joined after host 1's round 0 closed).
base=$(grep -o '^group pid=[0-9]* round=[0-9]* rank=[01] world=2$' "$out/host1.log" | tail -1 |
  sed 's/.*round=\([0-9]*\).*/\1/')
finished() { grep -q '^done pid=' "$out/host1.log" "$out/host2.log"; }

# SIGSTOP host 2's launcher (every thread of it: its heartbeat too) and see it stopped.
stop_launcher2() {
  kill -STOP "$launcher2" || fail "could not SIGSTOP host 2's launcher"
  stopped=$(date +%s%N)
  wait_until 5 "host 2's launcher stopped" '[ "$(awk "{print \$3}" "/proc/$launcher2/stat")" = T ]'
}

case $mode in
  stop-short)
    stop_launcher2
    since=$(date +%s.%N)
    sleep 1
    finished && fail "a worker finished while host 2's launcher was stopped: the stop covered no step after it"
    kill -CONT "$launcher2"
    what="host 2's launcher SIGSTOPped for $((($(date +%s%N) - stopped) / 1000000)) ms (bound ${bound_ms} ms)"
    ;;
  hog)
    # Each busy loop ends itself after 90 s (under ctest's TIMEOUT), should this script be killed
    # before its EXIT trap can.
    for i in 1 2 3; do
      $hosts run "$p" 2 taskset -c "$cpu" bash -c 'while ((SECONDS < 90)); do :; done' &
      hogs+=($!)
      pids+=($!)
    done
    since=$(date +%s.%N)
    finished && fail "a worker finished before the hogs started"
    wait_until 60 "host 2's launcher ending under the hogs" '! kill -0 "$launcher2" 2> /dev/null'
    wait "$launcher2"
    rc2=$?
    ticks=0
    for pid in "${hogs[@]}"; do
      kill -0 "$pid" 2> /dev/null || fail "hog $pid ended before the job"
      ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
      kill -KILL "$pid"
      wait "$pid" 2> /dev/null
    done
    what="host 2 on CPU $cpu with ${#hogs[@]} busy loops ($((ticks / $(getconf CLK_TCK))) s of CPU between them)"
    ;;
  stop-long)
    stop_launcher2
    named="(${p}h2) lost: no heartbeat"
    wait_until 30 "host 1 naming host 2 lost" 'grep -q "$named" "$out/host1.log"'
    ms=$((($(date +%s%N) - stopped) / 1000000))
    limit=$((bound_ms + interval_ms + slack_ms))
    [ $ms -le $limit ] || fail "host 1 named host 2 lost ${ms} ms after its SIGSTOP, past ${limit} ms"
    finished && fail "a worker finished before host 2 was named lost: the stop covered no step"
    ones() { grep -c '^elastic_job step .* world 1 ' "$out/host1.log"; }
    ones_at_loss=$(ones)
    wait_until 20 "host 1 stepping at world 1" '[ "$(ones)" -gt "$ones_at_loss" ]'
    kill -CONT "$launcher2"
    for h in 1 2; do
      wait "${pids[$((h - 1))]}"
      rc=$?
      [ $rc = 0 ] || fail "host $h's launcher exited $rc"
    done
    grep -q "with the workers in place" "$out/host1.log" || fail "host 1 did not keep its worker"
    grep -q "^group pid=$worker1 round=[1-9][0-9]* rank=0 world=1\$" "$out/host1.log" ||
      fail "host 1's worker $worker1 formed no group of 1 in a later round"
    for h in 1 2; do
      worker=$([ $h = 1 ] && echo "$worker1" || echo "$worker2")
      last=$(grep "^group pid=" "$out/host$h.log" | tail -1)
      [[ "$last" =~ ^group\ pid=$worker\ round=([0-9]+)\ rank=[01]\ world=2$ ]] &&
        [ "${BASH_REMATCH[1]}" -gt "$base" ] ||
        fail "host $h's worker $worker formed no group of 2 after host 2 came back"
      grep -q "^done pid=$worker " "$out/host$h.log" || fail "host $h's worker $worker did not finish (restarted?)"
    done
    assert_done_implied $steps 1 2
    assert_clean 1 2
    echo "host 2's launcher SIGSTOPped: named lost by host 1 ${ms} ms later (bound ${bound_ms} ms +" \
      "${interval_ms} ms interval + ${slack_ms} ms slack); host 1's worker went on in place; host 2," \
      "SIGCONTinued, came back with its worker; both finished with value $implied, what the steps imply: ok"
    exit 0
    ;;
esac

wait "${pids[0]}"
rc=$?
[ $rc = 0 ] || fail "host 1's launcher exited $rc"
[ "$mode" = hog ] || { wait "$launcher2"; rc2=$?; }
[ $rc2 = 0 ] || fail "host 2's launcher exited $rc2"
! grep -q "lost" "$out/host1.log" "$out/host2.log" || fail "$what: a loss: $(grep -h "lost" "$out"/host*.log | head -1)"
for h in 1 2; do
  worker=$([ $h = 1 ] && echo "$worker1" || echo "$worker2")
  last=$(grep "^group pid=" "$out/host$h.log" | tail -1)
  [[ "$last" =~ ^group\ pid=$worker\ round=$base\ rank=[01]\ world=2$ ]] ||
    fail "host $h's worker $worker did not stay in round $base's group of 2: '$last' last"
  grep -q "^done pid=$worker " "$out/host$h.log" || fail "host $h's worker $worker did not finish (restarted?)"
done
short=$(cat "$out"/host*.log | awk -v t="$since" '/^elastic_job step / && $NF >= t && $7 != 2' | head -1)
[ -z "$short" ] || fail "a step after the $mode began ran short of world 2: $short"
assert_done_implied $steps 1 2
assert_clean 1 2
echo "$what: kept its place (no loss, no new round after round $base, the same worker PIDs $worker1 and" \
  "$worker2, every step since at world 2); both finished with value $implied, what the steps imply: ok"
