// The fault matrix, the trials that need root (Skipped, exit 77, otherwise): a network partition
// between two network namespaces in the middle of a collective, and a /dev/shm too small for the
// tcp backend's segment (a small tmpfs mounted on /dev/shm in a private mount namespace,
// `unshare -m`) — the group falls back to sockets with a warning naming the size it needs, or,
// with DDP_TCP_TRANSPORT=shm, fails naming it; ranks each with their own /dev/shm (containers
// sharing a host) fall back too; the FileStore's disk fills (a tiny tmpfs under the ranks' file://
// store): an error naming the path, no hang, no store file left. Each trial checks no process of
// the job and no segment is left.
#include <doctest/doctest.h>

#include "faults/fault_trial.h"
#include "netns/netns_pair.h"

using namespace ddp::test;
using namespace ddp::test::faults;

namespace {

bool can_unshare() { return ::geteuid() == 0 && ::system("unshare -m true > /dev/null 2>&1") == 0; }

void check_clean(Trial& t) {
  auto left = t.stray();
  CHECK_MESSAGE(left.empty(), left.size(), " process(es) of the job left");
  kill_all(left);
  CHECK(t.shm_left().empty());
}

// Runs three ranks (20 all_reduces) in one private mount namespace whose /dev/shm is a tmpfs of
// `size`; each rank's exit code goes to D/code.<r>, what is left in that /dev/shm to D/shm.left.
Child& start_in_small_shm(Trial& t, const std::string& size, std::map<std::string, std::string> env) {
  const std::string script =
      "mount -t tmpfs -o size=$3 ddp-fault-shm /dev/shm || exit 77\n"
      "pids=''\n"
      "for r in 0 1 2; do RANK=$r LOCAL_RANK=$r \"$1\" --backend tcp --dir \"$2\" --iters 20 "
      "> \"$2/out.$r\" 2> \"$2/err.$r\" & pids=\"$pids $!\"; done\n"
      "r=0; for p in $pids; do wait $p; echo $? > \"$2/code.$r\"; r=$((r+1)); done\n"
      "ls -A /dev/shm > \"$2/shm.left\"\n";
  env.insert({{"WORLD_SIZE", "3"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(free_port_pair())},
              {"DDP_RUN_ID", t.id()},
              {"DDP_JOB_TOKEN", "fault-token"},
              {"DDP_TIMEOUT_MS", "4000"}});
  return t.start({"unshare", "-m", "sh", "-c", script, "sh", worker_path(), t.dir().path(), size}, env);
}

std::string rank_file(const Trial& t, const std::string& what, int r) {
  return slurp(t.dir() / (what + "." + std::to_string(r)));
}

// "a,b,c": the three ranks' exit codes.
std::string codes(const Trial& t) {
  std::string out;
  for (int r = 0; r < 3; ++r) {
    const std::string c = rank_file(t, "code", r);
    if (r > 0) out.push_back(',');
    out.append(c, 0, c.find('\n'));
  }
  return out;
}

}  // namespace

TEST_CASE("fault: a network partition between two hosts mid-collective" * doctest::skip(!can_use_netns())) {
  for (const std::string backend : {"tcp", "gloo"}) {
    CAPTURE(backend);
    NetnsPair ns;
    REQUIRE(ns.ok());
    Trial t("partition-" + backend);
    const std::string port = std::to_string(free_port_pair());
    for (int r = 0; r < 2; ++r) {
      t.start({"ip", "netns", "exec", r == 0 ? ns.a() : ns.b(), worker_path(), "--backend", backend, "--dir",
               t.dir().path()},
              {{"RANK", std::to_string(r)},
               {"WORLD_SIZE", "2"},
               {"LOCAL_RANK", "0"},
               {"MASTER_ADDR", "10.77.0.1"},
               {"MASTER_PORT", port},
               {"DDP_RUN_ID", t.id()},
               {"DDP_JOB_TOKEN", "fault-token"},
               {"DDP_TIMEOUT_MS", "4000"}});
    }
    REQUIRE(t.wait_ready(2));
    REQUIRE(::system(("ip -n " + ns.a() + " link set veth0 down").c_str()) == 0);
    t.fault();
    const int c0 = t.wait(0), c1 = t.wait(1);
    t.report("ranks exit " + std::to_string(c0) + "," + std::to_string(c1));
    INFO(t.child(0).err(), t.child(1).err());
    CHECK(c0 == 3);
    CHECK(c1 == 3);
    CHECK(names_rank(t.child(0).err(), 1));
    CHECK(names_rank(t.child(1).err(), 0));
    check_clean(t);
  }
}

TEST_CASE("fault: /dev/shm too small: the tcp backend falls back to sockets, naming the size" *
          doctest::skip(!can_unshare())) {
  Trial t("small-shm");
  start_in_small_shm(t, "1m", {});
  t.fault();
  REQUIRE(t.wait(0) == 0);
  t.report("ranks exit " + codes(t) + ", group on sockets");
  INFO(rank_file(t, "err", 0));
  for (int r = 0; r < 3; ++r) CHECK(rank_file(t, "code", r) == "0\n");
  CHECK(contains(rank_file(t, "err", 0), "using sockets for this group"));
  CHECK(contains(rank_file(t, "err", 0), "bytes"));
  CHECK(contains(rank_file(t, "out", 1), "every result right"));
  CHECK(slurp(t.dir() / "shm.left").empty());
  check_clean(t);
}

TEST_CASE("fault: /dev/shm too small with DDP_TCP_TRANSPORT=shm is an error naming the size" *
          doctest::skip(!can_unshare())) {
  Trial t("small-shm-forced");
  start_in_small_shm(t, "1m", {{"DDP_TCP_TRANSPORT", "shm"}});
  t.fault();
  REQUIRE(t.wait(0) == 0);
  t.report("ranks exit " + codes(t));
  INFO(rank_file(t, "err", 0), rank_file(t, "err", 1));
  for (int r = 0; r < 3; ++r) CHECK(rank_file(t, "code", r) == "3\n");
  CHECK(contains(rank_file(t, "err", 0), "cannot reserve"));
  CHECK(contains(rank_file(t, "err", 0), "bytes of shared memory"));
  CHECK(slurp(t.dir() / "shm.left").empty());
  check_clean(t);
}

TEST_CASE("fault: ranks each with their own /dev/shm fall back to sockets" * doctest::skip(!can_unshare())) {
  Trial t("own-shm");
  const std::string port = std::to_string(free_port_pair());
  for (int r = 0; r < 3; ++r) {
    t.start({"unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64m ddp-fault-shm /dev/shm && exec \"$@\"",
             "sh", worker_path(), "--backend", "tcp", "--dir", t.dir().path(), "--iters", "20"},
            {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", "3"},
             {"LOCAL_RANK", std::to_string(r)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", port},
             {"DDP_RUN_ID", t.id()},
             {"DDP_JOB_TOKEN", "fault-token"},
             {"DDP_TIMEOUT_MS", "4000"}});
  }
  t.fault();
  for (int r = 0; r < 3; ++r) {
    INFO(t.child(static_cast<size_t>(r)).err());
    CHECK(t.wait(static_cast<size_t>(r)) == 0);
  }
  t.report("every rank exit 0");
  CHECK(contains(t.child(1).err(), "using sockets for this group"));
  check_clean(t);
}

TEST_CASE("fault: launcher, /dev/shm too small" * doctest::skip(!can_unshare())) {
  Trial t("launch-small-shm");
  Child& launcher = t.start({"unshare",
                             "-m",
                             "sh",
                             "-c",
                             "mount -t tmpfs -o size=1m ddp-fault-shm /dev/shm && exec \"$@\"",
                             "sh",
                             launcher_path(),
                             "--nproc-per-node",
                             "3",
                             "--rdzv-id",
                             t.id(),
                             "--master-port",
                             std::to_string(free_port_pair()),
                             worker_path(),
                             "--backend",
                             "tcp",
                             "--dir",
                             t.dir().path(),
                             "--iters",
                             "20"});
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  CHECK(code == 0);
  CHECK(contains(launcher.err(), "using sockets for this group"));
  check_clean(t);
}

namespace {

// Three ranks meeting in a FileStore on a tmpfs of `size` that a filler file of `filler` bytes
// takes (most of) first, in a private mount namespace; exit codes to D/code.<r>, what is left on
// that tmpfs to D/fs.left.
Child& start_on_full_disk(Trial& t, const std::string& size, const std::string& filler,
                          const std::string& run_id) {
  const std::string script =
      "mkdir -p \"$2/fs\" && mount -t tmpfs -o size=$3 ddp-fault-fs \"$2/fs\" || exit 77\n"
      "head -c $4 /dev/zero > \"$2/fs/filler\" 2> /dev/null\n"
      "pids=''\n"
      "for r in 0 1 2; do RANK=$r LOCAL_RANK=$r \"$1\" --backend tcp --dir \"$2\" --iters 20 "
      "--init-method \"file://$2/fs/store\" > \"$2/out.$r\" 2> \"$2/err.$r\" & pids=\"$pids $!\"; done\n"
      "r=0; for p in $pids; do wait $p; echo $? > \"$2/code.$r\"; r=$((r+1)); done\n"
      "ls -A \"$2/fs\" > \"$2/fs.left\"\n";
  return t.start({"unshare", "-m", "sh", "-c", script, "sh", worker_path(), t.dir().path(), size, filler},
                 {{"WORLD_SIZE", "3"},
                  {"DDP_RUN_ID", run_id},
                  {"DDP_JOB_TOKEN", "fault-token"},
                  {"DDP_TIMEOUT_MS", "4000"}});
}

}  // namespace

TEST_CASE("fault: the FileStore's disk fills: an error naming the path, no hang, nothing left" *
          doctest::skip(!can_unshare())) {
  // Full before the store is made (not even its header fits), and full once the store's first
  // page is used (a long run id makes every key about 2 KB: the second record does not fit).
  struct Case {
    const char* what;
    const char* filler;
    std::string run_id;
  };
  for (const Case& c : {Case{"full-at-start", "1000000", "fault-disk"},
                        Case{"fills-mid-rendezvous", "61440", "fault-disk-" + std::string(2000, 'x')}}) {
    CAPTURE(c.what);
    Trial t(std::string("disk-") + c.what);
    start_on_full_disk(t, "64k", c.filler, c.run_id);
    t.fault();
    REQUIRE(t.wait(0) == 0);
    t.report(std::string(c.what) + ": ranks exit " + codes(t));
    const std::string path = t.dir().path() + "/fs/store";
    std::string said;
    for (int r = 0; r < 3; ++r) {
      CHECK(rank_file(t, "code", r) == "3\n");
      said += rank_file(t, "err", r);
    }
    INFO(said);
    CHECK(contains(said, "'" + path + "'"));
    CHECK(contains(said, "No space left on device"));
    // Nothing of the job's left on that disk but the filler: a store file that never held a
    // header is removed; one that holds records is the store's, as designed (never deleted).
    const std::string left = slurp(t.dir().path() + "/fs.left");
    CHECK((left == "filler\n" || left == "filler\nstore\n"));
    if (std::string(c.what) == "full-at-start") CHECK(left == "filler\n");
    check_clean(t);
  }
}
