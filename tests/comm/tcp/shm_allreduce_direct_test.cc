// The direct all_reduce (in place in group memory), through TcpProcessGroup with threads as
// ranks: every dtype and reduce op, views at an offset, the fall-back when ranks' buffers are
// not all in group memory at the same place, a missing peer, and nothing left in /dev/shm.
#include "comm/tcp/shm_allreduce_direct.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "private_namespaces.h"
#include "tcp_ops_check.h"
#include "tcp_test_util.h"
#include "tcp_values.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

size_t shm_entries_of_this_process() {
  const std::string stem = "ddp-tcp-" + std::to_string(::getpid()) + "-";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind(stem, 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("direct all_reduce: every dtype and reduce op, worlds 2 and 3, each element exact") {
  ScopedEnv env(small_shm_geometry());
  for (int w : {2, 3}) {
    CAPTURE(w);
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      auto mem = pg.allocate(64 << 10);
      if (!mem->shared()) throw std::runtime_error("group memory is not shared");
      uint64_t ops = 0;
      for (DType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (is_bitwise(op) && !is_integer(t)) continue;
          // Uneven shares (5003 over 2 or 3 ranks) and the largest that fits.
          for (size_t n : {size_t{5003}, (64 << 10) / dtype_size(t)}) {
            check_all_reduce_in(pg, r, mem->view(n, t), op);
            ++ops;
          }
        }
      }
      if (pg.direct_ops() != ops) throw std::runtime_error("not every all_reduce ran direct");
    });
  }
}

TEST_CASE("direct all_reduce: a view at the same offset runs direct; different offsets fall back, exact") {
  ScopedEnv env(small_shm_geometry());
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 20);
    check_all_reduce_in(pg, r, mem->view(9000, DType::kFloat32, 4096 + 12), ReduceOp::kSum);
    if (pg.direct_ops() != 1) throw std::runtime_error("the same offset did not run direct");
    // Rank 2's view starts elsewhere: nobody may read its buffer at rank 0's offset.
    const size_t offset = r == 2 ? 64 : 0;
    check_all_reduce_in(pg, r, mem->view(9000, DType::kFloat32, offset), ReduceOp::kMax);
    if (pg.direct_ops() != 1) throw std::runtime_error("different offsets ran direct");
  });
}

TEST_CASE("direct all_reduce: one rank's buffer outside group memory: every rank falls back, exact") {
  ScopedEnv env(small_shm_geometry());
  run_ranks(2, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 16);
    auto plain = filled(DType::kInt32, 10000);
    const Buffer b = r == 0 ? mem->view(10000, DType::kInt32) : plain.buffer();
    for (int round = 0; round < 3; ++round) check_all_reduce_in(pg, r, b, ReduceOp::kSum);
    // Then both in group memory again: direct, and the counters stayed in step.
    check_all_reduce_in(pg, r, mem->view(10000, DType::kInt32), ReduceOp::kSum);
    if (pg.direct_ops() != 1) throw std::runtime_error("expected exactly one direct all_reduce");
  });
}

TEST_CASE("direct all_reduce: mixed with every other op, many rounds") {
  ScopedEnv env(small_shm_geometry());
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 16);
    for (int round = 0; round < 20; ++round) {
      check_all_reduce_in(pg, r, mem->view(7001, DType::kFloat32), ReduceOp::kSum);
      check_everything(pg, r, DType::kFloat32, 3001);
    }
    if (pg.direct_ops() != 20) throw std::runtime_error("expected 20 direct all_reduces");
  });
}

TEST_CASE("direct all_reduce: a peer that never calls it is a TimeoutError naming it") {
  ScopedEnv env(small_shm_geometry());
  CHECK(absent_peer_named([](ProcessGroup& pg, GroupMemory& mem) {
    pg.all_reduce(mem.view(10000, DType::kFloat32), {ReduceOp::kSum, Millis(300)})->wait();
  }));
}

TEST_CASE("group memory: nothing of it is left in /dev/shm, and it outlives its group") {
  ScopedEnv env(small_shm_geometry());
  const size_t before = shm_entries_of_this_process();
  std::vector<std::shared_ptr<GroupMemory>> kept(2);
  run_ranks(2, [&](TcpProcessGroup& pg, int r) {
    kept[static_cast<size_t>(r)] = pg.allocate(4096);
    check_all_reduce_in(pg, r, kept[static_cast<size_t>(r)]->view(1024, DType::kFloat32), ReduceOp::kSum);
  });
  CHECK(shm_entries_of_this_process() == before);  // unlinked once every rank mapped it
  for (auto& m : kept)
    CHECK(get(DType::kFloat32, m->data(), 5) == reference(ReduceOp::kSum, DType::kFloat32, 2, 5));
}

// Needs a private mount namespace with a 4 MiB /dev/shm (root): its own ctest, Skipped elsewhere.
TEST_CASE("group memory: a /dev/shm without room gives plain memory on every rank, and ops still work" *
          doctest::skip(!ddp::test::can_mount_private_shm())) {
  // In a child: its own mount namespace, where /dev/shm is a 4 MiB tmpfs.
  const pid_t child = ::fork();
  if (child == 0) {
    int code = 1;
    if (::unshare(CLONE_NEWNS) == 0 && ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=4m") == 0) {
      try {
        ScopedEnv env(small_shm_geometry());
        run_ranks(2, [&](TcpProcessGroup& pg, int r) {
          auto mem = pg.allocate(8 << 20);
          if (mem->shared()) throw std::runtime_error("8 MiB in a 4 MiB /dev/shm");
          check_all_reduce_in(pg, r, mem->view(1 << 20, DType::kFloat32), ReduceOp::kSum);
          auto small = pg.allocate(64 << 10);  // there is room for this one
          if (!small->shared()) throw std::runtime_error("64 KiB did not fit");
          check_all_reduce_in(pg, r, small->view(10000, DType::kFloat32), ReduceOp::kSum);
        });
        code = 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
      }
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
