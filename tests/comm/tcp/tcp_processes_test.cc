// The tcp backend across real processes (fork + FileStore): correctness on both transports,
// and a peer SIGKILLed while the others wait in a collective.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdio>

#include "common/error.h"
#include "rendezvous/file_store.h"
#include "tcp_ops_check.h"
#include "tcp_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

std::shared_ptr<TcpProcessGroup> join(const std::string& path, int rank, int size,
                                      Millis timeout = Millis(60'000)) {
  auto store = std::make_shared<rdzv::FileStore>(path, Millis(60'000));
  return TcpProcessGroup::create(setup_for(store, rank, size, timeout));
}

}  // namespace

TEST_CASE("processes: every op over shared memory and over sockets") {
  for (const char* transport : {"shm", "socket"}) {
    CAPTURE(transport);
    ScopedEnv env(
        {{"DDP_TCP_TRANSPORT", std::string(transport)}, {"DDP_TCP_SHM_SLOT_BYTES", std::string("16384")}});
    const std::string path = temp_path("ops");
    auto codes = run_processes(3, [&](int r) {
      auto pg = join(path, r, 3);
      const TransportKind want =
          std::string(transport) == "shm" ? TransportKind::kShm : TransportKind::kSocket;
      if (pg->transport() != want) return 2;
      for (size_t n : {size_t{5}, size_t{70001}}) check_everything(*pg, r, DType::kFloat32, n);
      check_all_reduce(*pg, r, DType::kBFloat16, ReduceOp::kAvg, 1000);
      check_all_reduce(*pg, r, DType::kInt64, ReduceOp::kBxor, 300000);
      return 0;
    });
    std::remove(path.c_str());
    CHECK(codes == std::vector<int>{0, 0, 0});
  }
}

TEST_CASE("processes: a SIGKILLed peer fails the pending and later ops of the others, naming it") {
  // shm twice: the all_reduce staged, and by cross-memory attach (DDP_TCP_CMA=on).
  for (const auto& [transport, cma] :
       std::vector<std::pair<std::string, std::string>>{{"shm", "off"}, {"shm", "on"}, {"socket", "auto"}}) {
    CAPTURE(transport);
    CAPTURE(cma);
    ScopedEnv env({{"DDP_TCP_TRANSPORT", transport}, {"DDP_TCP_CMA", cma}});
    const std::string path = temp_path("kill");
    auto codes = run_processes(
        3,
        [&](int r) {
          auto pg = join(path, r, 3);
          pg->barrier()->wait();
          rdzv::FileStore store(path);
          store.set("in_op/" + std::to_string(r), "1");
          if (r == 2) {
            ::pause();  // killed by the parent
            return 3;
          }
          std::vector<float> f(1 << 20, 1.0f);
          try {
            pg->all_reduce(view(f.data(), f.size()))->wait();
            return 4;
          } catch (const NetworkError& e) {
            const std::string m = e.message();
            if (m.find("rank 2") == std::string::npos || m.find("all_reduce (seq 1)") == std::string::npos) {
              std::fprintf(stderr, "rank %d: unexpected message: %s\n", r, m.c_str());
              return 5;
            }
          }
          try {
            pg->barrier()->wait();
            return 6;
          } catch (const NetworkError& e) {
            if (std::string(e.message()).find("rank 2") == std::string::npos) return 7;
          }
          // Both survivors keep their groups until both saw rank 2's loss: one that left first
          // would be the other's first news ("rank 0 left the group"), a race under load.
          store.set("seen/" + std::to_string(r), "1");
          store.wait({"seen/0", "seen/1"}, Millis(60'000));
          return 0;
        },
        [&](const std::vector<pid_t>& pids) {
          rdzv::FileStore store(path);
          store.wait({"in_op/0", "in_op/1", "in_op/2"}, Millis(60'000));
          ::kill(pids[2], SIGKILL);
        });
    std::remove(path.c_str());
    CHECK(codes == std::vector<int>{0, 0, 128 + SIGKILL});
  }
}

TEST_CASE("processes: a group setting that differs between two ranks fails both at creation, naming it") {
  const std::string path = temp_path("agree");
  auto codes = run_processes(2, [&](int r) {
    ::setenv("DDP_TCP_SOCKET_ALGO", r == 0 ? "ring" : "hd", 1);
    ::setenv("DDP_TCP_TRANSPORT", "socket", 1);
    try {
      join(path, r, 2, Millis(20'000));
      return 2;
    } catch (const InvalidArgument& e) {
      const std::string want =
          "DDP_TCP_SOCKET_ALGO must be the same on every rank, but rank 1 has 'hd' and "
          "rank 0 has 'ring'";
      if (e.message().find(want) == std::string::npos) {
        std::fprintf(stderr, "rank %d: unexpected message: %s\n", r, e.message().c_str());
        return 3;
      }
    }
    return 0;
  });
  std::remove(path.c_str());
  CHECK(codes == std::vector<int>{0, 0});
}
