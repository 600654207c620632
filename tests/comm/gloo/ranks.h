#pragma once
// Threads-as-ranks for backend tests: run fn(group, rank) on n threads, each with its own
// group over one shared HashStore; rethrows the first exception in the calling thread.
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/group_setup.h"
#include "rendezvous/hash_store.h"

namespace ddp::test {

using GroupFactory = comm::ProcessGroupPtr (*)(const comm::GroupSetup&);

inline void run_ranks(GroupFactory make, int n, const std::function<void(comm::ProcessGroup&, int)>& fn,
                      Millis timeout = Millis(60'000)) {
  auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto group = make(setup_for(store, r, n, timeout));
        fn(*group, r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace ddp::test
