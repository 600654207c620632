// The communicator rendezvous through a store: the reader side needs no GPU; making an id runs
// NCCL's bootstrap and is left to GPU machines (Skipped elsewhere).
#include "comm/nccl/nccl_unique_id.h"

#include <doctest/doctest.h>

#include <cstring>

#include "comm/nccl/gpu.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm::nccl_backend;

TEST_CASE("nccl unique id: a reader gets the bytes under its key") {
  rdzv::HashStore store;
  rdzv::Bytes bytes(sizeof(ncclUniqueId));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  store.set("nccl/multi/k2/0", bytes);
  const ncclUniqueId id = exchange_unique_id(store, {"nccl/multi/k2/0", false, Millis(1'000), "test"});
  CHECK(std::memcmp(&id, bytes.data(), bytes.size()) == 0);
}

TEST_CASE("nccl unique id: a value of the wrong size is a BackendError naming the key") {
  rdzv::HashStore store;
  store.set("k", rdzv::Bytes(7));
  CHECK_THROWS_WITH_AS(exchange_unique_id(store, {"k", false, Millis(1'000), "test"}),
                       doctest::Contains("7-byte unique id under 'k'"), BackendError);
}

TEST_CASE("nccl unique id: no id before the deadline is a TimeoutError") {
  rdzv::HashStore store;
  CHECK_THROWS_AS(exchange_unique_id(store, {"never", false, Millis(100), "test"}), TimeoutError);
}

TEST_CASE("nccl unique id: the creator stores what it returns" * doctest::skip(!ddp::test::has_gpu())) {
  rdzv::HashStore store;
  const ncclUniqueId made = exchange_unique_id(store, {"id", true, Millis(1'000), "test"});
  const ncclUniqueId read = exchange_unique_id(store, {"id", false, Millis(1'000), "test"});
  CHECK(std::memcmp(&made, &read, sizeof(made)) == 0);
}
