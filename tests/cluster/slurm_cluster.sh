#!/bin/sh
# slurm_cluster.sh: a real Slurm cluster (Debian's slurm-wlm) on emulated hosts. N hosts from
# tests/netns/hosts.sh (each its own network, IPC, mount and UTS namespace on one bridge, hostname
# PREFIXhK, address 10.78.0.K), each resolving every host's name through its own /etc/hosts (a bind
# mount inside the host's mount namespace); one munged with a key generated here; slurmctld on
# host 1; one slurmd per host, named after its hostname. No cgroups (proctrack/linuxproc,
# task/none, jobacct_gather/none) and no accounting database (accounting_storage/none: sacct has
# nothing; `scontrol show job` keeps a finished job's JobState and ExitCode for MinJobAge seconds).
# KillWait (SIGTERM to SIGKILL at scancel or a time limit) is KILL_WAIT seconds (default 10);
# SlurmdTimeout (a silent node is set DOWN, its jobs NODE_FAIL) SLURMD_TIMEOUT (default 300).
# Everything lives under /run/ddp-hosts/PREFIX.slurm (config, key, spool, logs).
#
#   slurm_cluster.sh up PREFIX N          the hosts, munged, slurmctld and the slurmds; returns once
#                                         every node is idle (exit 1 with the daemons' logs if not
#                                         within 30 s, after taking down what it made)
#   slurm_cluster.sh run PREFIX K CMD...  CMD on host K with SLURM_CONF set (sbatch, srun, scontrol)
#   slurm_cluster.sh procs PREFIX N       every process on the hosts but the namespace holders and
#                                         the Slurm daemons, as "hK PID COMMAND" lines
#   slurm_cluster.sh logs PREFIX          the daemons' logs' tails, to stdout
#   slurm_cluster.sh crash PREFIX K       every process on host K SIGKILLed, its slurmd included (the
#                                         host lost power); the namespace holder stays for `down`
#   slurm_cluster.sh down PREFIX N        every process on the hosts SIGKILLed (daemons, anything a
#                                         job left), munged stopped, hosts and state removed; never fails
#   slurm_cluster.sh sweep                removes clusters named ddpM<pid>x<n>* whose <pid> is gone
#
# Exit codes: 0 done; 2 usage; 77 not root or a tool missing (Slurm, munge, iproute2: tests map
# it to Skipped); 1 other failures.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
hosts="sh $here/../netns/hosts.sh"
base=/run/ddp-hosts
usage() { echo "usage: $0 up PREFIX N | run PREFIX K CMD... | procs PREFIX N | crash PREFIX K | logs PREFIX | down PREFIX N | sweep" >&2; exit 2; }
need() {
  [ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: needs root (namespaces)" >&2; exit 77; }
  for t in slurmctld slurmd sbatch srun scontrol sinfo munged ip unshare nsenter; do
    command -v "$t" > /dev/null || { echo "slurm_cluster.sh: needs $t (scripts/install-deps.sh with DDP_CLUSTER_DEPS=1)" >&2; exit 77; }
  done
}

# slurm.conf for hosts 1..N of PREFIX in DIR.
write_conf() {
  p=$1 n=$2 d=$3
  cat > "$d/slurm.conf" << EOF
ClusterName=ddp
SlurmctldHost=${p}h1(10.78.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.%n.log
KillWait=${KILL_WAIT:-10}
SlurmdTimeout=${SLURMD_TIMEOUT:-300}
MinJobAge=600
EOF
  k=1
  while [ "$k" -le "$n" ]; do
    echo "NodeName=${p}h$k NodeAddr=10.78.0.$k CPUs=4 State=UNKNOWN" >> "$d/slurm.conf"
    k=$((k + 1))
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$d/slurm.conf"
  # Slurm 22.05's slurmd loads a cgroup plugin whatever the task and proctrack plugins are; its
  # autodetection fails where /sys/fs/cgroup is a tmpfs it cannot classify. v1 is loaded, unused.
  echo "CgroupPlugin=cgroup/v1" > "$d/cgroup.conf"
}

# munged with a fresh key, its socket in DIR/munge (munged wants the socket's directories
# world-searchable and the key readable by root only).
start_munge() {
  d=$1
  mkdir -p "$d/munge" "$d/munge-key"
  chmod 755 "$d" "$d/munge"
  chmod 700 "$d/munge-key"
  dd if=/dev/urandom of="$d/munge-key/key" bs=1024 count=1 2> /dev/null
  chmod 400 "$d/munge-key/key"
  munged --key-file="$d/munge-key/key" --socket="$d/munge/socket" --pid-file="$d/munge/pid" \
    --log-file="$d/log/munged.log" --seed-file="$d/munge-key/seed"
}

# Waits (30 s at most) until sinfo shows N idle nodes.
wait_idle() {
  p=$1 n=$2 d=$3
  i=0
  while :; do
    idle=$(SLURM_CONF="$d/slurm.conf" $hosts run "$p" 1 sinfo -h -N -t idle -o %N 2> /dev/null | grep -c . || true)
    [ "$idle" = "$n" ] && return 0
    i=$((i + 1))
    [ $i -le 300 ] || { echo "slurm_cluster.sh: $idle of $n nodes idle after 30 s" >&2; return 1; }
    sleep 0.1
  done
}

up() {
  p=$1 n=$2 d=$base/$p.slurm
  $hosts up "$p" "$n" || return 1
  mkdir -p "$d/state" "$d/log" || return 1
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$d/hosts"
  k=1
  while [ "$k" -le "$n" ]; do
    echo "10.78.0.$k ${p}h$k" >> "$d/hosts"
    mkdir -p "$d/spool/${p}h$k"
    k=$((k + 1))
  done
  write_conf "$p" "$n" "$d"
  start_munge "$d" || return 1
  k=1
  while [ "$k" -le "$n" ]; do
    $hosts run "$p" "$k" mount --bind "$d/hosts" /etc/hosts || return 1
    k=$((k + 1))
  done
  $hosts run "$p" 1 slurmctld -f "$d/slurm.conf" || return 1
  k=1
  while [ "$k" -le "$n" ]; do
    $hosts run "$p" "$k" slurmd -f "$d/slurm.conf" -N "${p}h$k" || return 1
    k=$((k + 1))
  done
  wait_idle "$p" "$n" "$d"
}

logs() {
  for f in "$base/$1.slurm"/log/*; do
    [ -f "$f" ] || continue
    echo "== $f"
    tail -n 30 "$f"
  done
}

# PIDs on host K (its network namespace), holder and Slurm daemons left out.
host_pids() {
  p=$1 k=$2
  holder=$(cat "$base/$p/h$k.pid" 2> /dev/null || echo none)
  for pid in $(ip netns pids "${p}n$k" 2> /dev/null); do
    [ "$pid" = "$holder" ] && continue
    case "$(cat "/proc/$pid/comm" 2> /dev/null)" in slurmctld | slurmscriptd | slurmd) continue ;; esac
    echo "$pid"
  done
}

# SIGKILLs every process on host K but its namespace holder.
crash() {
  p=$1 k=$2
  for pid in $(ip netns pids "${p}n$k" 2> /dev/null); do
    [ "$pid" = "$(cat "$base/$p/h$k.pid" 2> /dev/null)" ] || kill -KILL "$pid" 2> /dev/null || true
  done
}

down() {
  p=$1 n=$2 d=$base/$p.slurm
  k=1
  while [ "$k" -le "$n" ]; do
    crash "$p" "$k"
    k=$((k + 1))
  done
  [ -s "$d/munge/pid" ] && kill "$(cat "$d/munge/pid")" 2> /dev/null || true
  $hosts down "$p" "$n" || true
  rm -rf "${d:?}"
}

cmd=${1:-}
case "$cmd" in
  up)
    [ $# -eq 3 ] || usage
    need
    if ! up "$2" "$3"; then
      logs "$2" >&2
      down "$2" "$3"
      exit 1
    fi
    ;;
  run)
    [ $# -ge 4 ] || usage
    p=$2 k=$3
    shift 3
    SLURM_CONF=$base/$p.slurm/slurm.conf exec $hosts run "$p" "$k" "$@"
    ;;
  procs)
    [ $# -eq 3 ] || usage
    k=1
    while [ "$k" -le "$3" ]; do
      for pid in $(host_pids "$2" "$k"); do
        echo "h$k $pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null)"
      done
      k=$((k + 1))
    done
    ;;
  crash)
    [ $# -eq 3 ] || usage
    crash "$2" "$3"
    ;;
  logs)
    [ $# -eq 2 ] || usage
    logs "$2"
    ;;
  down)
    [ $# -eq 3 ] || usage
    down "$2" "$3"
    ;;
  sweep)
    need
    for d in "$base"/ddpM*.slurm; do
      [ -d "$d" ] || continue
      p=$(basename "$d" .slurm)
      pid=$(echo "$p" | sed -E 's/^ddpM([0-9]+)x.*/\1/')
      [ -d "/proc/$pid" ] && continue
      n=0
      for h in "$d"/spool/*; do [ -d "$h" ] && n=$((n + 1)); done
      down "$p" "$n"
    done
    $hosts sweep
    ;;
  *) usage ;;
esac
