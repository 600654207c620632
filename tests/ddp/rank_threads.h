#pragma once
// Threads as ranks: run_ranks(world, fn) builds one process group per thread over a shared
// in-process HashStore (a fresh PrefixStore per call) and runs fn(rank, group) on each.
// The first exception of any rank is rethrown in the caller after every thread has ended
// (a failed rank's group is dropped, so its peers fail too instead of hanging).
// The backend: DDP_TEST_BACKEND, else the first of tcp, gloo that was built.
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "test_env.h"

namespace ddp::testing {

inline std::string test_backend() {
  if (auto b = test_env::get("DDP_TEST_BACKEND")) return *b;
  auto built = comm::available_backends();
  for (const char* pick : {"tcp", "gloo"}) {
    for (const auto& b : built) {
      if (b == pick) return b;
    }
  }
  return built.empty() ? "none" : built.front();
}

inline std::shared_ptr<rdzv::Store> shared_store() {
  static auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  return store;
}

inline void run_ranks(int world, const std::function<void(int, comm::ProcessGroupPtr)>& fn,
                      Millis timeout = Millis(60'000)) {
  static std::atomic<int> next_id{0};
  auto store = std::make_shared<rdzv::PrefixStore>("run" + std::to_string(next_id++), shared_store());
  const std::string backend = test_backend();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GroupSetup setup;
        setup.store = store;
        setup.rank = r;
        setup.size = world;
        setup.options.timeout = timeout;
        for (int i = 0; i < world; ++i) setup.global_ranks.push_back(i);
        setup.name = "test";
        comm::ProcessGroupPtr group = comm::create_group(backend, setup);
        fn(r, group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ddp::testing
