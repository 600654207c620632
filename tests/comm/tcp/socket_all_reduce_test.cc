// The socket all_reduce's algorithm names and hd's halving plan (its auto rule: plan_test.cc; the
// algorithms themselves run in the conformance matrix: conformance_tcp_socket_{direct,hd,ring}).
#include <doctest/doctest.h>

#include <bit>
#include <vector>

#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/socket_collectives.h"
#include "common/error.h"
#include "tests/common/settings_test_util.h"

namespace ddp::comm::tcp {
namespace {

TEST_CASE(
    "DDP_TCP_SOCKET_ALGO reads as SocketAlgo, whose names are its choices; anything else names the "
    "variable") {
  const std::initializer_list<std::pair<std::string, SocketAlgo>> algos = {
      {"auto", SocketAlgo::kAuto},
      {"direct", SocketAlgo::kDirect},
      {"hd", SocketAlgo::kHalvingDoubling},
      {"ring", SocketAlgo::kRing}};
  settings::testing::check_choice_as(settings::kTcpSocketAlgo, algos);
  for (const auto& [name, algo] : algos) CHECK(to_string(algo) == name);
}

TEST_CASE(
    "hd's halving: nearest partner first, half the buffer to it; partners mirror; the kept ranges tile") {
  for (int p2 : {1, 2, 4, 8, 16}) {
    for (size_t count : {size_t{0}, size_t{5}, size_t{1000}, size_t{4099}}) {
      CAPTURE(p2);
      CAPTURE(count);
      std::vector<std::vector<HalvingStep>> plans;
      for (int v = 0; v < p2; ++v) plans.push_back(halving_plan(count, v, p2));
      std::vector<int> owner(count, -1);
      for (int v = 0; v < p2; ++v) {
        const auto& plan = plans[static_cast<size_t>(v)];
        REQUIRE(plan.size() == static_cast<size_t>(std::bit_width(static_cast<unsigned>(p2)) - 1));
        size_t off = 0, len = count;  // the range held before each step
        for (size_t k = 0; k < plan.size(); ++k) {
          const HalvingStep& s = plan[k];
          CHECK(s.partner == (v ^ (1 << k)));  // distance 1, 2, 4, ...
          CHECK(s.give_len + s.keep_len == len);
          const bool low = ((v >> k) & 1) == 0;  // keeps the lower half, gives the upper
          CHECK(s.keep_off == (low ? off : off + len / 2));
          CHECK(s.give_off == (low ? off + len / 2 : off));
          CHECK(s.give_len == (low ? len - len / 2 : len / 2));
          const HalvingStep& t = plans[static_cast<size_t>(s.partner)][k];  // the partner's step
          CHECK(t.partner == v);
          CHECK(t.give_off == s.keep_off);
          CHECK(t.give_len == s.keep_len);
          CHECK(t.keep_off == s.give_off);
          off = s.keep_off;
          len = s.keep_len;
        }
        for (size_t i = off; i < off + len; ++i) {
          CHECK(owner[i] == -1);
          owner[i] = v;
        }
      }
      for (size_t i = 0; i < count; ++i) REQUIRE(owner[i] >= 0);  // every element ends with one rank
    }
  }
  // 8 ranks, 2 a host (numbered host by host): the half goes to the rank on the same host.
  const auto plan = halving_plan(1024, 2, 8);
  CHECK(plan[0].partner == 3);
  CHECK(plan[0].give_len == 512);
  CHECK(plan[1].give_len == 256);
  CHECK(plan[2].give_len == 128);
}

}  // namespace
}  // namespace ddp::comm::tcp
