// The job on etcd (--rdzv-backend etcd): the members' order (near first), then ddp-launch
// black-box on loopback over a real etcd (tests/rendezvous/etcd_cluster.h; Skipped without
// /usr/bin/etcd), heartbeats 0.5 s x 4:
//   - --nnodes 2:3: node 0 of round 0 SIGKILLed (its worker with it), the other two go on at
//     world 2 and finish: restarted (tests/netns/gloo_steps.py, PyTorch gloo; Skipped without
//     torch), and in place (ddp_elastic_probe over DDP_STORE=etcd://..., same PIDs);
//   - etcd's quorum lost (2 of 3 members): every launcher exits 122 naming etcd, no worker left;
//   - a finished job's --rdzv-id is refused; etcd not answering within join_timeout is named;
//   - TLS with client certificates made by the test: launchers and workers (ddp_store_probe over
//     etcd+https:// and DDP_ETCD_CACERT/CERT/KEY) meet in etcd; a wrong CA is named.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <set>
#include <sstream>

#include "cli/launch_test_util.h"
#include "launcher/etcd_job.h"
#include "rendezvous/etcd_cluster.h"
#include "test_env.h"

using namespace ddp::test;
using ddp::rdzv::testing::EtcdCluster;
using ddp::rdzv::testing::have_etcd;

namespace {

constexpr const char* kConf = "keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=1";

struct Node {
  std::unique_ptr<Child> child;
  std::string err_path;
  std::string out_path;
  std::string err() const { return slurp(err_path); }
  std::string out() const { return slurp(out_path); }
};

Node start(const ScratchDir& d, const std::string& name, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {launcher_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  Node n;
  n.err_path = d / (name + ".err");
  n.out_path = d / (name + ".out");
  n.child = std::make_unique<Child>(argv, std::map<std::string, std::string>{}, n.out_path, n.err_path);
  return n;
}

std::string joined(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const auto& e : endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

std::vector<std::string> etcd_flags(const EtcdCluster& etcd, const std::string& nnodes, const std::string& id,
                                    const std::string& conf = kConf) {
  return {
      "--nnodes",           nnodes, "--rdzv-backend", "etcd", "--rdzv-endpoint",    joined(etcd.endpoints()),
      "--rdzv-id",          id,     "--rdzv-conf",    conf,   "--shutdown-timeout", "2",
      "--monitor-interval", "0.1"};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Whether /usr/bin/python3 finds torch (without importing it: seconds).
bool have_torch() {
  return std::system(
             "/usr/bin/python3 -c \"import importlib.util as u, sys; "
             "sys.exit(u.find_spec('torch') is None)\" >/dev/null 2>&1") == 0;
}

std::string gloo_script() {
  return ddp::test_env::get_or("DDP_SOURCE_DIR", ".") + "/tests/netns/gloo_steps.py";
}

}  // namespace

TEST_CASE("members on this host come first, the others all follow") {
  const std::vector<std::string> given = {"192.0.2.1:2379", "http://127.0.0.1:2379", "192.0.2.2:2379",
                                          "192.0.2.3:2379"};
  const auto m = ddp::launcher::members_near_first(given);
  REQUIRE(m.size() == given.size());
  CHECK(m[0] == "http://127.0.0.1:2379");
  CHECK(std::is_permutation(m.begin(), m.end(), given.begin()));
  CHECK(ddp::launcher::members_near_first(given) == m);  // the same on every call
}

TEST_CASE("etcd, --nnodes 2:3: node 0 SIGKILLed, the two left go on at world 2 and finish (PyTorch gloo)" *
          doctest::skip(!have_etcd() || !have_torch())) {
  EtcdCluster etcd;
  ScratchDir d;
  const std::string id = unique_id("etcd-kill0");
  std::vector<Node> nodes;
  for (int i = 0; i < 3; ++i) {
    auto a = etcd_flags(etcd, "2:3", id);
    a.insert(a.end(), {"/usr/bin/python3", gloo_script(), "400", "0.02"});
    nodes.push_back(start(d, "node" + std::to_string(i), a));
  }
  auto all_out = [&] {
    std::string s;
    for (auto& n : nodes) s += n.out();
    return s;
  };
  REQUIRE(eventually([&] { return count(all_out(), "first step pid=") == 3; }, std::chrono::seconds(90)));
  int first = -1;
  for (int i = 0; i < 3; ++i)
    if (has(nodes[i].err(), "round 0: node 0/3")) first = i;
  REQUIRE(first >= 0);
  ::kill(nodes[first].child->pid(), SIGKILL);
  for (int i = 0; i < 3; ++i) {
    if (i == first) continue;
    CAPTURE(i);
    const int code = nodes[i].child->wait(std::chrono::seconds(120));
    const std::string err = nodes[i].err();
    CAPTURE(err);
    CHECK(code == 0);
    CHECK(has(err, "node 0 ("));
    CHECK(has(err, "lost: no heartbeat"));
    CHECK(has(nodes[i].out(), "world=2 steps=400"));
    CHECK_FALSE(has(err, "restarting the workers"));  // a membership change, not a failure
  }
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
}

TEST_CASE("etcd, --nnodes 2:3, in place: node 0 SIGKILLed, the two left keep their workers and finish" *
          doctest::skip(!have_etcd())) {
  EtcdCluster etcd;
  ScratchDir d;
  const std::string id = unique_id("etcd-inplace");
  const std::string probe = bin_dir() + "/../tests/ddp_elastic_probe";
  std::vector<Node> nodes;
  for (int i = 0; i < 3; ++i) {
    auto a = etcd_flags(etcd, "2:3", id);
    a.insert(a.end(), {probe, "300", "20"});
    nodes.push_back(start(d, "node" + std::to_string(i), a));
  }
  auto group_of_3 = [&](int i) { return has(nodes[i].err() + nodes[i].out(), "world=3"); };
  REQUIRE(
      eventually([&] { return group_of_3(0) && group_of_3(1) && group_of_3(2); }, std::chrono::seconds(60)));
  int first = -1;
  for (int i = 0; i < 3; ++i)
    if (has(nodes[i].err(), "round 0: node 0/3")) first = i;
  REQUIRE(first >= 0);
  ::kill(nodes[first].child->pid(), SIGKILL);
  for (int i = 0; i < 3; ++i) {
    if (i == first) continue;
    CAPTURE(i);
    const int code = nodes[i].child->wait(std::chrono::seconds(120));
    const std::string log = nodes[i].err() + nodes[i].out();
    CAPTURE(log);
    CHECK(code == 0);
    CHECK(has(log, "with the workers in place"));
    CHECK(has(log, "world=2"));
    CHECK(has(log, "steps=300"));
    CHECK_FALSE(has(log, "restarting the workers"));
    // The same worker before and after: one "group pid=P" line per group it formed, all one P.
    std::istringstream in(log);
    std::set<std::string> pids;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("group pid=", 0) == 0) pids.insert(line.substr(10, line.find(' ', 10) - 10));
    CHECK(pids.size() == 1);
  }
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
}

TEST_CASE("etcd loses its quorum: every launcher exits 122 naming etcd, no worker left" *
          doctest::skip(!have_etcd())) {
  ddp::rdzv::testing::EtcdClusterOptions eo;
  eo.members = 3;
  EtcdCluster etcd(eo);
  ScratchDir d;
  const std::string id = unique_id("etcd-quorum");
  std::vector<Node> nodes;
  for (int i = 0; i < 2; ++i) {
    auto a = etcd_flags(etcd, "2", id);
    a.insert(a.end(), {"sh", "-c", "echo started >> " + (d / "log") + "; exec sleep 600"});
    nodes.push_back(start(d, "node" + std::to_string(i), a));
  }
  REQUIRE(eventually([&] { return count(slurp(d / "log"), "started") == 2; }, std::chrono::seconds(60)));
  etcd.kill(1);
  etcd.kill(2);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& n : nodes) {
    const int code = n.child->wait(std::chrono::seconds(60));
    const std::string err = n.err();
    CAPTURE(err);
    CHECK(code == 122);
    CHECK(has(err, "etcd at " + etcd.endpoint(0)));
    CHECK(has(err, "quorum"));
  }
  MESSAGE(
      "launchers ended ",
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count(),
      " ms after etcd lost its quorum (heartbeat bound 2000 ms)");
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
}

TEST_CASE("TLS: launchers and workers meet over https with client certificates; a wrong CA is named" *
          doctest::skip(!have_etcd() || ::access("/usr/bin/openssl", X_OK) != 0)) {
  ScratchDir d;
  const std::string at = "cd " + d.path() + " && ";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  std::ofstream(d / "ext.cnf") << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n";
  for (const std::string& cmd :
       {"openssl req -x509" + ec + "-keyout ca.key -out ca.pem -days 2 -subj /CN=ddp-test-ca",
        "openssl req" + ec + "-keyout member.key -out member.csr -subj /CN=127.0.0.1",
        std::string(
            "openssl x509 -req -in member.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out member.pem ") +
            "-days 2 -extfile ext.cnf",
        "openssl req -x509" + ec + "-keyout other.key -out other.pem -days 2 -subj /CN=other-ca"}) {
    REQUIRE(std::system((at + cmd + " >/dev/null 2>&1").c_str()) == 0);
  }
  ddp::rdzv::testing::EtcdClusterOptions eo;
  eo.scheme = "https";
  eo.cert = d / "member.pem";
  eo.key = d / "member.key";
  eo.trusted_ca = d / "ca.pem";
  eo.client_cert_auth = true;
  EtcdCluster etcd(eo);
  const std::string tls = "protocol=https,cacert=" + (d / "ca.pem") + ",cert=" + (d / "member.pem") +
                          ",key=" + (d / "member.key");
  const std::string id = unique_id("etcd-tls");
  std::vector<Node> nodes;
  for (int i = 0; i < 2; ++i) {
    auto a = etcd_flags(etcd, "2", id, std::string(kConf) + "," + tls);
    a.push_back(bin_dir() + "/../tests/ddp_store_probe");
    nodes.push_back(start(d, "node" + std::to_string(i), a));
  }
  for (auto& n : nodes) {
    const int code = n.child->wait(std::chrono::seconds(60));
    const std::string log = n.err() + n.out();
    CAPTURE(log);
    CHECK(code == 0);
    CHECK(has(log, "all 2 ranks met in the store at etcd+https://"));
  }
  const std::string wrong = "protocol=https,cacert=" + (d / "other.pem") + ",cert=" + (d / "member.pem") +
                            ",key=" + (d / "member.key") + ",join_timeout=3";
  auto a = etcd_flags(etcd, "2", unique_id("etcd-tls-wrong"), std::string(kConf) + "," + wrong);
  a.push_back("true");
  Result r = launch(d, a);
  CAPTURE(r.err);
  CHECK(r.code != 0);
  CHECK(has(r.err, d / "other.pem"));
}

TEST_CASE("a finished job's --rdzv-id is refused; etcd not answering is an error naming it" *
          doctest::skip(!have_etcd())) {
  EtcdCluster etcd;
  ScratchDir d;
  const std::string id = unique_id("etcd-reuse");
  auto a = etcd_flags(etcd, "1:2", id, std::string(kConf) + ",join_timeout=3");
  a.insert(a.end(), {"true"});
  Result first = launch(d, a);
  CAPTURE(first.err);
  REQUIRE(first.code == 0);
  Result again = launch(d, a);
  CAPTURE(again.err);
  CHECK(again.code != 0);
  CHECK(has(again.err, "belongs to a finished job"));
  CHECK(has(again.err, "etcdctl del --prefix '/ddp/" + id + "/'"));

  const std::string nobody = "127.0.0.1:" + std::to_string(ddp::net::pick_free_port());
  std::vector<std::string> b = {
      "--nnodes", "1:2",       "--rdzv-backend",       "etcd",        "--rdzv-endpoint",
      nobody,     "--rdzv-id", unique_id("etcd-none"), "--rdzv-conf", "join_timeout=2",
      "true"};
  Result none = launch(d, b);
  CAPTURE(none.err);
  CHECK(none.code != 0);
  CHECK(has(none.err, "etcd at " + nobody + " did not answer within 2000 ms"));
}
