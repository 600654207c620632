#pragma once
// Test helpers for the shared-memory pieces: N ranks as threads over one ShmSegment (rank 0
// creates it, the others open it by name, as a group's set-up does), each with its own
// GroupHealth, and OpContexts with a deadline.
#include <doctest/doctest.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/shm_channel.h"
#include "comm/tcp/shm_oneshot.h"
#include "comm/tcp/shm_segment.h"

namespace ddp::comm::tcp::testing {

struct ShmRanks {
  std::vector<ShmSegment> segments;  // one mapping per rank
  std::vector<std::unique_ptr<GroupHealth>> health;

  explicit ShmRanks(int world, size_t slot_bytes = 4096, size_t oneshot_bytes = 1024, int depth = 4) {
    segments.push_back(ShmSegment::create(ShmGeometry{
        .world = world, .depth = depth, .slot_bytes = slot_bytes, .oneshot_bytes = oneshot_bytes}));
    for (int r = 1; r < world; ++r) segments.push_back(ShmSegment::open(segments[0].name(), world));
    for (int r = 0; r < world; ++r) {
      health.push_back(std::make_unique<GroupHealth>());
      health.back()->init(world);
    }
    segments[0].unlink();
  }
  int world() const { return static_cast<int>(segments.size()); }
};

// Rank r's channel over its own mapping (a short spin: ranks are threads on a loaded machine).
inline std::unique_ptr<ShmChannel> channel(ShmRanks& ranks, int r, bool fingerprints = true) {
  return std::make_unique<ShmChannel>(std::move(ranks.segments[static_cast<size_t>(r)]),
                                      ShmChannel::Options{r, ranks.world(), fingerprints, 50, 1000},
                                      ranks.health[static_cast<size_t>(r)].get());
}

// Runs one op of `algorithm` to completion (blocking steps); `stores` is this rank's proposal
// (rank 0's is every rank's). Returns where the op ended.
template <typename Algorithm>
ShmProgress run_op(Algorithm algorithm, ShmChannel& ch, const OpContext& ctx, const Buffer& in,
                   const Buffer& out, StoreMode stores = StoreMode::kCached) {
  ShmProgress at;
  ch.begin(ctx, {.stores = stores, .small = oneshot_small(ctx.desc, in) ? &in : nullptr});
  ShmStep step{ctx, in, out, at, ShmPoll{}, nullptr, stores};
  while (!algorithm(ch, step)) {
  }
  ch.end(ctx);
  return at;
}

inline Buffer view(std::vector<float>& v) { return Buffer{v.data(), v.size(), DType::kFloat32}; }
inline Buffer view(std::vector<int32_t>& v) { return Buffer{v.data(), v.size(), DType::kInt32}; }

inline const std::string& test_group() {
  static const std::string name = "shm-test";
  return name;
}

inline OpContext context(OpDesc desc, Millis timeout = Millis(10000)) {
  OpContext ctx;
  ctx.desc = desc;
  ctx.group = &test_group();
  ctx.timeout = timeout;
  ctx.deadline = Deadline(timeout);
  return ctx;
}

// Runs body(rank) on `world` threads; returns each rank's exception (nullptr: none).
inline std::vector<std::exception_ptr> run_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline std::string what(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "?";
}

inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("rank ", r, ": ", what(errors[r]));
    CHECK(!errors[r]);
  }
}

}  // namespace ddp::comm::tcp::testing
