// ProcessGroup::abort on every backend: rank 0 posts an all_reduce and a recv that cannot complete
// (rank 1 takes no part), another thread aborts the group, and both fail with Aborted naming the
// op and the reason; a later op fails the same way at once; the group is then destroyed (a hang
// there shows as the ctest's TIMEOUT: the groups' timeout is 120 s). Under mpirun (or a launcher)
// the ranks are processes that cannot wait for each other once the group is aborted, and MPI
// cannot cancel a posted collective: there only later ops are checked.
#include <doctest/doctest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "harness.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::conformance;

namespace {

constexpr const char* kReason = "round 7 ended: changed: node 1 (h2) lost";

// Rank 1 keeps its group until rank 0 is done: a peer that destroys its group is a NetworkError
// ("left the group"), not what is tested here.
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

bool runnable() {
  if (backend_under_test() == "nccl") return false;  // device buffers; its abort is the watchdog's path
  return threads_as_ranks() || under_mpirun();
}

// "" when `work` fails with Aborted naming `op` and the reason.
std::string expect_aborted(const WorkPtr& work, const std::string& op) {
  try {
    work->wait();
    return op + " succeeded on an aborted group";
  } catch (const Aborted& e) {
    const std::string what = e.what();
    if (what.find(kReason) == std::string::npos || what.find(op) == std::string::npos) {
      return op + ": the error does not name the op and the reason: " + what;
    }
  } catch (const std::exception& e) {
    return op + ": expected Aborted, got: " + e.what();
  }
  return "";
}

std::vector<std::string> abort_case(ProcessGroup& g, Done& done) {
  const bool pending = !under_mpirun();
  if (g.rank() == 1) {
    if (pending) done.wait();
    return {};
  }
  std::vector<std::string> failures;
  auto check = [&](const std::string& failure) {
    if (!failure.empty()) failures.push_back("rank 0: " + failure);
  };
  std::vector<float> a(4099, 1.0f), r(16, 0.0f), later(8, 1.0f);
  if (pending) {
    WorkPtr reduce = g.all_reduce(view(a.data(), a.size()));
    WorkPtr recv = g.recv(view(r.data(), r.size()), 1, {.tag = 7});
    std::thread aborter([&] { g.abort(kReason); });
    check(expect_aborted(reduce, "all_reduce"));
    check(expect_aborted(recv, "recv"));
    aborter.join();
  } else {
    g.abort(kReason);
  }
  if (!g.aborted()) failures.emplace_back("rank 0: aborted() is false after abort()");
  g.abort("a second reason, ignored");
  check(expect_aborted(g.all_reduce(view(later.data(), later.size())), "all_reduce"));
  check(expect_aborted(g.send(view(later.data(), later.size()), 1), "send"));
  done.release();
  return failures;
}

}  // namespace

TEST_CASE("conformance: abort fails pending and later ops with Aborted naming the op and the reason" *
          doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  auto done = std::make_shared<Done>();
  const auto failures = run_worlds(
      {2}, [done](ProcessGroup& g, int) -> std::vector<std::string> { return abort_case(g, *done); });
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}
