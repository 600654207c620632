// The tcp backend with threads as ranks over a HashStore: every op, dtypes, reduce ops and
// world sizes on both transports, zero-length ops, reduce_scatter and all_gather in place, the
// transport choice, mismatches, timeouts.
#include "comm/tcp/tcp_process_group.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <filesystem>
#include <future>
#include <latch>

#include "comm/tcp/shm_segment.h"
#include "common/error.h"
#include "tcp_ops_check.h"
#include "tcp_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

TEST_CASE("world size 1: every op completes locally") {
  run_ranks(1, [](TcpProcessGroup& pg, int r) {
    CHECK(pg.transport() == TransportKind::kLocal);
    check_everything(pg, r, DType::kFloat32, 5);
    check_all_reduce(pg, r, DType::kInt32, ReduceOp::kAvg, 5);
  });
}

TEST_CASE("every op, both transports, world sizes 2, 3, 5") {
  for (const char* transport : {"shm", "socket"}) {
    for (int w : {2, 3, 5}) {
      CAPTURE(transport);
      CAPTURE(w);
      // Small slots: the 70001-element ops run through many pipelined chunks.
      ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string(transport)},
                     {"DDP_TCP_SHM_SLOT_BYTES", std::string("8192")},
                     {"DDP_TCP_SHM_DEPTH", std::string(w == 3 ? "2" : "4")}});
      run_ranks(w, [&](TcpProcessGroup& pg, int r) {
        const TransportKind want =
            std::string(transport) == "shm" ? TransportKind::kShm : TransportKind::kSocket;
        if (pg.transport() != want) throw std::runtime_error("wrong transport");
        for (size_t n : {size_t{1}, size_t{7}, size_t{4099}, size_t{70001}})
          check_everything(pg, r, DType::kFloat32, n);
        check_everything(pg, r, DType::kInt8, 4099);
      });
    }
  }
}

TEST_CASE("all_reduce: every dtype and reduce op, both transports") {
  for (const char* transport : {"shm", "socket"}) {
    CAPTURE(transport);
    ScopedEnv env(
        {{"DDP_TCP_TRANSPORT", std::string(transport)}, {"DDP_TCP_SHM_SLOT_BYTES", std::string("65536")}});
    run_ranks(3, [&](TcpProcessGroup& pg, int r) {
      for (DType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (is_bitwise(op) && !is_integer(t)) continue;
          for (size_t n : {size_t{3}, size_t{100003}}) check_all_reduce(pg, r, t, op, n);
        }
      }
    });
  }
}

TEST_CASE("shm with streaming stores (DDP_TCP_SHM_STORES): every op, every all_reduce dtype and op exact") {
  for (const char* stores : {"streaming", "auto"}) {
    CAPTURE(stores);
    ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("shm")},
                   {"DDP_TCP_SHM_SLOT_BYTES", std::string("65536")},
                   {"DDP_TCP_SHM_STORES", std::string(stores)}});
    run_ranks(3, [&](TcpProcessGroup& pg, int r) {
      for (DType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (is_bitwise(op) && !is_integer(t)) continue;
          check_all_reduce(pg, r, t, op, 100003);
        }
      }
      // all_gather, reduce_scatter and all_to_all stream too; the rest keep cached stores.
      for (int round = 0; round < 3; ++round) check_everything(pg, r, DType::kFloat32, 70001);
    });
  }
}

TEST_CASE("DDP_TCP_SHM_STORES: anything but auto, cached or streaming is an error naming it") {
  ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("shm")}, {"DDP_TCP_SHM_STORES", std::string("fast")}});
  CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}),
                       doctest::Contains("DDP_TCP_SHM_STORES='fast'"), InvalidArgument);
}

TEST_CASE("DDP_TCP_HIERARCHY_LARGE: anything but auto, split or flat fails any group's creation, naming it") {
  ScopedEnv env({{"DDP_TCP_HIERARCHY_LARGE", std::string("ring")}});
  CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}),
                       doctest::Contains("DDP_TCP_HIERARCHY_LARGE='ring'"), InvalidArgument);
}

TEST_CASE("DDP_TCP_HIERARCHY_OVERLAP: anything but auto or a boolean fails any group's creation, naming it") {
  ScopedEnv env({{"DDP_TCP_HIERARCHY_OVERLAP", std::string("sometimes")}});
  CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}),
                       doctest::Contains("DDP_TCP_HIERARCHY_OVERLAP='sometimes'"), InvalidArgument);
}

TEST_CASE("DDP_LOCAL_CPUS: anything but a positive count fails any group's creation, naming it") {
  for (const char* bad : {"0", "many"}) {
    ScopedEnv env({{"DDP_LOCAL_CPUS", std::string(bad)}});
    CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}), doctest::Contains("DDP_LOCAL_CPUS"),
                         InvalidArgument);
  }
}

TEST_CASE("socket pipeline sizes from the environment: nonsense is an error naming the variable") {
  for (const auto& [var, value] :
       std::vector<std::pair<std::string, std::string>>{{"DDP_TCP_SOCKET_CHUNK_BYTES", "0"},
                                                        {"DDP_TCP_SOCKET_CHUNK_BYTES", "-4096"},
                                                        {"DDP_TCP_SOCKET_ONESHOT_BYTES", "-1"},
                                                        {"DDP_TCP_SOCKET_CHUNK_BYTES", "lots"},
                                                        {"DDP_TCP_SOCKET_LOWAT", "-1"},
                                                        {"DDP_TCP_SOCKET_LOWAT", "some"},
                                                        {"DDP_TCP_SOCKET_STREAMS", "0"},
                                                        {"DDP_TCP_SOCKET_STREAMS", "9"},
                                                        {"DDP_TCP_SOCKET_STREAMS", "two"}}) {
    CAPTURE(var);
    CAPTURE(value);
    ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("socket")}, {var, value}});
    CHECK_THROWS_WITH_AS(run_ranks(2, [](TcpProcessGroup&, int) {}), doctest::Contains(var.c_str()),
                         InvalidArgument);
  }
}

namespace {
// This process's threads now.
int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}
}  // namespace

TEST_CASE("several connections to each peer (DDP_TCP_SOCKET_STREAMS): every op exact, messages split") {
  // Each connection set has its own progress thread: 3 streams are 2 threads more per rank.
  auto threads_for = [](const char* streams) {
    ScopedEnv env(
        {{"DDP_TCP_TRANSPORT", std::string("socket")}, {"DDP_TCP_SOCKET_STREAMS", std::string(streams)}});
    int during = 0;
    run_ranks(1 + 1, [&](TcpProcessGroup& pg, int r) {
      check_all_reduce(pg, r, DType::kFloat32, ReduceOp::kSum, 10);
      pg.barrier()->wait();
      if (r == 0) during = thread_count();
      pg.barrier()->wait();
    });
    return during;
  };
  CHECK(threads_for("3") - threads_for("1") == 2 * 2);  // 2 ranks (threads of this process)
  for (int w : {2, 3}) {
    CAPTURE(w);
    // 4 KiB chunks over 3 streams: an op's chunks to a peer take turns on the 3 connections,
    // whole buffers larger than a chunk (the unchunked ops) travel in 3 parts.
    ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("socket")},
                   {"DDP_TCP_SOCKET_STREAMS", std::string("3")},
                   {"DDP_TCP_SOCKET_CHUNK_BYTES", std::string("4096")},
                   {"DDP_TCP_SOCKET_ONESHOT_BYTES", std::string("64")}});
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      if (pg.socket_streams() != 3) throw std::runtime_error("expected 3 connections to each peer");
      for (size_t n : {size_t{1}, size_t{4099}, size_t{70001}}) check_everything(pg, r, DType::kFloat32, n);
      check_all_reduce(pg, r, DType::kInt64, ReduceOp::kMax, 100003);
    });
  }
}

TEST_CASE("DDP_TCP_SOCKET_STREAMS only adds connections where collectives use sockets") {
  ScopedEnv env({{"DDP_TCP_SOCKET_STREAMS", std::string("4")}});
  run_ranks(2, [](TcpProcessGroup& pg, int r) {
    if (pg.transport() != TransportKind::kShm || pg.socket_streams() != 1)
      throw std::runtime_error("one host: shared memory and no extra connections");
    check_all_reduce(pg, r, DType::kFloat32, ReduceOp::kSum, 1000);
  });
}

TEST_CASE("the shared-memory segment is unlinked once every rank mapped it") {
  run_ranks(2, [](TcpProcessGroup& pg, int r) {
    if (pg.transport() != TransportKind::kShm) throw std::runtime_error("expected shm on one host");
    const std::string name = pg.shm_name();
    if (name.empty()) throw std::runtime_error("no shm name");
    int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
    if (fd >= 0) ::close(fd);
    if (fd >= 0) throw std::runtime_error("segment " + name + " still exists");
    check_all_reduce(pg, r, DType::kFloat32, ReduceOp::kSum, 1000);
  });
}

TEST_CASE("zero-length buffers are no-ops on every op") {
  run_ranks(2, [](TcpProcessGroup& pg, int) {
    Buffer empty{nullptr, 0, DType::kFloat32, {}};
    CHECK(pg.all_reduce(empty)->wait());
    CHECK(pg.broadcast(empty)->wait());
    CHECK(pg.reduce(empty)->wait());
    CHECK(pg.all_gather(empty, empty)->wait());
    CHECK(pg.gather(empty, empty)->wait());
    CHECK(pg.scatter(empty, empty)->wait());
    CHECK(pg.reduce_scatter(empty, empty)->wait());
    CHECK(pg.all_to_all(empty, empty)->wait());
    CHECK(pg.send(empty, 1 - pg.rank())->wait());
    CHECK(pg.recv(empty, 1 - pg.rank())->wait());
    CHECK(pg.collectives_run() == 0);
  });
}

TEST_CASE("bad arguments are refused by the call") {
  run_ranks(2, [](TcpProcessGroup& pg, int) {
    std::vector<float> f(4);
    CHECK_THROWS_AS(pg.all_reduce(view(f.data(), 4), {ReduceOp::kBxor}), InvalidArgument);
    CHECK_THROWS_AS(pg.broadcast(view(f.data(), 4), {5}), InvalidArgument);
    CHECK_THROWS_AS(pg.send(view(f.data(), 4), pg.rank()), InvalidArgument);
    CHECK_THROWS_AS(pg.all_gather(view(f.data(), 4), view(f.data(), 4)), InvalidArgument);
    CHECK_THROWS_AS(pg.all_to_all(view(f.data(), 3), view(f.data(), 3)), InvalidArgument);
    Buffer cuda{f.data(), 4, DType::kFloat32, Device{DeviceType::kCuda, 0}};
    CHECK_THROWS_AS(pg.all_reduce(cuda), InvalidArgument);
    pg.barrier()->wait();  // the group still works
  });
}

TEST_CASE("mismatched collectives fail on every rank, naming both sides") {
  for (const char* transport : {"shm", "socket"}) {
    CAPTURE(transport);
    ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string(transport)}});
    std::vector<std::string> messages(2);
    run_ranks(2, [&](TcpProcessGroup& pg, int r) {
      std::vector<float> f(1000, 1.0f);
      WorkPtr w =
          r == 0 ? pg.all_reduce(view(f.data(), f.size())) : pg.broadcast(view(f.data(), f.size()), {1});
      try {
        w->wait();
      } catch (const InvalidArgument& e) {
        messages[static_cast<size_t>(r)] = e.message();
      }
      // The group is unusable afterwards.
      try {
        pg.barrier()->wait();
        messages[static_cast<size_t>(r)] += " | barrier succeeded";
      } catch (const Error&) {
      }
    });
    for (const auto& m : messages) {
      CAPTURE(m);
      CHECK(m.find("all_reduce(float32 x 1000, sum)") != std::string::npos);
      CHECK(m.find("broadcast(float32 x 1000, root 1)") != std::string::npos);
      CHECK(m.find("seq 0") != std::string::npos);
      CHECK(m.find("barrier succeeded") == std::string::npos);
    }
  }
}

TEST_CASE(
    "shm: all_reduces of 1 to kWideBytes + 8 bytes (the control lines, then a slot) in every dtype and op "
    "are exact") {
  ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("shm")}});
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    for (DType t : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (is_bitwise(op) && !is_integer(t)) continue;
        for (size_t n = 1; n * dtype_size(t) <= kWideBytes + 8; ++n) check_all_reduce(pg, r, t, op, n);
      }
    }
  });
}

TEST_CASE(
    "shm: broadcasts of 1 to kWideBytes + 8 bytes (the control lines, then a slot) from every root are "
    "exact") {
  ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("shm")}});
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    for (DType t : {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
      for (size_t n = 1; n * dtype_size(t) <= kWideBytes + 8; ++n) {
        for (int root = 0; root < pg.size(); ++root) {
          auto b = filled(t, n);
          for (size_t i = 0; i < n; ++i) put(t, b.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
          pg.broadcast(b.buffer(), {root})->wait();
          for (size_t i = 0; i < n; ++i)
            expect_at("broadcast n=" + std::to_string(n), t, b.bytes.data(), i,
                      value(t, ReduceOp::kSum, root, i));
        }
      }
    }
  });
}

TEST_CASE("shm: all_reduces of different sizes in the control lines and a slot fail on both ranks") {
  // A control-line one publishes only kEntered; a slot one waits for a kStaged that never comes:
  // the wait must see the peer entered another op and name the mismatch, not hang to the timeout.
  ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("shm")}});
  // Floats: word against slot, wide lines against slot, word against wide lines.
  constexpr size_t kWide = kWideBytes / sizeof(float);
  for (auto [a, b] : {std::pair<size_t, size_t>{2, kWide + 1}, {kWide, kWide + 1}, {2, 4}}) {
    CAPTURE(a);
    CAPTURE(b);
    std::vector<std::string> messages(2);
    run_ranks(2, [&, a = a, b = b](TcpProcessGroup& pg, int r) {
      std::vector<float> f(r == 0 ? a : b, 1.0f);
      try {
        AllReduceOptions o;
        o.timeout = Millis(60000);
        pg.all_reduce(view(f.data(), f.size()), o)->wait();
      } catch (const InvalidArgument& e) {
        messages[static_cast<size_t>(r)] = e.message();
      }
    });
    for (const auto& m : messages) {
      CAPTURE(m);
      CHECK(m.find("mismatched collectives") != std::string::npos);
    }
  }
}

TEST_CASE("sockets: all_reduces that differ in count or op fail on both ranks, buffers untouched") {
  ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string("socket")}});
  struct Case {
    size_t count[2];
    ReduceOp op[2];
    const char* seen;  // what rank 1 called, as the error names it
  };
  for (const Case& c : {Case{{1000, 1024}, {ReduceOp::kSum, ReduceOp::kSum}, "float32 x 1024, sum"},
                        Case{{1000, 1000}, {ReduceOp::kSum, ReduceOp::kMax}, "float32 x 1000, max"}}) {
    CAPTURE(c.seen);
    std::vector<std::string> messages(2);
    std::vector<std::vector<float>> kept(2);
    run_ranks(2, [&](TcpProcessGroup& pg, int r) {
      const auto me = static_cast<size_t>(r);
      std::vector<float> f(c.count[me], 1.0f + static_cast<float>(r));
      try {
        AllReduceOptions o;
        o.op = c.op[me];
        pg.all_reduce(view(f.data(), f.size()), o)->wait();
      } catch (const InvalidArgument& e) {
        messages[me] = e.message();
      }
      kept[me] = std::move(f);  // the caller's buffer: nothing may have been reduced into it
    });
    for (int r = 0; r < 2; ++r) {
      const auto& m = messages[static_cast<size_t>(r)];
      CAPTURE(m);
      CHECK(m.find("mismatched collectives") != std::string::npos);
      CHECK(m.find(c.seen) != std::string::npos);
      for (float v : kept[static_cast<size_t>(r)]) REQUIRE(v == 1.0f + static_cast<float>(r));
    }
  }
}

TEST_CASE("a collective a peer never joins times out naming the op, its seq and the missing rank") {
  for (const char* transport : {"shm", "socket"}) {
    CAPTURE(transport);
    ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string(transport)}});
    std::string message;
    std::promise<void> rank0_done;
    auto rank0_done_future = rank0_done.get_future();
    run_ranks(2, [&](TcpProcessGroup& pg, int r) {
      pg.barrier()->wait();
      if (r == 1) {
        pg.barrier()->wait();      // seq 1 only: rank 0 also calls all_reduce at seq 2
        rank0_done_future.wait();  // stay in the group: a departed peer is a different error
        return;
      }
      pg.barrier()->wait();
      std::vector<float> f(10);
      try {
        pg.all_reduce(view(f.data(), f.size()), {ReduceOp::kSum, Millis(300)})->wait();
      } catch (const TimeoutError& e) {
        message = e.message();
      }
      rank0_done.set_value();
    });
    CAPTURE(message);
    CHECK(message.find("all_reduce (seq 2)") != std::string::npos);
    CHECK(message.find("[1]") != std::string::npos);
  }
}

TEST_CASE("fingerprints can be turned off") {
  ScopedEnv env({{"DDP_TCP_FINGERPRINT", std::string("0")}});
  run_ranks(2, [](TcpProcessGroup& pg, int r) {
    if (pg.fingerprints()) throw std::runtime_error("fingerprints still on");
    check_everything(pg, r, DType::kFloat32, 4099);
  });
}

TEST_CASE("many async ops in flight complete in order with the right results") {
  ScopedEnv env({{"DDP_TCP_SHM_SLOT_BYTES", std::string("4096")}});
  run_ranks(3, [](TcpProcessGroup& pg, int r) {
    std::vector<std::vector<float>> bufs(40, std::vector<float>(3000));
    std::vector<WorkPtr> works;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (auto& x : bufs[k]) x = static_cast<float>(r + k);
      works.push_back(pg.all_reduce(view(bufs[k].data(), bufs[k].size())));
    }
    // In order: whenever op j is seen complete, every earlier op already is. Reading the flags
    // from the last op down, a later op seen done before an earlier one seen pending is a
    // completion out of order (completion is monotonic, so no false alarm).
    for (bool all_done = false; !all_done;) {
      bool later_done = false;
      all_done = true;
      for (size_t k = works.size(); k-- > 0;) {
        const bool done = works[k]->is_completed();
        if (!done && later_done)
          throw std::runtime_error("op " + std::to_string(k) + " completed after a later op");
        later_done = later_done || done;
        all_done = all_done && done;
      }
    }
    wait_all(works);
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (float x : bufs[k]) {
        if (x != static_cast<float>(3 * k + 3))
          throw std::runtime_error("wrong async result in op " + std::to_string(k));
      }
    }
  });
}

TEST_CASE("an inline op that must wait for a late peer is finished by the worker, correctly") {
  // Rank 1 calls only after rank 0's call has returned: rank 0's op cannot finish inline (its
  // peer has not arrived), so it must come back pending (handed off), and the worker must then
  // finish it with the right values. No sleep decides the path; the test sees it taken.
  // Sockets: 10 floats start on the caller (a one-shot all_reduce), 50000 go to the worker.
  // DDP_TCP_INLINE_SPIN_US=-2 (any negative: never on the caller's thread) must hand off too,
  // never run the op to its end on the caller (which would wait here for rank 1 forever).
  for (const char* spin : {"10", "-2"})
    for (const char* transport : {"shm", "socket"}) {
      CAPTURE(transport);
      CAPTURE(spin);
      ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string(transport)},
                     {"DDP_TCP_SHM_SLOT_BYTES", std::string("4096")},
                     {"DDP_TCP_INLINE_SPIN_US", std::string(spin)}});
      std::latch returned_small(1), returned_large(1);
      std::latch* returned[] = {&returned_small, &returned_large};
      run_ranks(2, [&](TcpProcessGroup& pg, int r) {
        int step = 0;
        for (size_t n : {size_t{10}, size_t{50000}}) {
          std::vector<float> f(n, static_cast<float>(r + 1));
          if (r == 1) returned[step]->wait();
          WorkPtr w;
          try {
            w = pg.all_reduce(view(f.data(), n));
          } catch (...) {
            if (r == 0) returned[step]->count_down();  // never leave rank 1 waiting
            throw;
          }
          if (r == 0) {
            const bool pending = !w->is_completed();
            returned[step]->count_down();
            if (!pending) throw std::runtime_error("completed inline without its peer: no hand-off happened");
          }
          w->wait();
          for (float x : f) {
            if (x != 3.0f) throw std::runtime_error("wrong result after a hand-off");
          }
          ++step;
        }
      });
    }
}

TEST_CASE("sockets: a small all_reduce runs on the caller's thread, and is done when the call returns") {
  // The caller drives the sockets itself (SocketCollectives::start) for as long as it may poll:
  // with both ranks calling together, a generous budget and the worker idle (no op here goes to
  // it), every op finishes inside the call.
  ScopedEnv env(
      {{"DDP_TCP_TRANSPORT", std::string("socket")}, {"DDP_TCP_INLINE_SPIN_US", std::string("5000000")}});
  run_ranks(2, [](TcpProcessGroup& pg, int r) {
    for (int i = 0; i < 200; ++i) {
      std::vector<int32_t> v(static_cast<size_t>(1 + i % 50), r + i);
      WorkPtr w = pg.all_reduce(view(v.data(), v.size()));
      const bool inline_done = w->is_completed();
      w->wait();  // before any throw: the buffer is the op's until it ends
      if (!inline_done) throw std::runtime_error("op " + std::to_string(i) + " was handed to the worker");
      for (int32_t x : v) {
        if (x != 1 + 2 * i) throw std::runtime_error("wrong result at op " + std::to_string(i));
      }
    }
  });
}

TEST_CASE("sockets: small all_reduces between ops that run on the worker: right results, in order") {
  // An op issued while the worker still winds up the previous one (it finished that op's Work,
  // then takes its lock to say it is idle) is queued behind it rather than started here: which
  // path each op takes is timing, so only results and order are checked.
  ScopedEnv env(
      {{"DDP_TCP_TRANSPORT", std::string("socket")}, {"DDP_TCP_INLINE_SPIN_US", std::string("5000000")}});
  run_ranks(2, [](TcpProcessGroup& pg, int r) {
    for (int i = 0; i < 100; ++i) {
      std::vector<int32_t> v(static_cast<size_t>(1 + i % 50), r + i);
      WorkPtr w = pg.all_reduce(view(v.data(), v.size()));
      std::vector<int32_t> b(3, r == 0 ? i : -1);
      WorkPtr bw = pg.broadcast(view(b.data(), b.size()));  // always on the worker
      bw->wait();
      const bool in_order = w->is_completed();
      w->wait();  // before any throw: the buffer is the op's until it ends
      if (!in_order) throw std::runtime_error("broadcast done before the earlier all_reduce");
      for (int32_t x : v) {
        if (x != 1 + 2 * i) throw std::runtime_error("wrong result at op " + std::to_string(i));
      }
      if (b[2] != i) throw std::runtime_error("broadcast out of order at op " + std::to_string(i));
    }
  });
}

// The hierarchical all_reduce's steps within a host (hierarchical_collectives.cc) keep each
// rank's share in place: reduce_scatter's output is exactly this rank's block of its input, and
// all_gather's input is exactly this rank's block of its output. One-shot and chunked sizes,
// staged and by cross-memory, and over sockets.
TEST_CASE(
    "in place: reduce_scatter into its own block of the input, all_gather from its own block of the output") {
  struct Setting {
    const char* transport;
    const char* cma;
  };
  for (const Setting s : {Setting{"shm", "off"}, Setting{"shm", "on"}, Setting{"socket", "off"}}) {
    for (int w : {2, 3}) {
      CAPTURE(s.transport);
      CAPTURE(s.cma);
      CAPTURE(w);
      ScopedEnv env({{"DDP_TCP_TRANSPORT", std::string(s.transport)},
                     {"DDP_TCP_CMA", std::string(s.cma)},
                     {"DDP_TCP_SHM_SLOT_BYTES", std::string("8192")}});
      run_ranks(w, [&](TcpProcessGroup& pg, int r) {
        for (size_t n : {size_t{100}, size_t{9001}}) {  // w x 100 floats fit a slot: one-shot
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
            const size_t total = n * static_cast<size_t>(w), mine = static_cast<size_t>(r) * n;
            auto buf = filled(DType::kFloat32, total);
            for (size_t k = 0; k < total; ++k)
              put(DType::kFloat32, buf.bytes.data(), k, value(DType::kFloat32, op, r, k));
            const Buffer whole = buf.buffer(), block = whole.slice(mine, n);
            pg.reduce_scatter(whole, block, {op})->wait();
            check_oracle(DType::kFloat32, op, w, mine, n);
            for (size_t i = 0; i < n; ++i)
              expect_at("reduce_scatter in place", DType::kFloat32, block.data, i,
                        reference(op, DType::kFloat32, w, mine + i));
            pg.all_gather(block, whole)->wait();
            for (size_t k = 0; k < total; ++k)
              expect_at("all_gather in place", DType::kFloat32, whole.data, k,
                        reference(op, DType::kFloat32, w, k));
          }
        }
      });
    }
  }
}
