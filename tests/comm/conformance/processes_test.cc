// The conformance tests that need real processes: a peer killed with SIGKILL mid-op, many
// concurrent async ops, mismatched calls, subgroups, monitored_barrier. Each body runs on every
// rank (forked children joining via env://, or the MPI ranks under mpirun) and returns "" or
// what went wrong.
#include <doctest/doctest.h>
#include <signal.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cases.h"
#include "comm/init.h"
#include "common/error.h"
#include "harness.h"
#include "reference.h"
#include "rendezvous/tcp_store.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::conformance;

namespace {

void report(const std::vector<std::string>& failures) {
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

ProcessOptions procs(int world, Millis timeout = kSuiteTimeout, std::vector<int> killed = {}) {
  ProcessOptions o;
  o.world = world;
  o.timeout = timeout;
  o.expect_killed = std::move(killed);
  return o;
}

std::string who(const ProcessGroup& g) { return "rank " + std::to_string(g.rank()) + ": "; }

// Every rank of `ranks` reached this point (through the harness's store, DDP_STORE in each
// child: the group itself is broken by then).
void met_after_loss(int rank, const std::vector<int>& ranks) {
  const std::string endpoint = std::getenv("DDP_STORE");
  const std::string run = std::getenv("DDP_RUN_ID");
  rdzv::TCPStoreOptions o;
  o.host = endpoint.substr(0, endpoint.rfind(':'));
  o.port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  rdzv::TCPStore store(o);
  store.set(run + "/met/" + std::to_string(rank), "1");
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(run + "/met/" + std::to_string(r));
  store.wait(keys, Millis(60'000));
}

// True when `rank` appears in the text as a number of its own ("rank 2", "[2]", not "12").
bool mentions_rank(const std::string& text, int rank) {
  const std::string r = std::to_string(rank);
  for (size_t at = text.find(r); at != std::string::npos; at = text.find(r, at + 1)) {
    const bool left = at == 0 || !std::isdigit(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + r.size();
    const bool right = end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
    if (left && right) return true;
  }
  return false;
}

// MPI aborts the whole job when a rank dies, and an MPI mismatch is undefined behaviour.
bool survives_peer_loss() { return !under_mpirun() && backend_under_test() != "mpi"; }
bool processes_available() {
  return backend_under_test() != "nccl" && (backend_under_test() != "mpi" || under_mpirun());
}

// Issues `n` all_reduces and broadcasts of mixed dtypes and sizes without waiting, then checks each.
std::string many_async(ProcessGroup& g) {
  constexpr int kOps = 64;
  const DType dtypes[] = {DType::kFloat32, DType::kInt64, DType::kBFloat16, DType::kInt32};
  std::vector<Array> bufs;
  std::vector<Case> cases;
  std::vector<WorkPtr> works;
  bufs.reserve(kOps);
  for (int k = 0; k < kOps; ++k) {
    Case c{k % 3 == 2 ? Op::kBroadcast : Op::kAllReduce, dtypes[k % 4], ReduceOp::kSum,
           static_cast<size_t>(1 + (k * 977) % 20000), k % g.size()};
    bufs.emplace_back(c.dtype, c.count);
    if (c.op == Op::kAllReduce) {
      fill_input(bufs.back(), c.rop, g.rank());
      works.push_back(g.all_reduce(bufs.back().buffer()));
    } else {
      if (g.rank() == c.root)
        fill_input(bufs.back(), ReduceOp::kSum, c.root);
      else
        fill_constant(bufs.back(), 99);
      works.push_back(g.broadcast(bufs.back().buffer(), {c.root}));
    }
    cases.push_back(c);
  }
  wait_all(works);
  for (int k = 0; k < kOps; ++k) {
    const Case& c = cases[k];
    std::string err = compare(
        bufs[k], 0, c.count,
        [&](size_t i) {
          return c.op == Op::kAllReduce ? reduced_value(c.dtype, c.rop, g.size(), i)
                                        : input_value(c.dtype, ReduceOp::kSum, c.root, i);
        },
        "async op " + std::to_string(k) + " " + c.name());
    if (!err.empty()) return who(g) + err;
  }
  return "";
}

// all_reduce of a fixed buffer; "" when every element is right.
std::string checked_all_reduce(ProcessGroup& g, size_t count, const std::string& what) {
  Array a(DType::kFloat32, count);
  fill_input(a, ReduceOp::kSum, g.rank());
  g.all_reduce(a.buffer())->wait();
  return compare(
      a, 0, count, [&](size_t i) { return reduced_value(DType::kFloat32, ReduceOp::kSum, g.size(), i); },
      who(g) + what);
}

// Small all_reduces (sum and avg) with one rank, a different one each round, 30 ms late: the
// others' attempt on their own thread (tcp: shared memory, sockets, a hierarchy's steps) must
// hand the op over mid-way, and the op issued right behind it must wait its turn. Exact results.
std::string late_rank(ProcessGroup& g) {
  for (int round = 0; round < 2 * g.size(); ++round) {
    if (g.rank() == round % g.size()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    Array first(DType::kFloat32, 5), second(DType::kInt64, 1000);
    fill_input(first, ReduceOp::kAvg, g.rank());
    fill_input(second, ReduceOp::kSum, g.rank());
    WorkPtr a = g.all_reduce(first.buffer(), {ReduceOp::kAvg});
    WorkPtr b = g.all_reduce(second.buffer());
    wait_all({a, b});
    const std::string when =
        "round " + std::to_string(round) + ", rank " + std::to_string(round % g.size()) + " late: ";
    std::string err = compare(
        first, 0, 5, [&](size_t i) { return reduced_value(DType::kFloat32, ReduceOp::kAvg, g.size(), i); },
        when + "float32 avg");
    if (err.empty()) {
      err = compare(
          second, 0, 1000,
          [&](size_t i) { return reduced_value(DType::kInt64, ReduceOp::kSum, g.size(), i); },
          when + "int64 sum behind it");
    }
    if (!err.empty()) return who(g) + err;
  }
  return "";
}

std::string subgroups(ProcessGroup& world) {
  const int me = world.rank();
  // Every rank makes every group, in the same order; ranks are listed out of order on purpose.
  ProcessGroupPtr odd = new_group({1, 3});
  ProcessGroupPtr first3 = new_group({0, 1, 2});
  ProcessGroupPtr pair = new_group({2, 0});
  auto check_membership = [&](const ProcessGroupPtr& g, std::vector<int> ranks) -> std::string {
    auto it = std::find(ranks.begin(), ranks.end(), me);
    if ((it == ranks.end()) != (g == nullptr)) return who(world) + "membership wrong";
    if (g && (g->rank() != it - ranks.begin() || g->size() != static_cast<int>(ranks.size()))) {
      return who(world) + "group rank " + std::to_string(g->rank()) + " of " + std::to_string(g->size()) +
             " is wrong";
    }
    return "";
  };
  for (auto [g, ranks] :
       {std::pair{odd, std::vector<int>{1, 3}}, std::pair{first3, std::vector<int>{0, 1, 2}},
        std::pair{pair, std::vector<int>{2, 0}}}) {
    if (auto e = check_membership(g, ranks); !e.empty()) return e;
  }
  // Interleave world and subgroup ops: each group counts its own sequence numbers.
  std::string err;
  for (int round = 0; round < 3 && err.empty(); ++round) {
    if (odd) err = checked_all_reduce(*odd, 1000 + round, "odd group");
    if (err.empty()) err = checked_all_reduce(world, 77, "world");
    if (err.empty() && first3) err = checked_all_reduce(*first3, 4099, "first3 group");
    if (err.empty() && pair) err = checked_all_reduce(*pair, 5, "pair group");
  }
  if (!err.empty()) return err;
  odd.reset();  // destroying a subgroup leaves the rest working
  if (first3) first3->barrier()->wait();
  world.barrier()->wait();
  return checked_all_reduce(world, 12345, "world after dropping a subgroup");
}

}  // namespace

TEST_CASE("processes: many concurrent async ops complete in order with exact results" *
          doctest::skip(!processes_available())) {
  report(run_processes(procs(3), many_async));
}

TEST_CASE("processes: a late rank's small all_reduces, and the op behind them, are exact" *
          doctest::skip(!processes_available())) {
  report(run_processes(procs(3), late_rank));
}

TEST_CASE("processes: subgroups via new_group, interleaved with the world" *
          doctest::skip(!processes_available())) {
  report(run_processes(procs(4), [](ProcessGroup& world) -> std::string {
    if (world.size() < 4) return "";  // mpirun with fewer ranks: nothing to test here
    return subgroups(world);
  }));
}

TEST_CASE("processes: monitored_barrier passes, then names the rank that did not arrive" *
          doctest::skip(!processes_available())) {
  report(run_processes(procs(3), [](ProcessGroup& world) -> std::string {
    world.monitored_barrier(Millis(60'000));
    const int absent = world.size() - 1;
    if (world.rank() == absent) {
      // Stays away from the second barrier; the world barrier below waits for the others.
    } else {
      try {
        world.monitored_barrier(Millis(1'500));
        return who(world) + "monitored_barrier succeeded without rank " + std::to_string(absent);
      } catch (const TimeoutError& e) {
        if (world.rank() == 0 && !mentions_rank(e.what(), absent)) {
          return who(world) + "the error does not name rank " + std::to_string(absent) + ": " + e.what();
        }
      } catch (const Error& e) {
        // Rank 0 gives up first; the others may see it leave before their own timeout.
        if (world.rank() == 0) return who(world) + "expected a TimeoutError, got: " + e.what();
      }
    }
    return "";
  }));
}

TEST_CASE("processes: a peer killed with SIGKILL mid-op fails the survivors, naming it" *
          doctest::skip(!processes_available() || !survives_peer_loss())) {
  constexpr int kVictim = 2;
  report(run_processes(procs(3, Millis(30'000), {kVictim}), [](ProcessGroup& world) -> std::string {
    Array a(DType::kFloat32, 4 << 20);
    fill_input(a, ReduceOp::kSum, world.rank());
    if (world.rank() == kVictim) {
      for (int i = 0; i < 3; ++i) world.all_reduce(a.buffer())->wait();
      [[maybe_unused]] auto w = world.all_reduce(a.buffer());  // in flight...
      ::raise(SIGKILL);                                        // ...when this rank dies
    }
    try {
      // The survivors' first 3 may fail already: the victim's third all_reduce can end on its
      // side while its last messages to them are still in flight (seen over several sockets
      // per peer: a survivor's seq 2 named rank 2 as lost).
      for (int i = 0; i < 1003; ++i) world.all_reduce(a.buffer())->wait();
      return who(world) + "1003 all_reduces succeeded without rank 2";
    } catch (const Error& e) {
      if (!mentions_rank(e.what(), kVictim))
        return who(world) + "the error does not name rank 2: " + e.what();
    }
    try {
      world.all_reduce(a.buffer())->wait();  // later ops fail too, and fast
      return who(world) + "an all_reduce after the loss succeeded";
    } catch (const Error&) {
    }
    // The survivors keep their groups until both saw rank 2's loss: one that exited first could
    // be the other's first news (one poll round found both closed connections, rank 1's first:
    // "rank 1 was lost"), a race under load.
    met_after_loss(world.rank(), {0, 1});
    return "";
  }));
}

TEST_CASE("processes: mismatched counts are an error or at least never a hang" *
          doctest::skip(!processes_available() || !survives_peer_loss())) {
  // The tcp contract promises an error on both sides; other backends only that nobody hangs
  // past the timeout (the harness kills and reports a rank that does). Gloo 0.5 itself
  // terminates the process when a message is longer than the posted buffer (an enforce in its
  // transport thread, out of any caller's reach), so for gloo an abort is tolerated: no hang.
  const bool must_fail = backend_under_test() == "tcp";
  ProcessOptions o = procs(2, Millis(5'000));
  o.tolerate_abort = backend_under_test() == "gloo";
  report(run_processes(o, [must_fail](ProcessGroup& world) -> std::string {
    Array a(DType::kFloat32, world.rank() == 0 ? 64 : 128);
    fill_input(a, ReduceOp::kSum, world.rank());
    try {
      world.all_reduce(a.buffer())->wait();
    } catch (const Error&) {
      return "";
    }
    return must_fail ? who(world) + "all_reduce of 64 vs 128 elements succeeded" : "";
  }));
}
