#!/usr/bin/env bash
# ddp-launch under a real Slurm (tests/cluster/slurm_cluster.sh: slurmctld and one slurmd per
# emulated host, 2 hosts), one job per run, submitted from host 1 with examples/slurm/ddp.sbatch
# (srun --ntasks-per-node=1 ddp-launch --nproc-per-node 2 tests/cluster/worker.sh ...):
#   ok         the 4 workers see RANK/WORLD_SIZE/MASTER_ADDR/GROUP_RANK from Slurm's variables and
#              meet in the launcher's store (ddp_store_probe); the job ends COMPLETED, exit 0
#   fail       rank 3 (host 2) exits 3: host 2's launcher exits 3, host 1's 122 (the other node
#              failed), so srun and the job 122 (Slurm keeps the highest): FAILED, 122:0; the
#              output names rank 3 and code 3; ranks 0-2 got SIGTERM; no process is left
#   cancel     scancel once every worker waits: CANCELLED, every worker got SIGTERM, none is left
#   timelimit  --time=1 (Slurm's least: a minute, checked every 30 s or so; label "cluster"):
#              TIMEOUT, every worker got SIGTERM, none is left
#   nodekill   host 2 loses power once every worker waits (every process on it SIGKILLed, slurmd
#              included): host 1's launcher names node 1 lost by heartbeat, its workers get SIGTERM
#              and none is left once Slurm sets host 2 DOWN (SlurmdTimeout 5 s): NODE_FAIL
#   tasks      srun -n 2 on one node: ddp-launch refuses (exit 2) naming --ntasks-per-node=1; and
#              ddp-launch in the batch script of -N2, outside srun: one node (nothing inferred)
#   etcd       3 hosts, examples/slurm/etcd_job.sbatch: an etcd member per host, then the
#              launchers (--rdzv-backend etcd, --nnodes 2:3); the 6 workers meet in etcd
#              (DDP_STORE=etcd://...); COMPLETED, exit 0, no process left (the members stopped)
#              and no member's data left in /tmp
# Exit 77 (Skipped) when not root or Slurm/munge are not installed.
# usage: slurm_test.sh <bin dir> <tests dir> <source dir> ok|fail|cancel|timelimit|nodekill|tasks|etcd
set -uo pipefail
bin=$1 tests=$2 src=$3 job=$4
cluster="sh $src/tests/cluster/slurm_cluster.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
for t in slurmctld slurmd munged sbatch; do
  command -v $t > /dev/null || { echo "$t not installed (scripts/install-deps.sh)"; exit 77; }
done
n=2 p=ddpM$$x6
[ "$job" = etcd ] && n=3
if [ "$job" = etcd ] && ! command -v etcd > /dev/null; then echo "etcd not installed: skipped"; exit 77; fi
# A lost node is set DOWN after SlurmdTimeout: short for the job that loses one.
[ "$job" = nodekill ] && export SLURMD_TIMEOUT=5
$cluster sweep
start=$(date +%s)
$cluster up "$p" "$n" || { rc=$?; [ $rc = 77 ] && echo "slurm_cluster.sh: skipped (tools missing)"; exit $rc; }
echo "cluster up in $(($(date +%s) - start)) s"
# The hosts share this file system (as a cluster shares NFS): the job's output and the workers'
# files land here.
out=$(mktemp -d)
chmod 755 "$out"
trap '$cluster down "$p" "$n"; rm -rf "$out"' EXIT
fail() {
  echo "FAIL ($job): $*"
  for f in "$out"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 40 "$f"; }; done
  $cluster logs "$p"
  exit 1
}
on1() { $cluster run "$p" 1 "$@"; }
# sbatch hands the submitter's environment to the job: srun and the workers find ddp-launch here.
export PATH=$bin:$PATH

# FIELD of job ID in `scontrol show job` (JobState, ExitCode, ...).
field() { on1 scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# sbatch of the example script with the options in sbatch_opts and the worker's mode; the job id
# in $id.
sbatch_opts=()
script=$src/examples/slurm/ddp.sbatch
[ "$job" = etcd ] && script=$src/examples/slurm/etcd_job.sbatch
submit() {
  id=$(on1 sbatch --parsable -o "$out/job.out" "${sbatch_opts[@]}" "$script" \
    bash "$src/tests/cluster/worker.sh" "$1" "$out" "$tests/ddp_store_probe") || fail "sbatch: $id"
}
# Waits until job ID has ended (a state other than pending, running or completing: Slurm has
# ended its processes), for S seconds at most. (sbatch --wait polls at 2, 8, then 32 s.)
wait_end() {
  local state
  for _ in $(seq $(($2 * 10))); do
    state=$(field "$1" JobState)
    case "$state" in PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | "") ;; *) return 0 ;; esac
    sleep 0.1
  done
  fail "job $1 still $state after $2 s"
}
# Waits (30 s at most) until every one of COUNT workers blocks in wait_term.
wait_workers() {
  for _ in $(seq 300); do
    [ "$(ls "$out"/pid.* 2> /dev/null | wc -l)" -ge "$1" ] && return 0
    sleep 0.1
  done
  fail "only $(ls "$out"/pid.* 2> /dev/null | wc -l) of $1 workers started"
}
# Every worker of RANKS got SIGTERM (its handler ran, on its own host), and no process of the job
# is left on any host once Slurm has ended it (waits out KillWait at most: Slurm's SIGKILL).
check_stopped() {
  for r in "$@"; do
    [ -f "$out/term.$r" ] || fail "rank $r did not get SIGTERM"
    [ "$(cat "$out/term.$r")" = "${p}h$((r / 2 + 1))" ] || fail "rank $r ran on $(cat "$out/term.$r")"
  done
  local left=""
  for _ in $(seq 150); do
    left=$($cluster procs "$p" "$n")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "processes left on the hosts: $left"
}

case "$job" in
  ok)
    submit ok
    wait_end "$id" 60
    [ "$(field "$id" JobState)" = COMPLETED ] || fail "job $id ended $(field "$id" JobState)"
    [ "$(field "$id" ExitCode)" = 0:0 ] || fail "job $id exit code $(field "$id" ExitCode)"
    for r in 0 1 2 3; do
      node=$((r / 2))
      want="worker rank=$r local_rank=$((r % 2)) world=4 local_world=2 node=$node nodes=2 master=${p}h1 host=${p}h$((node + 1)) master_ip=10.78.0.1"
      grep -qF "$want" "$out/job.out" || fail "no line '$want'"
      grep -qF "rank $r of 4: all 4 ranks met in the store" "$out/job.out" || fail "rank $r did not meet the others in the store"
    done
    ;;
  fail)
    submit fail
    wait_end "$id" 60
    [ "$(field "$id" JobState)" = FAILED ] || fail "job $id ended $(field "$id" JobState)"
    # The failing node's launcher exits 3, the other 122 (docs/launcher.md); srun, so the job, exits
    # with the highest of its tasks' codes: 122. The root cause is in the output, named by both.
    [ "$(field "$id" ExitCode)" = 122:0 ] || fail "job $id exit code $(field "$id" ExitCode), not 122:0"
    grep -q "srun: error: ${p}h2: task 1: Exited with exit code 3" "$out/job.out" ||
      fail "srun did not record host 2's launcher exiting 3"
    grep -q "srun: error: ${p}h1: task 0: Exited with exit code 122" "$out/job.out" ||
      fail "srun did not record host 1's launcher exiting 122"
    grep -q "exitcode  : 3" "$out/job.out" || fail "no failure summary naming the worker's exit code 3"
    grep -q "another node did: failed: node 1 (${p}h2): rank 3 .* exited with code 3" "$out/job.out" ||
      fail "host 1's launcher did not name rank 3 on host 2"
    [ -f "$out/term.3" ] && fail "the failed rank 3 got SIGTERM"
    check_stopped 0 1 2
    ;;
  cancel | timelimit)
    [ "$job" = timelimit ] && sbatch_opts=(--time=1)
    submit wait
    wait_workers 4
    if [ "$job" = cancel ]; then on1 scancel "$id" || fail "scancel $id"; fi
    wait_end "$id" 150
    want=CANCELLED
    [ "$job" = timelimit ] && want=TIMEOUT
    [ "$(field "$id" JobState)" = $want ] || fail "job $id ended $(field "$id" JobState), not $want"
    check_stopped 0 1 2 3
    echo "job $id: $want, exit code $(field "$id" ExitCode)"
    ;;
  nodekill)
    # Slurm requeues a batch job whose node failed (JobRequeue=1): --no-requeue to see it end.
    sbatch_opts=(--no-requeue)
    submit wait
    wait_workers 4
    rm -f "$out"/pid.*
    crashed=$(date +%s%N)
    $cluster crash "$p" 2
    # Host 1's launcher stops hearing host 2's within the heartbeat's bound (5 s by default), names
    # it, and stops its own workers; 30 s is a hang guard, not a timing.
    for _ in $(seq 300); do
      [ -f "$out/term.0" ] && [ -f "$out/term.1" ] && break
      sleep 0.1
    done
    echo "host 1's workers got SIGTERM $((($(date +%s%N) - crashed) / 1000000)) ms after host 2 was lost"
    grep -q "node 1 (${p}h2) lost: no heartbeat for" "$out/job.out" || fail "host 1's launcher did not name host 2 as lost"
    # srun waits for host 2's task until slurmctld sets the silent node DOWN (SlurmdTimeout) and
    # ends the job NODE_FAIL; then nothing of the job is left on host 1.
    wait_end "$id" 60
    [ "$(field "$id" JobState)" = NODE_FAIL ] || fail "job $id ended $(field "$id" JobState), not NODE_FAIL"
    check_stopped 0 1
    echo "job $id: NODE_FAIL, exit code $(field "$id" ExitCode)"
    ;;
  tasks)
    on1 srun -N1 -n2 -o "$out/job.out" ddp-launch --nproc-per-node 2 \
      bash "$src/tests/cluster/worker.sh" ok "$out" "$tests/ddp_store_probe"
    rc=$?
    [ $rc = 2 ] || fail "srun -n2 on one node exited $rc, not 2"
    grep -q "srun started 2 tasks on 1 node(s)" "$out/job.out" || fail "no error naming the 2 tasks"
    grep -qF -- "--ntasks-per-node=1" "$out/job.out" || fail "the error does not say --ntasks-per-node=1"
    [ -f "$out/pid.0" ] && fail "a worker started"
    # ddp-launch in the batch script itself (no srun) of a 2-node allocation: Slurm exports
    # SLURM_NNODES=2 and SLURM_NODEID=0 there, but no step: one node, 2 workers, on host 1.
    id=$(on1 sbatch --parsable -N2 -o "$out/batch.out" --wrap "ddp-launch --nproc-per-node 2 \
      bash $src/tests/cluster/worker.sh ok $out $tests/ddp_store_probe") || fail "sbatch: $id"
    wait_end "$id" 60
    [ "$(field "$id" JobState)" = COMPLETED ] || fail "the batch script's job $id ended $(field "$id" JobState)"
    for r in 0 1; do
      want="worker rank=$r local_rank=$r world=2 local_world=2 node=0 nodes=1 master=127.0.0.1 host=${p}h1"
      grep -qF "$want" "$out/batch.out" || fail "in the batch script: no line '$want'"
    done
    ;;
  etcd)
    submit ok
    wait_end "$id" 90
    [ "$(field "$id" JobState)" = COMPLETED ] || fail "job $id ended $(field "$id" JobState)"
    [ "$(field "$id" ExitCode)" = 0:0 ] || fail "job $id exit code $(field "$id" ExitCode)"
    for r in 0 1 2 3 4 5; do
      grep -qF "rank $r of 6: all 6 ranks met in the store at etcd://" "$out/job.out" ||
        fail "rank $r did not meet the others in etcd"
    done
    grep -q "round 0: node 0/3" "$out/job.out" || fail "no round of 3 nodes"
    left=""
    for _ in $(seq 150); do
      left=$($cluster procs "$p" "$n")
      [ -z "$left" ] && break
      sleep 0.1
    done
    [ -z "$left" ] || fail "processes left on the hosts: $left"
    leftover=$(ls -d /tmp/etcd-"$id"-"$p"h* 2> /dev/null)
    [ -z "$leftover" ] || fail "the etcd members' data was left: $leftover"
    ;;
  *) echo "job: ok, fail, cancel, timelimit, nodekill, tasks or etcd"; exit 2 ;;
esac
echo "== the job's output"
cat "$out/job.out"
echo "$job: passed in $(($(date +%s) - start)) s"
