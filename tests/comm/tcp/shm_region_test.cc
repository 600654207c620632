// ShmRegion and ShmRegions, threads as ranks over one HashStore: every rank maps every rank's
// object, sizes must agree, a rank that never comes is named, and find() gives the same tag on
// every rank exactly for the same region, offset and length.
#include "comm/tcp/shm_region.h"

#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

// Runs body(rank, store) on `world` threads (shm_test_util.h's run_ranks) over one store;
// returns each rank's error message ("" if none).
std::vector<std::string> on_ranks(int world, const std::function<void(int, rdzv::Store&)>& body,
                                  rdzv::Store* shared = nullptr) {
  rdzv::HashStore own;
  rdzv::Store& store = shared ? *shared : own;
  std::vector<std::string> out;
  for (const auto& e : run_ranks(world, [&](int r) { body(r, store); })) out.push_back(what(e));
  return out;
}

ShmRegion::Setup setup(rdzv::Store& store, int rank, int world, size_t bytes,
                       Millis timeout = Millis(10'000)) {
  ShmRegion::Setup s;
  s.store = &store;
  s.rank = rank;
  s.world = world;
  s.id = 7;
  s.bytes = bytes;
  s.timeout = timeout;
  return s;
}

}  // namespace

TEST_CASE("ShmRegion: every rank maps every rank's memory") {
  std::vector<std::shared_ptr<ShmRegion>> regions(3);
  auto errors = on_ranks(3, [&](int r, rdzv::Store& store) {
    regions[static_cast<size_t>(r)] = ShmRegion::create(setup(store, r, 3, 8192));
  });
  for (auto& e : errors) CHECK(e.empty());
  for (int r = 0; r < 3; ++r) {
    auto& region = *regions[static_cast<size_t>(r)];
    CHECK(region.world() == 3);
    CHECK(region.bytes() == 8192);
    std::memset(region.mine(), 'a' + r, 8192);
  }
  for (int r = 0; r < 3; ++r) {
    for (int p = 0; p < 3; ++p) CHECK(regions[static_cast<size_t>(r)]->base(p)[4000] == 'a' + p);
  }
}

TEST_CASE("ShmRegion: a rank asking for another size is an InvalidArgument naming both") {
  auto errors = on_ranks(
      2, [&](int r, rdzv::Store& store) { ShmRegion::create(setup(store, r, 2, r == 0 ? 4096 : 8192)); });
  CHECK(errors[0].find("rank 0 asked for 4096 bytes but rank 1 for 8192") != std::string::npos);
  CHECK(errors[1].find("rank 1 asked for 8192 bytes but rank 0 for 4096") != std::string::npos);
}

TEST_CASE("ShmRegion: a rank that never allocates is a TimeoutError naming it") {
  auto errors = on_ranks(3, [&](int r, rdzv::Store& store) {
    if (r != 2) ShmRegion::create(setup(store, r, 3, 4096, Millis(200)));
  });
  CHECK(errors[0].find("ranks [2] did not allocate") != std::string::npos);
  CHECK(errors[1].find("ranks [2] did not allocate") != std::string::npos);
}

TEST_CASE("ShmRegions::find: inside one region only; the same tag on every rank for the same view") {
  std::vector<std::shared_ptr<ShmRegion>> regions(2);
  on_ranks(2, [&](int r, rdzv::Store& store) {
    regions[static_cast<size_t>(r)] = ShmRegion::create(setup(store, r, 2, 8192));
  });
  ShmRegions at0, at1;
  at0.add(regions[0]);
  at1.add(regions[1]);
  auto v0 = at0.find(regions[0]->mine() + 64, 1000, 5);
  auto v1 = at1.find(regions[1]->mine() + 64, 1000, 5);
  REQUIRE(v0);
  REQUIRE(v1);
  CHECK(v0->tag == v1->tag);
  CHECK(v0->bufs[1] == regions[0]->base(1) + 64);
  CHECK(v1->bufs[0] == regions[1]->base(0) + 64);
  CHECK(at1.find(regions[1]->mine() + 128, 1000, 5)->tag != v0->tag);  // another offset
  CHECK(at1.find(regions[1]->mine() + 64, 999, 5)->tag != v0->tag);    // another length
  CHECK(at1.find(regions[1]->mine() + 64, 1000, 6)->tag != v0->tag);   // another op
  CHECK_FALSE(at0.find(regions[0]->mine() + 8000, 1000, 5));           // runs past the end
  CHECK_FALSE(at0.find(regions[1]->mine(), 16, 5));                    // another rank's mapping
  int local = 0;
  CHECK_FALSE(at0.find(&local, sizeof local, 5));
  // A region its owner dropped is not found (the finder's own view keeps it alive meanwhile).
  v0.reset();
  const char* gone = regions[0]->mine();
  regions[0].reset();
  CHECK_FALSE(at0.find(gone, 16, 5));
  CHECK(at0.empty());
}

TEST_CASE("ShmRegion: an entry in the store that is not a tcp object's name is refused, naming the rank") {
  // Rank 1's entry, written by someone else: the right size, but a name that is not ours.
  for (const char* bogus : {"8192 /etc-passwd", "8192 ../../dev/mem", "8192", "18446744073709551615 /x"}) {
    CAPTURE(bogus);
    rdzv::HashStore s;
    s.set("tcp/region/7/name/1", std::string(bogus));
    s.set("tcp/region/7/mapped/1", std::string("1"));
    auto errors = on_ranks(
        1, [&](int, rdzv::Store& st) { ShmRegion::create(setup(st, 0, 2, 8192, Millis(2000))); }, &s);
    CHECK(errors[0].find("rank 1") != std::string::npos);
    CHECK(errors[0].find("allocate (group memory #7)") != std::string::npos);
  }
}
