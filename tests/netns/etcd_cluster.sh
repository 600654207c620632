# etcd_cluster.sh: a 3-member etcd cluster on the emulated hosts 1..3 of elastic_harness.sh, one
# member per host (its data in the host's own /dev/shm; elections sped up: heartbeat 50 ms,
# election 500 ms), and ddp-launch --rdzv-backend etcd with all three members as endpoints.
# Sourced by bash after elastic_harness.sh and harness_up (uses $hosts, $p, $out, $run_id, $pids,
# $bin). Used by hosts_etcd_test.sh and hosts_etcd_cnn_test.sh. Contract:
#
#   $members, $cluster   the client endpoints (10.78.0.H:2379) and etcd's --initial-cluster.
#   ${member[H]}         the pid of host H's member; ${launcher[H]} of host H's last launcher.
#   etcd_up              members 1..3 started, then waits (30 s) for a healthy cluster.
#   start_member H       host H's member in the background (log $out/etcdH.log), pid in $pids.
#   etcd_healthy         etcdctl endpoint health of all three members holds.
#   launch_etcd H ARGS   ddp-launch --nnodes 2:3 on host H over etcd (run id $run_id, --rdzv-conf
#                        $conf, --monitor-interval 0.1, --shutdown-timeout 2), then ARGS; output
#                        appended to $out/hostH.log, its pid in ${launcher[H]} and $pids.
#   power_off H          every process in host H's namespaces SIGKILLed (launcher, workers, etcd
#                        member) but the namespaces' holder, then its link down.
#   stop_members H...    those members SIGKILLed and their data removed, so /dev/shm is clean.
members=10.78.0.1:2379,10.78.0.2:2379,10.78.0.3:2379
cluster=h1=http://10.78.0.1:2380,h2=http://10.78.0.2:2380,h3=http://10.78.0.3:2380
data=/dev/shm/etcd-$run_id
declare -A member launcher

etcd_up() {
  local h
  for h in 1 2 3; do start_member "$h"; done
  wait_until 30 "the etcd cluster healthy" etcd_healthy
}

start_member() {
  local h=$1 ip=10.78.0.$1
  $hosts run "$p" "$h" /usr/bin/etcd --name "h$h" --data-dir "$data" --listen-client-urls "http://$ip:2379" \
    --advertise-client-urls "http://$ip:2379" --listen-peer-urls "http://$ip:2380" \
    --initial-advertise-peer-urls "http://$ip:2380" --initial-cluster "$cluster" --initial-cluster-state new \
    --initial-cluster-token "$run_id" --heartbeat-interval 50 --election-timeout 500 > "$out/etcd$h.log" 2>&1 &
  member[$h]=$!
  pids+=($!)
}

etcd_healthy() {
  $hosts run "$p" 2 env ETCDCTL_API=3 etcdctl --endpoints "$members" --command-timeout 1s endpoint health \
    > /dev/null 2>&1
}

launch_etcd() {
  local h=$1
  shift
  $hosts run "$p" "$h" env GLOO_SOCKET_IFNAME=veth0 "$bin/ddp-launch" --nnodes 2:3 --rdzv-backend etcd \
    --rdzv-endpoint "$members" --rdzv-id "$run_id" --local-addr "10.78.0.$h" --monitor-interval 0.1 \
    --shutdown-timeout 2 --rdzv-conf "$conf" "$@" >> "$out/host$h.log" 2>&1 &
  launcher[$h]=$!
  pids+=($!)
}

power_off() {
  local h=$1 holder pid
  holder=$(cat "/run/ddp-hosts/$p/h$h.pid")
  for pid in $(ip netns pids "${p}n$h"); do
    [ "$pid" = "$holder" ] || kill -KILL "$pid" 2> /dev/null
  done
  $hosts link "$p" "$h" down
}

stop_members() {
  local h
  for h in "$@"; do
    kill -KILL "${member[$h]}" 2> /dev/null
    wait "${member[$h]}" 2> /dev/null
    $hosts run "$p" "$h" rm -rf "$data"
  done
}
