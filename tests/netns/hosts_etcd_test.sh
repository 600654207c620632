#!/usr/bin/env bash
# --rdzv-backend etcd across 3 emulated hosts (tests/netns/hosts.sh, elastic_harness.sh): each host
# runs a member of one 3-member etcd cluster (etcd_cluster.sh) and a launcher, --nnodes 2:3 with
# all three members as --rdzv-endpoint, heartbeats 0.5 s x 4. Host 1 starts first, so it is node 0
# of round 0.
#   restart   host 1 "powered off" mid-job (its launcher, worker and etcd member SIGKILLed, its
#             link down): hosts 2 and 3 go on at world 2 with new workers of an unmodified
#             PyTorch gloo script (tests/netns/gloo_steps.py, which checks every all_reduce) and
#             finish; no restart counted. Skipped (77) where /usr/bin/python3 has no torch.
#   in-place  the same with ddp_elastic_probe (ddp::elastic, its store etcd itself through
#             DDP_STORE=etcd://...): hosts 2 and 3 keep their workers (same PIDs) in a group of 2
#             and finish, each with the committed value its steps imply (3 per step at world 3,
#             2 per step at world 2, from the step it resumed at).
#   quorum    two etcd members lost (hosts 2 and 3's): every launcher exits 122 naming etcd's
#             members, within the bound plus the shutdown grace (asserted loosely: 30 s).
#   back      in-place, then host 1 comes back (link up, its etcd member restarted on the same
#             data dir, its launcher started again with the same flags): world 3 again, hosts 2
#             and 3 keep their workers, host 1's new one gets the state; every rank finishes with
#             the value the steps imply (each step's world, the last time that step was printed).
#   blip      etcd loses its quorum for less than the bound (hosts 2 and 3's members SIGSTOPped
#             1 s, then SIGCONTinued; a read at host 1's member fails meanwhile; heartbeats 1 s x 5
#             here): the job goes on and finishes, every launcher exits 0, the value the steps imply.
# Each: no process of the job and nothing in /dev/shm left on the hosts that live. Prints the
# time from the power-off to the survivors' first step at world 2. Exit 77 (Skipped) when not
# root, a tool is missing, or /usr/bin/etcd is.
# usage: hosts_etcd_test.sh <bin dir> <tests bin dir> <source dir> restart|in-place|quorum|back|blip
set -uo pipefail
bin=$1 tbin=$2 src=$3 mode=$4
. "$src/tests/netns/elastic_harness.sh"
[ -x /usr/bin/etcd ] || { echo "no /usr/bin/etcd: skipped"; exit 77; }
if [ "$mode" = restart ] && ! /usr/bin/python3 -c 'import torch.distributed' 2> /dev/null; then
  echo "no torch in /usr/bin/python3: skipped"
  exit 77
fi
harness_up "etcd-$mode" 3
conf=keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=1
# blip: a 5 s bound for a 1 s outage; etcd's election after it and a loaded machine (ASan, the
# cluster tests and a build beside) take the rest, and 2 s left a launcher short of it.
[ "$mode" = blip ] && conf=keep_alive_interval=1,keep_alive_max_attempt=5,last_call_timeout=1
. "$src/tests/netns/etcd_cluster.sh"
etcd_up

case $mode in
  restart) job=(/usr/bin/python3 "$src/tests/netns/gloo_steps.py" 600 0.02) ;;
  in-place) job=("$tbin/ddp_elastic_probe" 400 20 --print-steps) ;;
  quorum) job=("$tbin/ddp_elastic_probe" 0 20) ;;
  back) job=("$tbin/ddp_elastic_probe" 1000 20 --print-steps) ;;
  blip) job=("$tbin/ddp_elastic_probe" 300 20 --print-steps) ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
launch_etcd 1 "${job[@]}"
wait_until 20 "host 1 joining round 0" 'grep -q "joining round 0" "$out/host1.log"'
launch_etcd 2 "${job[@]}"
launch_etcd 3 "${job[@]}"
groups_of() { cat "$out"/host*.log 2> /dev/null | grep -c "^group pid=.* world=$1"; }
wait_until 60 "a group of 3" '[ "$(groups_of 3)" = 3 ]'
grep -q "round 0: node 0/3" "$out/host1.log" || fail "host 1 is not node 0 of round 0"

# Every launcher exited 0 and each host's worker finished STEPS with the value the steps imply.
finished_with_implied() {
  local steps=$1 h rc
  for h in 1 2 3; do
    wait "${launcher[$h]}"
    rc=$?
    [ $rc = 0 ] || fail "host $h's launcher exited $rc"
  done
  assert_done_implied "$steps" 1 2 3
}

if [ "$mode" = blip ]; then
  wait_until 20 "a step at world 3" 'grep -q "^elastic_job step 50 .* world 3 " "$out/host2.log"'
  kill -STOP "${member[2]}" "${member[3]}"
  stopped=$(date +%s.%N)
  $hosts run "$p" 1 env ETCDCTL_API=3 etcdctl --endpoints 10.78.0.1:2379 --command-timeout 0.3s \
    endpoint health > /dev/null 2>&1 && { kill -CONT "${member[2]}" "${member[3]}"; fail "etcd kept its quorum"; }
  sleep "$(awk -v a="$stopped" -v b="$(date +%s.%N)" 'BEGIN { d = 1 - (b - a); print (d > 0 ? d : 0) }')"
  kill -CONT "${member[2]}" "${member[3]}"
  finished_with_implied 300
  rounds=$(grep -c "joining round" "$out/host2.log")
  stop_members 1 2 3
  assert_clean 1 2 3
  echo "etcd without quorum for 1 s (bound 5 s): every launcher exited 0, every worker finished with the" \
    "value its steps imply; host 2 joined $rounds round(s): ok"
  exit 0
fi

if [ "$mode" = quorum ]; then
  stop_members 2 3
  start=$SECONDS
  for h in 1 2 3; do
    wait "${launcher[$h]}"
    rc=$?
    [ $rc = 122 ] || fail "host $h's launcher exited $rc, not 122"
    grep -q "lost the job's rendezvous store at etcd at .*10.78.0.1:2379" "$out/host$h.log" ||
      fail "host $h did not name etcd's members"
    grep -q "etcd lost its quorum" "$out/host$h.log" || fail "host $h did not say etcd lost its quorum"
  done
  took=$((SECONDS - start))
  [ $took -le 30 ] || fail "the launchers took $took s to end"
  stop_members 1
  assert_clean 1 2 3
  echo "etcd lost 2 of its 3 members: every launcher exited 122 naming etcd, within ${took} s: ok"
  exit 0
fi

if [ "$mode" = back ]; then
  wait_until 20 "a step at world 3" 'grep -q "^elastic_job step 50 .* world 3 " "$out/host2.log"'
  power_off 1
  off=$(date +%s.%N)
  at2='^elastic_job step .* world 2 '
  wait_until 60 "hosts 2 and 3 stepping at world 2" 'grep -q "$at2" "$out/host2.log" && grep -q "$at2" "$out/host3.log"'
  $hosts link "$p" 1 up
  start_member 1
  wait_until 30 "host 1's etcd member back in a healthy cluster" etcd_healthy
  back=$(date +%s.%N)
  launch_etcd 1 "${job[@]}"
  finished_with_implied 1000
  for h in 2 3; do
    pid=$(grep -o "^group pid=[0-9]*" "$out/host$h.log" | head -1 | cut -d= -f2)
    grep -q "^group pid=$pid round=[1-9][0-9]* rank=[01] world=2" "$out/host$h.log" ||
      fail "host $h's worker $pid formed no group of 2"
    grep -q "^group pid=$pid round=[1-9][0-9]* rank=[0-2] world=3" "$out/host$h.log" ||
      fail "host $h's worker $pid formed no group of 3 after host 1 came back"
    grep -q "^done pid=$pid " "$out/host$h.log" || fail "host $h's worker $pid did not finish (restarted?)"
    ! grep -q "restarting the workers" "$out/host$h.log" || fail "host $h counted a restart"
  done
  new=$(grep -o "^done pid=[0-9]*" "$out/host1.log" | cut -d= -f2)
  grep -q "^group pid=$new round=[1-9][0-9]* rank=[0-2] world=3" "$out/host1.log" ||
    fail "host 1's new worker $new formed no group of 3 in a later round"
  t2=$(cat "$out/host2.log" "$out/host3.log" | grep "$at2" | awk '{print $NF}' | sort -n | head -1)
  t3=$(grep "^elastic_job step .* world 3 .* t " "$out/host1.log" | awk -v b="$back" '$NF > b {print $NF}' | head -1)
  ms2=$(awk -v a="$off" -v b="$t2" 'BEGIN { printf "%d", (b - a) * 1000 }')
  ms3=$(awk -v a="$back" -v b="$t3" 'BEGIN { printf "%d", (b - a) * 1000 }')
  stop_members 1 2 3
  assert_clean 1 2 3
  echo "host 1 powered off, then back: world 2 in place ${ms2} ms after the power-off, world 3 again" \
    "${ms3} ms after its launcher started; every rank finished with the value its steps imply: ok"
  exit 0
fi

before2=$(grep -o "^group pid=[0-9]*" "$out/host2.log" | head -1 | cut -d= -f2)
before3=$(grep -o "^group pid=[0-9]*" "$out/host3.log" | head -1 | cut -d= -f2)
off=$(date +%s.%N)
power_off 1
for h in 2 3; do
  wait "${launcher[$h]}"
  rc=$?
  [ $rc = 0 ] || fail "host $h's launcher exited $rc"
  grep -q "node 0 (${p}h1) lost: no heartbeat" "$out/host$h.log" || fail "host $h did not name host 1 (node 0) lost"
  ! grep -q "restarting the workers" "$out/host$h.log" || fail "host $h counted the loss as a restart"
done
if [ "$mode" = restart ]; then
  done_lines=$(cat "$out/host2.log" "$out/host3.log" | grep -c "^done pid=[0-9]* rank=[01] world=2 steps=600")
  [ "$done_lines" = 2 ] || fail "$done_lines of 2 workers finished at world 2"
  first=$(cat "$out/host2.log" "$out/host3.log" | grep "^first step .* world=2 " | sed 's/.* t=//' | sort -n | head -1)
else
  for h in 2 3; do
    log=$out/host$h.log
    before=$([ $h = 2 ] && echo "$before2" || echo "$before3")
    grep -q "with the workers in place" "$log" || fail "host $h did not keep its worker"
    grep -q "^group pid=$before round=[1-9][0-9]* rank=[01] world=2" "$log" ||
      fail "host $h's worker $before formed no group of 2 in a later round"
    resumed=$(grep "^elastic_job step .* world 2 " "$log" | head -1 | awk '{print $3}')
    [ -n "$resumed" ] || fail "host $h's worker took no step at world 2"
    want=$((3 * (resumed - 1) + 2 * (400 - resumed + 1)))
    grep -q "^done pid=$before value=$want steps=400" "$log" ||
      fail "host $h's worker did not finish with value $want (resumed at step $resumed): $(grep '^done' "$log")"
  done
  first=$(cat "$out/host2.log" "$out/host3.log" | grep "^elastic_job step .* world 2 " | awk '{print $NF}' | sort -n | head -1)
fi
ms=$(awk -v a="$off" -v b="$first" 'BEGIN { printf "%d", (b - a) * 1000 }')
stop_members 2 3
assert_clean 2 3
echo "host 1 (node 0, with an etcd member) powered off: hosts 2 and 3 went on at world 2 ($mode) and finished;" \
  "${ms} ms from the power-off to their first step at world 2: ok"
