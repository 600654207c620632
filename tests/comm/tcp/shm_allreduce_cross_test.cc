// The cross-memory collectives (private buffers, by process_vm_readv/writev; all_reduce, and
// all_gather, one-shot ones from a page up too, and reduce_scatter: shm_exchange_cross.h): through
// TcpProcessGroup with threads as ranks (every dtype and reduce op, worlds 2 and 3, beside the
// other ops and group memory) and across real processes (exact results; a rank that offers
// nothing makes every rank stage through the slots), and a peer's buffer that cannot be read
// (unmapped: BackendError; its process gone: NetworkError), naming it. A peer killed mid-op:
// tcp_processes_test.
#include "comm/tcp/shm_allreduce_cross.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include <sys/wait.h>
#include <unistd.h>

#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "rendezvous/file_store.h"
#include "shm_test_util.h"
#include "tcp_ops_check.h"
#include "tcp_test_util.h"
#include "tcp_values.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

// Small slots (the chunk of a cross-memory pass) and one-shot limit: ops of a few thousand
// elements take many chunks.
std::map<std::string, std::optional<std::string>> cma(const std::string& setting) {
  return {{"DDP_TCP_TRANSPORT", std::string("shm")},
          {"DDP_TCP_SHM_SLOT_BYTES", std::string("4096")},
          {"DDP_TCP_SHM_ONESHOT_BYTES", std::string("1024")},
          {"DDP_TCP_CMA", setting}};
}

std::shared_ptr<TcpProcessGroup> join(const std::string& path, int rank, int size) {
  auto store = std::make_shared<rdzv::FileStore>(path, Millis(60'000));
  return TcpProcessGroup::create(setup_for(store, rank, size));
}

}  // namespace

TEST_CASE("cross-memory all_reduce: every dtype and reduce op, worlds 2 and 3, each element exact") {
  ScopedEnv env(cma("on"));
  for (int w : {2, 3}) {
    CAPTURE(w);
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      uint64_t ops = 0;
      for (DType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (is_bitwise(op) && !is_integer(t)) continue;
          for (size_t n : {size_t{5003}, size_t{40000}}) {  // uneven shares; many chunks
            auto f = filled(t, n);
            check_all_reduce_in(pg, r, f.buffer(), op);
            ++ops;
          }
        }
      }
      if (pg.cross_memory_ops() != ops) throw std::runtime_error("not every all_reduce ran by cross-memory");
    });
  }
}

TEST_CASE("cross-memory all_gather and reduce_scatter: every dtype, worlds 2 and 3, exact; each ran so") {
  ScopedEnv env(cma("on"));
  for (int w : {2, 3}) {
    CAPTURE(w);
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      for (DType t : kAllTypes) {
        for (size_t n : {size_t{5003}, size_t{40000}}) {
          const uint64_t before = pg.cross_memory_ops();
          check_all_to_all_family(pg, r, t, n);  // all_gather, reduce_scatter (sum), all_to_all
          if (pg.cross_memory_ops() != before + 2)
            throw std::runtime_error("all_gather and reduce_scatter did not both run by cross-memory");
        }
      }
      // reduce_scatter's other ops, in place and not.
      for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kMax}) {
        const size_t n = 9001, total = n * static_cast<size_t>(w);
        auto in = filled(DType::kFloat32, total);
        for (size_t k = 0; k < total; ++k)
          put(DType::kFloat32, in.bytes.data(), k, value(DType::kFloat32, op, r, k));
        auto out = filled(DType::kFloat32, n);
        pg.reduce_scatter(in.buffer(), out.buffer(), {op})->wait();
        check_oracle(DType::kFloat32, op, w, static_cast<size_t>(r) * n, n);
        for (size_t i = 0; i < n; ++i) {
          expect_at("reduce_scatter", DType::kFloat32, out.bytes.data(), i,
                    reference(op, DType::kFloat32, w, static_cast<size_t>(r) * n + i));
        }
      }
    });
  }
}

TEST_CASE(
    "one-shot all_gathers go by cross-memory from a page up, issued inline, exact; smaller ones stage") {
  auto vars = cma("on");
  vars["DDP_TCP_SHM_SLOT_BYTES"] = std::string("65536");  // inputs up to 64 KiB: one-shot
  ScopedEnv env(vars);
  for (int w : {2, 3}) {
    CAPTURE(w);
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      for (DType t : kAllTypes) {
        for (size_t bytes : {size_t{4096}, size_t{20000}, size_t{65536}}) {
          const uint64_t before = pg.cross_memory_ops();
          check_all_gather(pg, r, t, bytes / dtype_size(t));
          if (pg.cross_memory_ops() != before + 1) throw std::runtime_error("a one-shot all_gather staged");
        }
        const uint64_t before = pg.cross_memory_ops();
        check_all_gather(pg, r, t, 4000 / dtype_size(t));
        if (pg.cross_memory_ops() != before)
          throw std::runtime_error("an all_gather under a page went cross");
      }
    });
  }
}

TEST_CASE("auto: one-shot all_gathers, whichever way rank 0's chooser takes, stay exact over many rounds") {
  auto vars = cma("auto");
  vars["DDP_TCP_SHM_SLOT_BYTES"] = std::string("65536");
  ScopedEnv env(vars);
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    for (int round = 0; round < 60; ++round) {
      check_all_gather(pg, r, DType::kFloat32, round % 3 == 0 ? 1024 : 9001);
      if (round % 10 == 0) check_all_reduce(pg, r, DType::kFloat32, ReduceOp::kSum, 3001);
    }
  });
}

TEST_CASE("DDP_TCP_CMA=off: no all_reduce runs so, and the results are the same") {
  ScopedEnv env(cma("off"));
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    for (int round = 0; round < 20; ++round) {
      auto f = filled(DType::kFloat32, 30001);
      check_all_reduce_in(pg, r, f.buffer(), ReduceOp::kSum);
    }
    if (pg.cross_memory_ops() != 0) throw std::runtime_error("an all_reduce ran by cross-memory");
  });
}

TEST_CASE("auto: whichever way rank 0's chooser takes, many rounds beside every other op stay exact") {
  ScopedEnv env(cma("auto"));
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    for (int round = 0; round < 40; ++round) {
      auto f = filled(DType::kFloat32, 7001);
      check_all_reduce_in(pg, r, f.buffer(), round % 2 ? ReduceOp::kSum : ReduceOp::kMax);
      if (round % 8 == 0) check_everything(pg, r, DType::kFloat32, 3001);
    }
  });
}

TEST_CASE("on: mixed with every other op and with group memory, many rounds, counters in step") {
  ScopedEnv env(cma("on"));
  run_ranks(2, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 16);
    auto plain = filled(DType::kInt32, 10000);
    auto ran = [&](const Buffer& b, ReduceOp op) {  // whether this all_reduce ran by cross-memory
      const uint64_t before = pg.cross_memory_ops();
      check_all_reduce_in(pg, r, b, op);
      return pg.cross_memory_ops() == before + 1;
    };
    for (int round = 0; round < 10; ++round) {
      if (!ran(plain.buffer(), ReduceOp::kSum))
        throw std::runtime_error("private buffers: not by cross-memory");
      if (ran(mem->view(10000, DType::kInt32), ReduceOp::kSum))
        throw std::runtime_error("group memory: not direct");
      // Rank 1's buffer in group memory, rank 0's not: no direct pass; rank 0 chose
      // cross-memory and rank 1 offers its buffer too, so the op runs so.
      if (!ran(r == 1 ? mem->view(10000, DType::kInt32) : plain.buffer(), ReduceOp::kMax))
        throw std::runtime_error("mixed buffers: not by cross-memory");
      check_everything(pg, r, DType::kFloat32, 3001);
    }
    if (pg.direct_ops() != 10) throw std::runtime_error("expected 10 direct all_reduces");
  });
}

TEST_CASE("DDP_TCP_CMA: anything but auto, on or off fails the group's creation, naming it") {
  ScopedEnv env(cma("always"));
  CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}), doctest::Contains("DDP_TCP_CMA='always'"),
                       InvalidArgument);
}

TEST_CASE("processes: private buffers by cross-memory, exact; one rank with it off: every rank stages") {
  ScopedEnv env(cma("on"));
  for (bool one_off : {false, true}) {
    CAPTURE(one_off);
    const std::string path = temp_path("cross");
    auto codes = run_processes(3, [&](int r) {
      if (one_off && r == 1) ::setenv("DDP_TCP_CMA", "off", 1);  // this process only
      auto pg = join(path, r, 3);
      for (size_t n : {size_t{5003}, size_t{300001}}) {
        check_all_reduce(*pg, r, DType::kFloat32, ReduceOp::kSum, n);
        check_all_reduce(*pg, r, DType::kBFloat16, ReduceOp::kAvg, n);
        check_all_reduce(*pg, r, DType::kInt64, ReduceOp::kBxor, n);
      }
      const uint64_t reduced = pg->cross_memory_ops();
      check_everything(*pg, r, DType::kFloat32, 7001);  // all_reduce, all_gather, reduce_scatter too
      const uint64_t all = pg->cross_memory_ops();
      if (reduced != (one_off ? 0 : 6) || all != (one_off ? 0 : 9)) {
        std::fprintf(stderr, "rank %d: %llu cross-memory all_reduces, %llu ops in all\n", r,
                     static_cast<unsigned long long>(reduced), static_cast<unsigned long long>(all));
        return 2;
      }
      return 0;
    });
    std::remove(path.c_str());
    CHECK(codes == std::vector<int>{0, 0, 0});
  }
}

namespace {

// Rank 0 of two runs a cross-memory all_reduce whose peer (rank 1, announced as process `pid`)
// offered `theirs`; the error it throws.
std::string cross_error_with(int32_t pid, uint64_t theirs) {
  ShmRanks ranks(2);
  auto a = channel(ranks, 0);
  auto b = channel(ranks, 1);
  b->segment().announce(1, CrossProbe{pid, 0, 0});
  std::vector<float> mine(20000, 1.0f);
  const Buffer buf = view(mine);
  const Buffer peer{reinterpret_cast<void*>(theirs), buf.count,
                    buf.dtype};  // NOLINT(performance-no-int-to-ptr)
  auto ctx = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, buf.count, 0});
  b->begin(ctx, {.cross = &peer});
  a->begin(ctx, {.cross = &buf, .stores = StoreMode::kCross});
  std::vector<char> scratch(4096);
  ShmProgress at;
  ShmStep step{ctx, buf, buf, at, ShmPoll{}, nullptr, StoreMode::kCross, scratch};
  try {
    allreduce_cross_step(*a, step);
  } catch (const NetworkError& e) {
    return "NetworkError: " + e.message();
  } catch (const BackendError& e) {
    return "BackendError: " + e.message();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a peer's buffer that is not mapped is a BackendError naming it; a gone process, a NetworkError") {
  const std::string unmapped = cross_error_with(::getpid(), 4096);  // page 1: never mapped
  CHECK(unmapped.find("BackendError") != std::string::npos);
  CHECK(unmapped.find("rank 1's buffer") != std::string::npos);
  CHECK(unmapped.find("Bad address") != std::string::npos);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  std::vector<float> theirs(20000);
  const std::string gone = cross_error_with(child, reinterpret_cast<uint64_t>(theirs.data()));
  CHECK(gone.find("NetworkError") != std::string::npos);
  CHECK(gone.find("rank 1 (pid " + std::to_string(child) + ") is gone") != std::string::npos);
}
