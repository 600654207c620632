#include "comm/agreed_settings.h"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;

namespace {

// Runs agree_settings on `values.size()` threads over one store; each rank's error text ("" if none).
std::vector<std::string> agree(const std::vector<SettingValues>& values) {
  rdzv::HashStore store;
  const int size = static_cast<int>(values.size());
  std::vector<std::string> errors(values.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        agree_settings(store, {r, size, "g", "settings", Millis(20'000)}, values[static_cast<size_t>(r)]);
      } catch (const InvalidArgument& e) {
        errors[static_cast<size_t>(r)] = e.message();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("agree_settings: equal values pass; one rank's difference fails every rank, naming both values") {
  const SettingValues same = {{"DDP_A", "1"}, {"DDP_B", "auto"}};
  CHECK(agree({same, same, same}) == std::vector<std::string>{"", "", ""});

  SettingValues other = same;
  other["DDP_B"] = "ring";
  const auto errors = agree({same, same, other});
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(
        e.find(
            "group 'g': DDP_B must be the same on every rank, but rank 2 has 'ring' and rank 0 has 'auto'") !=
        std::string::npos);
  }
  SettingValues unset = same;
  unset["DDP_A"] = "";
  CHECK(agree({same, unset})[1].find("rank 1 has unset and rank 0 has '1'") != std::string::npos);
}

TEST_CASE("encode_values and decode_values round-trip; a line without '=' is an error") {
  const SettingValues v = {{"a", "x=y"}, {"b", ""}, {"c", "/dev/shm/name"}};
  CHECK(decode_values(encode_values(v)) == v);
  CHECK_THROWS_AS(decode_values("a=1\nnonsense\n"), InvalidArgument);
}

TEST_CASE("group_values: the group-scoped settings of a section, as ranks compare them") {
  ::setenv("DDP_TCP_SOCKET_ALGO", "RING", 1);
  ::setenv("DDP_TCP_SPIN_US", "5", 1);  // per process: not compared
  const SettingValues v = group_values(settings::Section::kTcp);
  CHECK(v.at("DDP_TCP_SOCKET_ALGO") == "ring");
  CHECK(v.at("DDP_TCP_TRANSPORT") == "auto");
  CHECK(v.count("DDP_TCP_SPIN_US") == 0);
  ::unsetenv("DDP_TCP_SOCKET_ALGO");
  ::unsetenv("DDP_TCP_SPIN_US");
}
