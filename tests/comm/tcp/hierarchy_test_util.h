#pragma once
// Test helper: four threads as ranks of a hierarchical group in two "hosts" of two, each with
// its two child groups and a HierarchicalCollectives over them.
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp/hierarchical_collectives.h"
#include "comm/tcp/tcp_process_group.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "tests/comm/tcp/tcp_test_util.h"

namespace ddp::comm::tcp::testing {

// Ranks 0, 1 on host "a", 2, 3 on host "b" (or as `host_keys` place them). Each thread makes its two child
// groups as a hierarchical group does (its host's ranks, then the ranks with its local index; ops run on the
// issuing thread) and a HierarchicalCollectives over them (no flat sockets; `overlap`: the ways of large
// all_reduces, measured under auto): unless small_bytes says, small all_reduces take the segmented path too
// (small_bytes 0), in 4 KiB segments. The threads share one host, so both children use shared memory: what is
// tested is the decomposition and its threads.
inline void run_hierarchy(OverlapSetting overlap,
                          const std::function<void(HierarchicalCollectives&, int)>& body,
                          size_t small_bytes = 0,
                          const std::vector<std::string>& host_keys = {"a", "a", "b", "b"}) {
  auto store = std::make_shared<rdzv::HashStore>();
  static std::atomic<int> round{0};
  std::string prefix = "h";  // (not "h" + ...: GCC 12 -Wrestrict false positive)
  prefix += std::to_string(round++);
  prefix += "/";
  const HostLayout layout = HostLayout::of(host_keys);
  // The ranks for which `same` holds, in rank order: a child group's members.
  auto members = [&](const std::function<bool(size_t)>& same) {
    std::vector<int> m;
    for (size_t q = 0; q < 4; ++q) {
      if (same(q)) m.push_back(static_cast<int>(q));
    }
    return m;
  };
  std::vector<std::exception_ptr> errors(4);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      try {
        const auto me = static_cast<size_t>(r);
        auto child = [&](const std::string& name, int rank, std::vector<int> members) {
          auto s =
              setup_for(std::make_shared<rdzv::PrefixStore>(prefix + name, store), rank, 2, Millis(60'000));
          s.name = name;
          s.global_ranks = std::move(members);
          return TcpProcessGroup::create(s, {true});
        };
        const int host = layout.host_of[me], local = layout.local_of[me];
        HierarchyChildren children;
        children.local = child("host" + std::to_string(host), local,
                               members([&](size_t q) { return layout.host_of[q] == host; }));
        children.cross_tcp = child("across" + std::to_string(local), layout.cross_of[me],
                                   members([&](size_t q) { return layout.local_of[q] == local; }));
        children.cross = children.cross_tcp;
        HierarchicalCollectives::Options o;
        o.rank = r;
        o.world = 4;
        o.layout = layout;
        o.small_bytes = small_bytes;
        o.segment_bytes = 4096;
        o.ways.overlap = overlap;
        HierarchicalCollectives h(o, std::move(children), nullptr);
        body(h, r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ddp::comm::tcp::testing
