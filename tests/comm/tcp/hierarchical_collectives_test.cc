// HostLayout: where each rank of a group sits, from the ranks' same-host keys; and
// HierarchicalCollectives' all_reduce over real child groups, four threads as ranks in two
// "hosts" of two, with and without a second thread for the steps within the host, and measured
// between the two, and its errors. (Across network namespaces, tests/netns runs the conformance matrix over
// whole hierarchical groups.)
#include "comm/tcp/hierarchical_collectives.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "tests/comm/tcp/hierarchy_test_util.h"
#include "tests/comm/tcp/tcp_test_util.h"

using namespace ddp::comm::tcp;
using ddp::Millis;
using ddp::comm::Buffer;
using ddp::comm::DType;
using ddp::comm::ProcessGroupPtr;
using ddp::comm::ReduceOp;
using ddp::comm::tcp::testing::run_hierarchy;
using ddp::comm::tcp::testing::ScopedEnv;

// The medium plan.h gives a group of this layout.
static TransportKind medium_of(const HostLayout& l) {
  const GroupFacts facts{
      .world = static_cast<int>(l.host_of.size()), .hosts = l.hosts, .per_host = l.per_host};
  return plan(facts, nullptr).medium;
}

TEST_CASE("host-major ranks: hosts by lowest rank, local and cross indices in rank order") {
  const HostLayout l = HostLayout::of({"a", "a", "b", "b"});
  CHECK(l.hosts == 2);
  CHECK(l.per_host == 2);
  CHECK(medium_of(l) == TransportKind::kHierarchical);
  CHECK(l.host_of == std::vector<int>{0, 0, 1, 1});
  CHECK(l.local_of == std::vector<int>{0, 1, 0, 1});
  CHECK(l.cross_of == std::vector<int>{0, 0, 1, 1});
}

TEST_CASE("interleaved ranks: a rank's index in each child group is its position there") {
  // Host a holds ranks 0 and 3, host b ranks 1 and 2: the local-index-1 group is {2, 3}, where
  // rank 2 (host b) comes first.
  const HostLayout l = HostLayout::of({"a", "b", "b", "a"});
  CHECK(l.host_of == std::vector<int>{0, 1, 1, 0});
  CHECK(l.local_of == std::vector<int>{0, 0, 1, 1});
  CHECK(l.cross_of == std::vector<int>{0, 1, 0, 1});
  CHECK(medium_of(l) == TransportKind::kHierarchical);
}

TEST_CASE("layouts that are not hierarchical") {
  CHECK(medium_of(HostLayout::of({"a", "a", "a"})) == TransportKind::kShm);  // one host
  CHECK(HostLayout::of({"a", "a", "a"}).hosts == 1);
  CHECK(medium_of(HostLayout::of({"a", "b", "c"})) == TransportKind::kSocket);  // one rank per host
  const HostLayout uneven = HostLayout::of({"a", "a", "b"});
  CHECK(uneven.per_host == 0);
  CHECK(medium_of(uneven) == TransportKind::kSocket);
  CHECK(HostLayout::of({}).hosts == 0);
}

namespace {

OpContext all_reduce_context(const std::vector<float>& v, ReduceOp op, uint64_t seq, Millis timeout) {
  static const std::string name = "world";
  OpContext ctx;
  ctx.desc = {OpKind::kAllReduce, DType::kFloat32, op, -1, v.size(), seq};
  ctx.group = &name;
  ctx.timeout = timeout;
  ctx.deadline = ddp::Deadline(timeout);
  return ctx;
}

void all_reduce(HierarchicalCollectives& h, std::vector<float>& v, ReduceOp op, uint64_t seq,
                Millis timeout) {
  const Buffer b{v.data(), v.size(), DType::kFloat32, {}};
  h.run(all_reduce_context(v, op, seq, timeout), b, b);
}

void all_reduce(HierarchicalCollectives& h, const Buffer& b, ReduceOp op, uint64_t seq) {
  const std::vector<float> shape(b.count);
  h.run(all_reduce_context(shape, op, seq, Millis(60'000)), b, b);
}

float input(int rank, size_t i) { return static_cast<float>(rank + 1) + static_cast<float>(i % 7); }

}  // namespace

TEST_CASE(
    "hierarchical all_reduce in segments: every rank gets the sum and the average, the steps within the host "
    "on a second thread or not") {
  for (OverlapSetting overlap : {OverlapSetting::kOff, OverlapSetting::kOn}) {
    CAPTURE(static_cast<int>(overlap));
    run_hierarchy(overlap, [](HierarchicalCollectives& h, int r) {
      uint64_t seq = 0;
      for (size_t n : {size_t{6}, size_t{4099}, size_t{100003}}) {  // 1 segment, 4, 8 (and a tail)
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = input(r, i);
        all_reduce(h, v, ReduceOp::kSum, seq++, Millis(60'000));
        for (size_t i = 0; i < n; ++i) {
          const float want = 10.0F + 4.0F * static_cast<float>(i % 7);  // (1 + 2 + 3 + 4) + 4 (i % 7)
          if (v[i] != want)
            throw std::runtime_error("sum wrong at " + std::to_string(i) + " of " + std::to_string(n));
        }
        for (size_t i = 0; i < n; ++i) v[i] = input(r, i);
        all_reduce(h, v, ReduceOp::kAvg, seq++, Millis(60'000));
        for (size_t i = 0; i < n; ++i) {
          const float want = 2.5F + static_cast<float>(i % 7);
          if (v[i] != want)
            throw std::runtime_error("avg wrong at " + std::to_string(i) + " of " + std::to_string(n));
        }
      }
    });
  }
}

TEST_CASE(
    "hierarchical all_reduce in the host's group memory: each segment's steps within the host run in place, "
    "sum and average exact, the steps on a second thread or not") {
  // Slots of 4 KiB: a segment of 100003 floats' 8 (50 KB) is past the one-shot size.
  ScopedEnv env(
      {{"DDP_TCP_SHM_SLOT_BYTES", std::string("4096")}, {"DDP_TCP_SHM_ONESHOT_BYTES", std::string("1024")}});
  for (OverlapSetting overlap : {OverlapSetting::kOff, OverlapSetting::kOn}) {
    CAPTURE(static_cast<int>(overlap));
    run_hierarchy(overlap, [](HierarchicalCollectives& h, int r) {
      auto mem = h.local()->allocate(1 << 20);
      if (!mem->shared()) throw std::runtime_error("the host's group memory is not shared");
      const TcpProcessGroup& local = *h.local();
      constexpr size_t n = 100003;  // 8 segments and a 1-element tail
      uint64_t seq = 0;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        const Buffer b = mem->view(n, DType::kFloat32, 4096);
        auto* v = static_cast<float*>(b.data);
        for (size_t i = 0; i < n; ++i) v[i] = input(r, i);
        const uint64_t before = local.direct_ops();
        all_reduce(h, b, op, seq++);
        for (size_t i = 0; i < n; ++i) {
          const float want = op == ReduceOp::kSum ? 10.0F + 4.0F * static_cast<float>(i % 7)
                                                  : 2.5F + static_cast<float>(i % 7);
          if (v[i] != want) throw std::runtime_error("wrong at " + std::to_string(i));
        }
        // Each of the 8 segments: its reduce_scatter and its all_gather.
        if (local.direct_ops() - before != 16)
          throw std::runtime_error(std::to_string(local.direct_ops() - before) + " steps in place, not 16");
      }
    });
  }
}

TEST_CASE(
    "hierarchical all_reduce, overlap measured (auto): split and overlapped in turn as the probes ask, every "
    "rank right each time, and the ranks agree on the way") {
  // 40 all_reduces of 8 segments: probes on the 4th and 5th ops and later, each followed by
  // the ranks' agreement (a small all_reduce of their figures), so any rank taking another way
  // or skipping an agreement would hang or get a wrong sum.
  std::mutex mu;
  std::vector<std::string> ways;
  run_hierarchy(OverlapSetting::kAuto, [&](HierarchicalCollectives& h, int r) {
    const std::vector<LargeWay> allowed = h.large_ways();
    if (allowed.size() != 2 || allowed[0] != LargeWay::kSplit || allowed[1] != LargeWay::kOverlapped)
      throw std::runtime_error("auto without flat sockets: not split, then overlapped");
    constexpr size_t n = 100003;
    for (uint64_t seq = 0; seq < 40; ++seq) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = input(r, i + seq);
      all_reduce(h, v, ReduceOp::kSum, seq, Millis(60'000));
      for (size_t i = 0; i < n; ++i) {
        if (v[i] != 10.0F + 4.0F * static_cast<float>((i + seq) % 7))
          throw std::runtime_error("sum wrong at " + std::to_string(i) + ", op " + std::to_string(seq));
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    ways.emplace_back(to_string(h.large_way(n * sizeof(float))));
  });
  REQUIRE(ways.size() == 4);
  for (const auto& w : ways) CHECK(w == ways.front());
}

TEST_CASE(
    "hierarchical all_reduce, rank 2 absent: the others fail with an error, never hang (a 1.5 s op, 20 s "
    "bound)") {
  // Rank 2 keeps its groups but never calls. Rank 0's step across hosts (with rank 2) fails
  // while its second thread waits to gather; rank 3's reduce_scatter within its host (with rank
  // 2) fails on that thread; rank 1's step across (with rank 3, which never gets there) fails.
  for (OverlapSetting overlap : {OverlapSetting::kOff, OverlapSetting::kOn}) {
    CAPTURE(static_cast<int>(overlap));
    std::atomic<int> ended{0};
    run_hierarchy(overlap, [&](HierarchicalCollectives& h, int r) {
      if (r == 2) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (ended.load() < 3 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return;
      }
      std::vector<float> v(100003, 1.0F);
      const auto start = std::chrono::steady_clock::now();
      bool failed = false;
      try {
        all_reduce(h, v, ReduceOp::kSum, 0, Millis(1500));
      } catch (const ddp::Error&) {
        failed = true;
      }
      const auto took = std::chrono::steady_clock::now() - start;
      ++ended;
      if (!failed)
        throw std::runtime_error("rank " + std::to_string(r) + ": the all_reduce succeeded without rank 2");
      if (took > std::chrono::seconds(20))
        throw std::runtime_error("rank " + std::to_string(r) + ": the failure took over 20 s");
    });
  }
}

TEST_CASE(
    "hierarchical small all_reduce started on the caller's thread: done there when every rank is; with a "
    "late rank, left where it stands (within the host or across) and finished, every rank right") {
  std::mutex mu;
  std::vector<std::string> wrong;  // ranks not left where expected
  // Counts the ranks wait on (an event each, never a sleep); a rank that never comes is an error.
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    int at_start = 0, returned = 0;
    void bump(int& count) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++count;
      }
      cv.notify_all();
    }
    void wait_for(int& count, int n) {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return count >= n; }))
        throw std::runtime_error("the other ranks never came");
    }
  } gate;
  run_hierarchy(
      OverlapSetting::kOff,
      [&](HierarchicalCollectives& h, int r) {
        std::vector<float> v(5);
        const Buffer b{v.data(), v.size(), DType::kFloat32, {}};
        const OpDesc desc{OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, v.size(), 0};
        if (!h.starts_here(desc, b)) throw std::runtime_error("a 20-byte all_reduce does not start here");
        std::vector<float> big(1025);
        const Buffer bb{big.data(), big.size(), DType::kFloat32, {}};
        if (h.starts_here({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, big.size(), 0}, bb) ||
            h.starts_here({OpKind::kBroadcast, DType::kFloat32, ReduceOp::kSum, 0, v.size(), 0}, b) ||
            !h.starts_here({OpKind::kBarrier, DType::kUInt8, ReduceOp::kSum, -1, 0, 0}, {})) {
          throw std::runtime_error("past small_bytes or a broadcast starts here, or a barrier does not");
        }
        auto check = [&](float want, const char* what) {
          for (float x : v) {
            if (x != want) throw std::runtime_error(std::string(what) + ": " + std::to_string(x));
          }
        };
        // Everyone there: each step completes within the (generous) budget.
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r + 1);
        HierarchicalStart s;
        auto ctx = all_reduce_context(v, ReduceOp::kSum, 0, Millis(60'000));
        if (!h.start(ctx, b, std::chrono::microseconds(10'000'000), s))
          throw std::runtime_error("not done with every rank there");
        check(10.0F, "sum");
        // Rank 1 late: it comes only once ranks 0, 2 and 3 are back from start(). Rank 0 cannot
        // finish within its host without it; ranks 2 and 3, let into start() together, meet
        // within their host and wait across (for host 0, which cannot be done). Each Work is
        // finished later.
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r + 1);
        if (r == 1) gate.wait_for(gate.returned, 3);
        if (r >= 2) {
          gate.bump(gate.at_start);
          gate.wait_for(gate.at_start, 2);
        }
        s = {};
        ctx = all_reduce_context(v, ReduceOp::kAvg, 1, Millis(60'000));
        const bool done = h.start(ctx, b,
                                  std::chrono::microseconds(r == 1   ? 10'000'000
                                                            : r == 0 ? 200'000
                                                                     : 1'000'000),
                                  s);
        if (r != 1) gate.bump(gate.returned);
        if ((r == 0 && (done || s.crossing)) || (r >= 2 && (done || !s.crossing))) {
          std::lock_guard<std::mutex> lock(mu);
          wrong.push_back("rank " + std::to_string(r) + ": done " + std::to_string(done) + ", crossing " +
                          std::to_string(s.crossing));
        }
        if (!done) h.finish(ctx, b, s);
        check(2.5F, "avg");
      },
      64);
  std::string said;
  for (const auto& w : wrong) said += w + "; ";
  CHECK_MESSAGE(wrong.empty(), said);
}

TEST_CASE(
    "hierarchical barrier, on the worker's path and started on the caller's: nobody leaves before the last "
    "rank enters") {
  for (bool started_here : {false, true}) {
    CAPTURE(started_here);
    std::atomic<bool> last_entered{false};
    std::atomic<int> early{0};
    run_hierarchy(
        OverlapSetting::kOff,
        [&](HierarchicalCollectives& h, int r) {
          static const std::string name = "world";
          OpContext ctx;
          ctx.desc = {OpKind::kBarrier, DType::kUInt8, ReduceOp::kSum, -1, 0, 0};
          ctx.group = &name;
          ctx.timeout = Millis(60'000);
          ctx.deadline = ddp::Deadline(ctx.timeout);
          if (r == 3) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            last_entered = true;
          }
          if (started_here) {
            HierarchicalStart s;
            if (!h.start(ctx, {}, std::chrono::microseconds(1000), s)) h.finish(ctx, {}, s);
          } else {
            h.run(ctx, {}, {});
          }
          if (!last_entered) ++early;
        },
        64);
    CHECK(early == 0);
  }
}

namespace {

OpContext rooted_context(OpKind kind, ReduceOp op, int root, size_t count, uint64_t seq) {
  static const std::string name = "world";
  OpContext ctx;
  ctx.desc = {kind, DType::kFloat32, op, root, count, seq};
  ctx.group = &name;
  ctx.timeout = Millis(60'000);
  ctx.deadline = ddp::Deadline(ctx.timeout);
  return ctx;
}

// reduce, gather and scatter of n floats a rank from every root, on rank `r`: the root's result
// exact, and a non-root's reduce input untouched.
void check_rooted_ops(HierarchicalCollectives& h, int r, size_t n) {
  uint64_t seq = 0;
  auto fail = [&](const std::string& what, int root) {
    throw std::runtime_error(what + " (root " + std::to_string(root) + ", " + std::to_string(n) + " floats)");
  };
  for (int root = 0; root < 4; ++root) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = input(r, i);
      const Buffer b{v.data(), n, DType::kFloat32, {}};
      h.run(rooted_context(OpKind::kReduce, op, root, n, seq++), b, b);
      for (size_t i = 0; i < n; ++i) {
        const float k = static_cast<float>(i % 7);
        const float want = r != root              ? input(r, i)
                           : op == ReduceOp::kSum ? 10.0F + 4.0F * k
                           : op == ReduceOp::kAvg ? 2.5F + k
                                                  : 4.0F + k;
        if (v[i] != want) fail("reduce wrong at " + std::to_string(i), root);
      }
    }
    std::vector<float> mine(n), all(4 * n, -1.0F);
    for (size_t i = 0; i < n; ++i) mine[i] = input(r, i);
    h.run(rooted_context(OpKind::kGather, ReduceOp::kSum, root, n, seq++),
          {mine.data(), n, DType::kFloat32, {}}, {all.data(), 4 * n, DType::kFloat32, {}});
    for (size_t q = 0; r == root && q < 4; ++q) {
      for (size_t i = 0; i < n; ++i) {
        if (all[q * n + i] != input(static_cast<int>(q), i))
          fail("gather: rank " + std::to_string(q) + "'s block", root);
      }
    }
    for (size_t q = 0; q < 4; ++q) {
      for (size_t i = 0; i < n; ++i) all[q * n + i] = r == root ? input(static_cast<int>(q), i) : -1.0F;
    }
    std::fill(mine.begin(), mine.end(), -1.0F);
    h.run(rooted_context(OpKind::kScatter, ReduceOp::kSum, root, n, seq++),
          {all.data(), 4 * n, DType::kFloat32, {}}, {mine.data(), n, DType::kFloat32, {}});
    for (size_t i = 0; i < n; ++i) {
      if (mine[i] != input(r, i)) fail("scatter: this rank's block", root);
    }
  }
}

}  // namespace

TEST_CASE(
    "hierarchical reduce, gather and scatter (a step within the host, a step across through the root's local "
    "index): exact at every root, host by host and interleaved, a non-root's input untouched") {
  const std::vector<std::vector<std::string>> layouts = {{"a", "a", "b", "b"}, {"a", "b", "b", "a"}};
  for (const auto& hosts : layouts) {
    CAPTURE(hosts[1]);
    for (size_t n : {size_t{5}, size_t{40'000}}) {
      CAPTURE(n);
      run_hierarchy(
          OverlapSetting::kOff, [n](HierarchicalCollectives& h, int r) { check_rooted_ops(h, r, n); }, 0,
          hosts);
    }
  }
}
