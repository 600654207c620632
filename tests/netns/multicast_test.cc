// The multicast rendezvous across network namespaces (root only; exits 77, which ctest reports
// as Skipped, otherwise): three namespaces on one bridge (netns_bridge.sh), like three hosts on a
// subnet, each running a ddp-launch that knows only the group. Nothing is created in the test's
// own namespace and every group is 239.0.0.0/8 or ff15::/16 with TTL 1.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <memory>
#include <set>

#include "cli/launch_test_util.h"

using namespace ddp::test;

namespace {

std::string source_dir() {
  const char* d = std::getenv("DDP_SOURCE_DIR");
  return d ? d : ".";
}

bool can_run() { return ::geteuid() == 0 && ::system("command -v ip > /dev/null 2>&1") == 0; }

std::string script() {
  std::string beside = std::filesystem::path(__FILE__).parent_path().string() + "/netns_bridge.sh";
  return "sh " + (std::filesystem::exists(beside) ? beside : source_dir() + "/tests/netns/netns_bridge.sh");
}

// Three "hosts" ddpM<pid>x<k>n1..n3 (10.78.0.1-3, fd78::1-3), removed even when the test fails.
class Subnet {
 public:
  Subnet() {
    static int k = 0;
    prefix_ = "ddpM" + std::to_string(::getpid()) + "x" + std::to_string(k++);
    (void)::system((script() + " sweep").c_str());
    ok_ = ::system((script() + " up " + prefix_ + " 3").c_str()) == 0;
  }
  ~Subnet() { (void)::system((script() + " down " + prefix_ + " 3").c_str()); }
  bool ok() const { return ok_; }
  std::string ns(int host) const { return prefix_ + "n" + std::to_string(host); }

 private:
  std::string prefix_;
  bool ok_ = false;
};

std::vector<std::string> in_ns(const std::string& ns, std::vector<std::string> args) {
  std::vector<std::string> out = {"ip", "netns", "exec", ns, launcher_path()};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::vector<std::string> job(const std::string& endpoint, const std::string& id, int nnodes,
                             std::vector<std::string> extra, const std::string& worker) {
  std::vector<std::string> a = {"--nnodes",        std::to_string(nnodes),
                                "--rdzv-backend",  "multicast",
                                "--rdzv-endpoint", endpoint,
                                "--rdzv-id",       id};
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), {"sh", "-c", worker});
  return a;
}

std::string probe(const ScratchDir& d, const std::string& tag = "env") {
  return "env > " + d.path() + "/" + tag + ".$RANK && exec " + bin_dir() + "/../tests/ddp_store_probe";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Three launchers x two workers on `group`: every rank gets a distinct place, the same store.
void three_nodes(const std::string& endpoint, const std::string& store_prefix) {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  std::vector<std::unique_ptr<Child>> nodes;
  const std::string id = unique_id("mc3");
  for (int h = 1; h <= 3; ++h) {
    nodes.push_back(std::make_unique<Child>(
        in_ns(net.ns(h),
              job(endpoint, id, 3, {"--nproc-per-node", "2", "--rdzv-conf", "timeout=20"}, probe(d))),
        std::map<std::string, std::string>{{"DDP_JOB_TOKEN", "secret-" + id}},
        d / ("n" + std::to_string(h) + ".out"), d / ("n" + std::to_string(h) + ".err")));
  }
  for (int h = 0; h < 3; ++h) {
    INFO(nodes[h]->err());
    CHECK(nodes[h]->wait(std::chrono::seconds(60)) == 0);
  }
  std::set<std::string> stores, groups;
  for (int rank = 0; rank < 6; ++rank) {
    auto e = parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
    CHECK(e["WORLD_SIZE"] == "6");
    CHECK(e["GROUP_WORLD_SIZE"] == "3");
    CHECK(e["DDP_JOB_TOKEN"] == "secret-" + id);
    stores.insert(e["DDP_STORE"]);
    groups.insert(e["GROUP_RANK"]);
  }
  REQUIRE(stores.size() == 1);
  CHECK(stores.begin()->starts_with(store_prefix));  // node 0's own address on the subnet
  CHECK(groups == std::set<std::string>{"0", "1", "2"});
  std::string out = nodes[0]->out() + nodes[1]->out() + nodes[2]->out();
  CHECK(contains(out, "all 6 ranks met"));
}

}  // namespace

TEST_CASE("IPv4: three hosts x two workers find each other on 239.x") {
  three_nodes("239.255.78.1:29400", "10.78.0.");
}

TEST_CASE("IPv6: three hosts x two workers find each other on ff15::") {
  three_nodes("[ff15::78:1]:29400", "[fd78::");
}

TEST_CASE("requested node ranks are honoured, the others assigned") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string id = unique_id("mcreq");
  std::vector<std::unique_ptr<Child>> nodes;
  for (int h = 1; h <= 3; ++h) {
    std::vector<std::string> extra = {"--rdzv-conf", "timeout=20"};
    if (h == 3) extra.insert(extra.end(), {"--node-rank", "0"});
    nodes.push_back(
        std::make_unique<Child>(in_ns(net.ns(h), job("239.255.78.2:29401", id, 3, extra, probe(d))),
                                std::map<std::string, std::string>{}, d / ("n" + std::to_string(h) + ".out"),
                                d / ("n" + std::to_string(h) + ".err")));
  }
  for (auto& n : nodes) {
    INFO(n->err());
    CHECK(n->wait(std::chrono::seconds(60)) == 0);
  }
  auto e0 = parse_env_dump(slurp(d / "env.0"));
  CHECK(e0["MASTER_ADDR"] == "10.78.0.3");  // host 3 asked for node rank 0
  CHECK(parse_env_dump(slurp(d / "env.1"))["DDP_STORE"].starts_with("10.78.0.3:"));
  CHECK(parse_env_dump(slurp(d / "env.2"))["MASTER_ADDR"] == "10.78.0.3");
}

TEST_CASE("a failed attempt restarts every node through node 0's store, as with tcp") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string id = unique_id("mcrestart");
  // Attempt 0: rank 1 fails; attempt 1: every rank meets.
  const std::string worker =
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then exit 3; fi; " + probe(d);
  std::vector<std::unique_ptr<Child>> nodes;
  for (int h = 1; h <= 2; ++h) {
    nodes.push_back(std::make_unique<Child>(
        in_ns(net.ns(h),
              job("239.255.78.7:29406", id, 2, {"--max-restarts", "1", "--rdzv-conf", "timeout=20"}, worker)),
        std::map<std::string, std::string>{}, d / ("n" + std::to_string(h) + ".out"),
        d / ("n" + std::to_string(h) + ".err")));
  }
  for (auto& n : nodes) {
    INFO(n->err());
    CHECK(n->wait(std::chrono::seconds(60)) == 0);
  }
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(parse_env_dump(slurp(d / ("env." + std::to_string(rank))))["TORCHELASTIC_RESTART_COUNT"] == "1");
  }
  CHECK(contains(nodes[0]->err() + nodes[1]->err(), "restarting the workers (1 of 1)"));
}

TEST_CASE("two jobs with different ids on the same group and port at the same moment never mix") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string a = unique_id("mcA"), b = unique_id("mcB");
  // Job A on hosts 1 and 2, job B on hosts 2 and 3: host 2 runs one launcher of each.
  std::vector<std::unique_ptr<Child>> nodes;
  int k = 0;
  for (auto [h, id] : std::vector<std::pair<int, std::string>>{{1, a}, {2, a}, {2, b}, {3, b}}) {
    const std::string tag = id == a ? "A" : "B";
    nodes.push_back(std::make_unique<Child>(
        in_ns(net.ns(h), job("239.255.78.3:29402", id, 2,
                             {"--nproc-per-node", "1", "--rdzv-conf", "timeout=20"}, probe(d, tag))),
        std::map<std::string, std::string>{}, d / ("n" + std::to_string(k) + ".out"),
        d / ("n" + std::to_string(k) + ".err")));
    ++k;
  }
  for (auto& n : nodes) {
    INFO(n->err());
    CHECK(n->wait(std::chrono::seconds(60)) == 0);
  }
  for (const std::string tag : {"A", "B"}) {
    std::set<std::string> stores;
    for (int rank = 0; rank < 2; ++rank) {
      auto e = parse_env_dump(slurp(d / (tag + "." + std::to_string(rank))));
      CHECK(e["WORLD_SIZE"] == "2");
      CHECK(e["DDP_RUN_ID"] == (tag == "A" ? a : b));
      stores.insert(e["DDP_STORE"]);
    }
    CHECK(stores.size() == 1);
  }
}

TEST_CASE("a node that never shows up: the others exit 121 within the deadline, naming who came") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string id = unique_id("mcmiss");
  Child n1(in_ns(net.ns(1), job("239.255.78.4:29403", id, 3, {"--rdzv-conf", "timeout=2"}, "true")), {},
           d / "1.out", d / "1.err");
  Child n2(in_ns(net.ns(2), job("239.255.78.4:29403", id, 3, {"--rdzv-conf", "timeout=2"}, "true")), {},
           d / "2.out", d / "2.err");
  for (Child* c : {&n1, &n2}) {
    CHECK(c->wait(std::chrono::seconds(30)) == 121);
    INFO(c->err());
    CHECK(contains(c->err(), "2 of 3 participants arrived within 2000 ms"));
    CHECK(contains(c->err(), "10.78.0.1"));
    CHECK(contains(c->err(), "10.78.0.2"));
  }
}

TEST_CASE("a node rank requested twice: every node exits 121 naming both") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string id = unique_id("mcdup");
  std::vector<std::unique_ptr<Child>> nodes;
  for (int h = 1; h <= 3; ++h) {
    std::vector<std::string> extra = {"--rdzv-conf", "timeout=10"};
    if (h != 3) extra.insert(extra.end(), {"--node-rank", "1"});
    nodes.push_back(std::make_unique<Child>(in_ns(net.ns(h), job("239.255.78.5:29404", id, 3, extra, "true")),
                                            std::map<std::string, std::string>{},
                                            d / ("n" + std::to_string(h) + ".out"),
                                            d / ("n" + std::to_string(h) + ".err")));
  }
  for (auto& n : nodes) {
    CHECK(n->wait(std::chrono::seconds(30)) == 121);
    INFO(n->err());
    CHECK(contains(n->err(), "rank 1 requested twice"));
  }
}

TEST_CASE("garbage and wrong-token datagrams during a rendezvous change nothing") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string id = unique_id("mcnoise");
  const std::string group = "239.255.78.6:29405";
  // An intruder with the right id but the wrong token (its announcements fail every MAC; it
  // never completes), and raw garbage, both from host 3 while hosts 1 and 2 meet.
  Child intruder(
      in_ns(net.ns(3), job(group, id, 2, {"--rdzv-conf", "timeout=4", "--node-rank", "0"}, "true")),
      {{"DDP_JOB_TOKEN", "not-the-token"}}, d / "x.out", d / "x.err");
  Child garbage({"ip", "netns", "exec", net.ns(3), "python3", "-c",
                 "import socket,os,time\n"
                 "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                 "s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_TTL,1)\n"
                 "for i in range(400):\n"
                 "  s.sendto(b'DDPM\\x01\\x01'+os.urandom(i%300),('239.255.78.6',29405))\n"
                 "  s.sendto(os.urandom(1+i*3%1500),('239.255.78.6',29405))\n"
                 "  time.sleep(0.005)\n"},
                {}, d / "g.out", d / "g.err");
  ::usleep(200'000);
  std::vector<std::unique_ptr<Child>> nodes;
  for (int h = 1; h <= 2; ++h) {
    nodes.push_back(std::make_unique<Child>(
        in_ns(net.ns(h), job(group, id, 2, {"--rdzv-conf", "timeout=20"}, probe(d))),
        std::map<std::string, std::string>{{"DDP_JOB_TOKEN", "the-token"}, {"DDP_LOG_LEVEL", "debug"}},
        d / ("n" + std::to_string(h) + ".out"), d / ("n" + std::to_string(h) + ".err")));
  }
  for (auto& n : nodes) {
    INFO(n->err());
    CHECK(n->wait(std::chrono::seconds(60)) == 0);
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto e = parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
    CHECK(e["WORLD_SIZE"] == "2");
    CHECK_FALSE(e["MASTER_ADDR"] == "10.78.0.3");
  }
  CHECK(garbage.wait(std::chrono::seconds(30)) == 0);
  CHECK(intruder.wait(std::chrono::seconds(30)) == 121);
  INFO(intruder.err());
  CHECK(contains(intruder.err(), "1 of 2 participants"));
  CHECK(contains(intruder.err(), "wrong MAC"));
}

TEST_CASE("workers without ddp-launch: init_process_group over [ff15::]:PORT across hosts, ranks assigned") {
  Subnet net;
  REQUIRE(net.ok());
  ScratchDir d;
  const std::string url =
      "tcp://[ff15::78:9]:29407?world_size=4&group_name=" + unique_id("w6") + "&timeout=20";
  std::vector<std::unique_ptr<Child>> ranks;
  for (int i = 0; i < 4; ++i) {  // host 1 runs two
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{"ip", "netns", "exec", net.ns(i == 3 ? 1 : i + 1),
                                 bin_dir() + "/../tests/ddp_init_probe", url},
        std::map<std::string, std::string>{{"DDP_JOB_TOKEN", "w6-token"}},
        d / ("r" + std::to_string(i) + ".out"), d / ("r" + std::to_string(i) + ".err")));
  }
  std::set<std::string> lines;
  for (auto& r : ranks) {
    INFO(r->err());
    CHECK(r->wait(std::chrono::seconds(60)) == 0);
    lines.insert(r->out());
  }
  CHECK(lines == std::set<std::string>{"rank 0 of 4: sum 10\n", "rank 1 of 4: sum 10\n",
                                       "rank 2 of 4: sum 10\n", "rank 3 of 4: sum 10\n"});
}

int main(int argc, char** argv) {
  if (!can_run()) {
    std::puts("netns_multicast_test: skipped (needs root and iproute2 to create network namespaces)");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
