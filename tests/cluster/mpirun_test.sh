#!/usr/bin/env bash
# ddp-launch under Open MPI's mpirun across 2 emulated hosts (tests/netns/hosts.sh), one launcher
# per host: mpirun --map-by ppr:1:node --host H1,H2 ddp-launch --nproc-per-node 2
# --master-addr 10.78.0.1 tests/cluster/worker.sh. mpirun runs on host 1 and starts its daemon on
# host 2 through an rsh agent that enters host 2 (hosts.sh run), as bench/hosts.sh does.
#   ok    node rank and node count come from OMPI_COMM_WORLD_RANK/SIZE: the 4 workers see the
#         right RANK/WORLD_SIZE/GROUP_RANK on the right host and meet in the launcher's store; exit 0
#   fail  rank 3 (host 2) exits 3: mpirun exits 3 or 122 (whichever launcher ends first), a
#         launcher names rank 3's code 3, and ranks 0-2 got SIGTERM
# Exit 77 (Skipped) when not root or mpirun is missing.
# usage: mpirun_test.sh <bin dir> <tests dir> <source dir> ok|fail
set -uo pipefail
bin=$1 tests=$2 src=$3 job=$4
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
command -v mpirun > /dev/null || { echo "mpirun not installed"; exit 77; }
n=2 p=ddpM$$x7
$hosts sweep
start=$(date +%s)
$hosts up "$p" "$n" || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
out=$(mktemp -d)
chmod 755 "$out"
trap '$hosts down "$p" "$n"; rm -rf "$out"' EXIT
fail() {
  echo "FAIL ($job): $*"
  for f in "$out"/*.out "$out"/*.err; do [ -f "$f" ] && { echo "== $f"; tail -n 40 "$f"; }; done
  exit 1
}
# Open MPI's rsh launcher, its "ssh HOST COMMAND" entering host K (name PREFIXhK) instead.
cat > "$out/agent.sh" << AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec sh $src/tests/netns/hosts.sh run $p "\${host##*h}" sh -c "\$*"
AGENT
chmod +x "$out/agent.sh"
# The environment may preset another launcher (OMPI_MCA_plm=isolated starts every rank here).
$hosts run "$p" 1 mpirun --allow-run-as-root --map-by ppr:1:node --host "${p}h1,${p}h2" \
  --mca plm rsh --mca plm_rsh_agent "$out/agent.sh" --mca oob_tcp_if_include veth0 \
  "$bin/ddp-launch" --nproc-per-node 2 --master-addr 10.78.0.1 \
  bash "$src/tests/cluster/worker.sh" "$job" "$out" "$tests/ddp_store_probe" > "$out/mpirun.out" 2> "$out/mpirun.err"
rc=$?
case "$job" in
  ok)
    [ $rc = 0 ] || fail "mpirun exited $rc"
    for r in 0 1 2 3; do
      node=$((r / 2))
      want="worker rank=$r local_rank=$((r % 2)) world=4 local_world=2 node=$node nodes=2 master=10.78.0.1 host=${p}h$((node + 1))"
      grep -qF "$want" "$out/mpirun.out" || fail "no line '$want'"
      grep -qF "rank $r of 4: all 4 ranks met in the store" "$out/mpirun.out" || fail "rank $r did not meet the others in the store"
    done
    ;;
  fail)
    # mpirun exits with the code of the first launcher to end: node 1's 3 (its worker's) or node
    # 0's 122 (stopped because node 1 failed), a race; either way the root cause is named.
    [ $rc = 3 ] || [ $rc = 122 ] || fail "mpirun exited $rc, not the worker's 3 or the stopped node's 122"
    grep -qE "rank 3 \(local rank 1, pid [0-9]+\) exited with code 3|exitcode +: 3 " "$out/mpirun.err" ||
      fail "no launcher named rank 3's exit code 3"
    [ -f "$out/term.3" ] && fail "the failed rank 3 got SIGTERM"
    for r in 0 1 2; do
      [ "$(cat "$out/term.$r" 2> /dev/null)" = "${p}h$((r / 2 + 1))" ] || fail "rank $r did not get SIGTERM on its host"
    done
    ;;
  *) echo "job: ok or fail"; exit 2 ;;
esac
echo "== mpirun's output"
cat "$out/mpirun.out" "$out/mpirun.err"
echo "$job: passed in $(($(date +%s) - start)) s"
