#include "cli/values.h"

#include "cli/device_count.h"

#include <doctest/doctest.h>

#include <csignal>
#include <map>

#include "common/error.h"

using namespace ddp;
using namespace ddp::cli;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("integers, seconds, booleans") {
  CHECK(parse_int("42", "x") == 42);
  CHECK(parse_int(" 7 ", "x") == 7);
  CHECK_THROWS_WITH_AS(parse_int("4x", "--max-restarts"),
                       doctest::Contains("--max-restarts: '4x' is not an integer"), InvalidArgument);
  CHECK(parse_seconds("0.1", "x") == Millis(100));
  CHECK(parse_seconds("30", "x") == Millis(30'000));
  CHECK_THROWS_AS(parse_seconds("-1", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_seconds("soon", "x"), InvalidArgument);
  CHECK(parse_bool("YES", "x"));
  CHECK_FALSE(parse_bool("off", "x"));
  CHECK_THROWS_AS(parse_bool("maybe", "x"), InvalidArgument);
}

TEST_CASE("nproc: N, auto, gpu, cpu") {
  auto none = env_of({{"CUDA_VISIBLE_DEVICES", ""}});
  CHECK(parse_nproc("3", "x", none) == 3);
  // torchrun: auto without a GPU is one worker per CPU.
  CHECK(parse_nproc("auto", "x", env_of({{"CUDA_VISIBLE_DEVICES", ""}})) == count_cpus());
  CHECK(parse_nproc("auto", "x", env_of({{"CUDA_VISIBLE_DEVICES", "0,1,3"}})) == 3);
  CHECK(parse_nproc("gpu", "x", env_of({{"CUDA_VISIBLE_DEVICES", "GPU-abc,GPU-def"}})) == 2);
  CHECK_THROWS_WITH_AS(parse_nproc("gpu", "x", env_of({{"CUDA_VISIBLE_DEVICES", "-1"}})),
                       doctest::Contains("no GPU"), InvalidArgument);
  CHECK(parse_nproc("cpu", "x", none) == count_cpus());
  CHECK(count_cpus() >= 1);
  CHECK_THROWS_AS(parse_nproc("0", "x", none), InvalidArgument);
  CHECK_THROWS_AS(parse_nproc("many", "x", none), InvalidArgument);
}

TEST_CASE("nnodes: N and MIN:MAX") {
  CHECK(parse_nnodes("2", "x") == std::pair{2, 2});
  CHECK(parse_nnodes("1:4", "x") == std::pair{1, 4});
  CHECK_THROWS_AS(parse_nnodes("4:1", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_nnodes("0", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_nnodes("1:2:3", "x"), InvalidArgument);
}

TEST_CASE("redirects and tee: torchrun's syntax") {
  auto all = parse_streams("3", "x");
  CHECK(all.all == 3);
  CHECK(all.for_rank(5) == 3);
  auto per = parse_streams("0:3,1:1", "x");
  CHECK(per.all == 0);
  CHECK(per.for_rank(0) == 3);
  CHECK(per.for_rank(1) == 1);
  CHECK(per.for_rank(2) == 0);
  CHECK_THROWS_AS(parse_streams("4", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_streams("0:9", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_streams("a:b", "x"), InvalidArgument);
}

TEST_CASE("signals by name, short name or number") {
  CHECK(parse_signals("SIGINT,SIGTERM", "x") == std::vector<int>{SIGINT, SIGTERM});
  CHECK(parse_signals("int, usr1,15", "x") == std::vector<int>{SIGINT, SIGUSR1, SIGTERM});
  CHECK_THROWS_WITH_AS(parse_signals("SIGTERN", "x"), doctest::Contains("did you mean 'SIGTERM'"),
                       InvalidArgument);
  CHECK_THROWS_AS(parse_signals("KILL", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_signals("CHLD", "x"), InvalidArgument);
}

TEST_CASE("local ranks, cpu bind, rdzv conf, KEY=VALUE") {
  CHECK(parse_rank_list("0,2", "x") == std::set<int>{0, 2});
  CHECK_THROWS_AS(parse_rank_list("0,-1", "x"), InvalidArgument);
  CHECK(parse_cpu_bind("cores", "x") == launcher::CpuBind::kCores);
  CHECK(parse_cpu_bind("auto", "x") == launcher::CpuBind::kAuto);
  CHECK_THROWS_WITH_AS(parse_cpu_bind("core", "x"), doctest::Contains("did you mean 'cores'"),
                       InvalidArgument);
  auto conf = parse_rdzv_conf("timeout=30, is_host=true,last_call_timeout=5", "x");
  CHECK(conf.timeout == Millis(30'000));
  CHECK(conf.is_host == true);
  CHECK(parse_rdzv_conf("join_timeout=2", "x").timeout == Millis(2000));
  auto mc = parse_rdzv_conf("ttl=3,interface=10.0.0.1", "x");
  CHECK(mc.ttl == 3);
  CHECK(mc.interface == "10.0.0.1");
  CHECK_THROWS_WITH_AS(parse_rdzv_conf("ttl=300", "x"), doctest::Contains("not in 1..255"), InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_conf("interface=", "x"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_rdzv_conf("timout=3", "x"), doctest::Contains("did you mean 'timeout'"),
                       InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_conf("timeout", "x"), InvalidArgument);
}

TEST_CASE("rdzv conf: torchrun's round and heartbeat keys, in seconds; hostile values name the key") {
  auto c = parse_rdzv_conf(
      "join_timeout=60,last_call_timeout=0.5,close_timeout=0,read_timeout=7,keep_alive_interval=0.25,"
      "keep_alive_max_attempt=4,store_type=TCP,use_agent_store=false",
      "rdzv_conf (from --rdzv-conf)");
  CHECK(c.timeout == Millis(60'000));
  CHECK(c.last_call_timeout == Millis(500));
  CHECK(c.close_timeout == Millis(0));
  CHECK(c.read_timeout == Millis(7000));
  CHECK(c.keep_alive_interval == Millis(250));
  CHECK(c.keep_alive_max_attempt == 4);
  CHECK_FALSE(parse_rdzv_conf("", "x").keep_alive_interval.has_value());
  // Each bad value: InvalidArgument naming the key (and the value where there is one).
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"keep_alive_interval=-1", "keep_alive_interval"},
      {"keep_alive_interval=0", "keep_alive_interval"},
      {"keep_alive_interval=abc", "keep_alive_interval"},
      {"keep_alive_interval=nan", "keep_alive_interval"},
      {"keep_alive_interval=inf", "keep_alive_interval"},
      {"keep_alive_interval=1e300", "keep_alive_interval"},
      {"keep_alive_max_attempt=0", "keep_alive_max_attempt"},
      {"keep_alive_max_attempt=-3", "keep_alive_max_attempt"},
      {"keep_alive_max_attempt=99999999999", "keep_alive_max_attempt"},
      {"keep_alive_max_attempt=2.5", "keep_alive_max_attempt"},
      {"last_call_timeout=-0.1", "last_call_timeout"},
      {"last_call_timeout=2000000", "last_call_timeout"},
      {"close_timeout=x", "close_timeout"},
      {"join_timeout=0", "join_timeout"},
      {"timeout=-5", "timeout"},
      {"read_timeout=0", "read_timeout"},
      {"store_type=file", "store_type"},
      {"store_type=etcd", "store_type"},
      {"keep_alive=1", "keep_alive"},
      {"timeout=5,join_timeout=6", "join_timeout"},
      {"last_call_timeout=1,last_call_timeout=2", "given twice"},
  };
  for (const auto& [text, key] : bad) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_rdzv_conf(text, "rdzv_conf (from --rdzv-conf)"),
                         doctest::Contains(key.c_str()), InvalidArgument);
  }
  CHECK_THROWS_WITH_AS(parse_rdzv_conf("keep_alive_intervall=1", "x"),
                       doctest::Contains("did you mean 'keep_alive_interval'"), InvalidArgument);
}

TEST_CASE("rdzv conf: the etcd backends' keys; TLS files must exist, and are made absolute") {
  auto c = parse_rdzv_conf(
      "protocol=HTTPS,cacert=/etc/hostname,cert=/etc/hostname,key=/etc/hostname,"
      "etcd_prefix=/jobs/team-a",
      "x");
  CHECK(c.protocol == "https");
  CHECK(c.cacert == "/etc/hostname");
  CHECK(c.etcd_prefix == "/jobs/team-a/");
  CHECK(c.has_etcd_keys());
  CHECK_FALSE(parse_rdzv_conf("timeout=3", "x").has_etcd_keys());
  // torchrun's etcd-v2 spellings
  auto v2 = parse_rdzv_conf("ca_cert=/etc/hostname,ssl_cert=/etc/hostname,ssl_cert_key=/etc/hostname", "x");
  CHECK(v2.cacert == "/etc/hostname");
  CHECK(v2.key == "/etc/hostname");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"protocol=grpc", "is not http or https"},
      {"cacert=/nonexistent/ca.pem", "'/nonexistent/ca.pem' is not a file"},
      {"cert=", "needs a file"},
      {"etcd_prefix=ddp", "must start with '/'"},
      {"etcd_prefix=/", "must start with '/'"},
      {"cacert=/etc/hostname,ca_cert=/etc/hostname", "given twice"},
  };
  for (const auto& [text, what] : bad) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_rdzv_conf(text, "x"), doctest::Contains(what.c_str()), InvalidArgument);
  }
}

TEST_CASE("etcd endpoints: members with the default port 2379, URLs kept") {
  CHECK(parse_etcd_endpoints("h1:2379, h2,https://h3:2380/", "x") ==
        std::vector<std::string>{"h1:2379", "h2:2379", "https://h3:2380"});
  CHECK(parse_etcd_endpoints("[::1]", "x") == std::vector<std::string>{"[::1]:2379"});
  CHECK_THROWS_WITH_AS(parse_etcd_endpoints("h1,,h2", "x"), doctest::Contains("an empty etcd member"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_etcd_endpoints("grpc://h1", "x"), doctest::Contains("http or https"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_etcd_endpoints("h1:99999", "x"), doctest::Contains("h1:99999"), InvalidArgument);
  CHECK_THROWS_WITH_AS(parse_etcd_endpoints("h1:0", "x"), doctest::Contains("port 0"), InvalidArgument);
}

TEST_CASE("KEY=VALUE") {
  CHECK(parse_key_value("A=b=c", "x") == std::pair<std::string, std::string>{"A", "b=c"});
  CHECK(parse_key_value("EMPTY=", "x").second.empty());
  CHECK_THROWS_AS(parse_key_value("1A=2", "x"), InvalidArgument);
  CHECK_THROWS_AS(parse_key_value("novalue", "x"), InvalidArgument);
}

TEST_CASE("Slurm host lists") {
  CHECK(expand_hostlist("node[01-03]") == std::vector<std::string>{"node01", "node02", "node03"});
  CHECK(expand_hostlist("a[1,3-4]b,c7") == std::vector<std::string>{"a1b", "a3b", "a4b", "c7"});
  CHECK(expand_hostlist("single") == std::vector<std::string>{"single"});
  CHECK(expand_hostlist("gpu[9-11]").at(2) == "gpu11");
}

TEST_CASE("Slurm host lists with several bracket groups expand every combination, in Slurm's order") {
  CHECK(expand_hostlist("rack[1-2]-n[01-02]") ==
        std::vector<std::string>{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"});
  CHECK(expand_hostlist("r[1-2]n[3,5]x,solo") ==
        std::vector<std::string>{"r1n3x", "r1n5x", "r2n3x", "r2n5x", "solo"});
  CHECK(expand_hostlist("a[1-200]b[1-200]").size() == 40000);
  CHECK_THROWS_AS(expand_hostlist("a[1-300]b[1-300]"), InvalidArgument);  // 90,000 > 65,536
  std::string deep;
  for (int i = 0; i < 17; ++i) deep += "x[1]";
  CHECK_THROWS_WITH_AS(expand_hostlist(deep), doctest::Contains("more than 16 bracket groups"),
                       InvalidArgument);
  CHECK(expand_hostlist(deep.substr(4)).size() == 1);
}

TEST_CASE("Slurm host lists are bounded: a short variable cannot make millions of names") {
  CHECK(expand_hostlist("n[1-65536]").size() == kMaxHosts);
  CHECK_THROWS_WITH_AS(expand_hostlist("n[1-65537]"), doctest::Contains("more than 65536 hosts"),
                       InvalidArgument);
  // Each range alone is allowed; together they used to expand to 30 million strings.
  std::string many;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) many += ',';
    many += "a[0-99999]";
  }
  CHECK_THROWS_AS(expand_hostlist(many), InvalidArgument);
}

TEST_CASE("run ids: a safe charset, no path components, bounded length") {
  for (const char* ok : {"none", "job-42", "12345.batch", "user@host:7+a_b", "A"}) {
    CAPTURE(ok);
    CHECK(parse_run_id(ok, "x") == ok);
  }
  CHECK(parse_run_id(std::string(kMaxRunIdLength, 'a'), "x").size() == kMaxRunIdLength);
  for (const std::string& bad :
       std::vector<std::string>{"../../x", "a/b", "..", ".hidden", "", "sp ace", "semi;colon", "new\nline",
                                std::string("nul\0x", 5), std::string(kMaxRunIdLength + 1, 'a')}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_run_id(bad, "rdzv_id (from --rdzv-id)"), doctest::Contains("is not a run id"),
                         InvalidArgument);
  }
}
