// liveness: what the implementations share (the store_lost() message, the loss callback).
#include "launcher/liveness.h"

#include <doctest/doctest.h>

using namespace ddp;
using namespace ddp::launcher;

TEST_CASE("no_answer_message names the service, the bound's name and value, and the last error") {
  const auto reached = Clock::now() - Millis(1500);
  const std::string watching =
      no_answer_message("heartbeat to store", reached, false, Millis(5000), "refused");
  CHECK(watching.rfind("heartbeat to store: no answer for ", 0) == 0);
  CHECK(watching.find(" ms (keep_alive_interval x keep_alive_max_attempt = 5000 ms): refused") !=
        std::string::npos);
  const std::string joining = no_answer_message("lease keep-alive to etcd", reached, true, Millis(900), "");
  CHECK(joining.find("(the join timeout = 900 ms): its requests did not complete") != std::string::npos);
}

TEST_CASE("report_loss runs the callback with the lock released, and takes it back") {
  std::mutex mu;
  std::unique_lock<std::mutex> lock(mu);
  bool held_during = true;
  report_loss(lock, [&] {
    held_during = !mu.try_lock();
    if (!held_during) mu.unlock();
  });
  CHECK_FALSE(held_during);
  CHECK(lock.owns_lock());
  report_loss(lock, nullptr);  // none set: nothing happens
  CHECK(lock.owns_lock());
}

TEST_CASE("note_lost adds a peer once") {
  std::vector<LivenessPeer> lost;
  bool is_lost = false;
  CHECK(note_lost({"id-b", "node 1 (b)"}, is_lost, lost));
  CHECK(is_lost);
  CHECK_FALSE(note_lost({"id-b", "node 1 (b)"}, is_lost, lost));
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].name == "node 1 (b)");
}
