#pragma once
// A GroupSetup for threads as ranks in backend tests: `rank` of `size` over one shared store,
// global ranks 0..size-1.
#include <memory>

#include "comm/backend.h"
#include "rendezvous/store.h"

namespace ddp::test {

inline comm::GroupSetup setup_for(std::shared_ptr<rdzv::Store> store, int rank, int size,
                                  Millis timeout = Millis(60'000)) {
  comm::GroupSetup s;
  s.store = std::move(store);
  s.rank = rank;
  s.size = size;
  s.options.timeout = timeout;
  for (int r = 0; r < size; ++r) s.global_ranks.push_back(r);
  return s;
}

}  // namespace ddp::test
