// A job's records (rendezvous/job_records.h) over the in-process store: what each call writes is
// checked by its key and text too, since launchers and workers of other versions read them.
#include "rendezvous/job_records.h"

#include <doctest/doctest.h>

#include "common/error.h"
#include "rendezvous/counting_store.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::rdzv;

TEST_CASE("a round's outcome: the first announced wins, as stored text") {
  HashStore store;
  RoundRecords round(store, "job", 2);
  CHECK_FALSE(round.decided());
  CHECK_FALSE(round.outcome().has_value());
  CHECK_FALSE(round.wait_decided(Millis(10)));
  CHECK(round.announce(RoundOutcome::failed("node 1: rank 3 exited")) ==
        RoundOutcome::failed("node 1: rank 3 exited"));
  CHECK(round.announce(RoundOutcome::done()) == RoundOutcome::failed("node 1: rank 3 exited"));
  CHECK(store.get_string("job/round/2/outcome") == "failed: node 1: rank 3 exited");
  CHECK(round.decided());
  CHECK(round.wait_decided(Millis(10)));
  CHECK(round.outcome() == RoundOutcome::failed("node 1: rank 3 exited"));
  CHECK(round.wait_outcome({.timeout = Millis(10)}) == RoundOutcome::failed("node 1: rank 3 exited"));
  CHECK_FALSE(RoundRecords(store, "job", 3).decided());  // rounds and jobs are apart
  CHECK_FALSE(RoundRecords(store, "other", 2).decided());
}

TEST_CASE("the exit barrier counts finished nodes and names the others") {
  HashStore store;
  RoundRecords round(store, "job", 0);
  CHECK(round.finished() == 0);
  CHECK(round.finish(2) == 1);
  CHECK(round.finish(0) == 2);
  CHECK(round.finished() == 2);
  CHECK(round.unfinished(4) == std::vector<int>{1, 3});
  CHECK(store.get_string("job/round/0/done/2") == "1");
}

TEST_CASE("waits end at their timeout, or when check_interrupt throws") {
  HashStore store;
  RoundRecords round(store, "job", 0);
  CHECK_THROWS_AS(round.wait_outcome({.timeout = Millis(30)}), TimeoutError);
  CHECK_THROWS_AS(wait_value(store, "never", {.timeout = Millis(30), .check_interrupt = [] {}}),
                  TimeoutError);
  int calls = 0;
  auto interrupt = [&] {
    if (++calls == 3) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(round.wait_outcome({.check_interrupt = interrupt, .slice = Millis(5)}), "interrupted");
  store.set("there", "v");
  CHECK(wait_value(store, "there", {}) == "v");
}

TEST_CASE("leaving: each node marks itself; a wait for the others ends when all did") {
  HashStore store;
  RoundRecords round(store, "job", 1);
  round.leave(0);
  CHECK_THROWS_AS(round.wait_left({0, 2}, {.timeout = Millis(30)}), TimeoutError);
  round.leave(2);
  round.wait_left({0, 2}, {.timeout = Millis(30)});
  round.wait_left({}, {.timeout = Millis(1)});
  CHECK(store.check({"job/round/1/left/2"}));
}

TEST_CASE("recovery in place: every worker of a node marked, then each one's assignment") {
  HashStore store;
  RoundRecords round(store, "job", 4);
  round.mark_in_place(2);
  CHECK_FALSE(round.in_place(2, 2));
  round.mark_in_place(3);
  CHECK(round.in_place(2, 2));
  CHECK(round.in_place(2, 0));
  const InPlaceAssignment a{5, 1, 3, 0, 1, 1, 3, "10.0.0.2", 29511};
  round.assign(3, a);
  CHECK(round.wait_assignment(3, {.timeout = Millis(10)}) == a);
  CHECK(decode_in_place("k", store.get_string("job/round/4/assign/3")) == a);
  store.set("job/round/4/assign/2", "{");
  CHECK_THROWS_WITH_AS(round.wait_assignment(2, {.timeout = Millis(10)}),
                       doctest::Contains("job/round/4/assign/2"), StoreError);
}

TEST_CASE("the workers' group store is the round's own prefix") {
  auto store = std::make_shared<HashStore>();
  RoundRecords::group_store(store, "job", 3)->set("k", "v");
  CHECK(store->get_string("job/round/3/group/k") == "v");
}

TEST_CASE("the liveness report: one request that creates it empty, or a read that only reads") {
  HashStore store;
  RoundRecords round(store, "job", 1);
  CHECK_FALSE(round.liveness_if_written().has_value());
  CHECK_FALSE(store.check({"job/round/1/liveness"}));  // reading did not create it
  CHECK(round.liveness() == LivenessReport{});
  CHECK(store.check({"job/round/1/liveness"}));
  const LivenessReport r{7, 5, {"h2-11", "h3-12"}};
  round.report_liveness(r);
  CHECK(round.liveness() == r);
  CHECK(round.liveness_if_written() == r);
  CHECK(store.get_string("job/round/1/liveness") == "7 5 h2-11 h3-12");
}

TEST_CASE("MASTER_PORT: node 0 sets it, every node reads it; a malformed one is an error") {
  HashStore store;
  RoundRecords round(store, "job", 0);
  round.set_master_port(29511);
  CHECK(round.wait_master_port({.timeout = Millis(10)}) == 29511);
  store.set("job/round/1/master_port", "port");
  CHECK_THROWS_AS(RoundRecords(store, "job", 1).wait_master_port({.timeout = Millis(10)}), InvalidArgument);
}

TEST_CASE("the job token: the first candidate wins; a later launcher only reads it") {
  HashStore store;
  testing::CountingStore view(store);
  CHECK(JobRecords(view, "job").token("aaaa") == "aaaa");
  CHECK(JobRecords(view, "job").token("bbbb") == "aaaa");
  CHECK(view.compare_sets == 1);  // the second only read: a compare_set goes through etcd's log
}

TEST_CASE("the exit barrier and the leaving count take tickets: no shared counter to retry on") {
  HashStore store;
  testing::CountingStore view(store);
  RoundRecords round(view, "job", 0);
  CHECK(round.finish(1) == 1);
  CHECK(round.finish(0) == 2);
  CHECK(round.finished() == 2);
  JobRecords job(view, "job");
  CHECK_FALSE(job.any_left());
  job.count_left();
  CHECK(job.any_left());
  CHECK(view.adds == 0);  // on etcd an add on one key retries against every other node's
}

TEST_CASE("the job's own records") {
  HashStore store;
  JobRecords job(store, "job");
  CHECK(job.token("aaaa") == "aaaa");
  CHECK(job.token("bbbb") == "aaaa");  // the first launcher's
  CHECK_FALSE(job.closed().has_value());
  job.close("node 0 got SIGTERM");
  job.close("later");
  CHECK(job.closed() == "node 0 got SIGTERM");
  CHECK_FALSE(job.any_left());
  job.count_left();
  CHECK(job.any_left());
  job.set_worker_store("10.0.0.1:29600");
  CHECK(job.wait_worker_store({.timeout = Millis(10)}) == "10.0.0.1:29600");
  CHECK(job.round(2).round() == 2);
}

TEST_CASE("heartbeat counters: beat adds one; reading one never creates it") {
  HashStore store;
  JobRecords job(store, "job");
  CHECK_FALSE(job.beats_if_any("h1-1").has_value());
  CHECK_FALSE(store.check({"job/heartbeat/h1-1"}));
  CHECK(job.beat("h1-1") == 1);
  CHECK(job.beat("h1-1") == 2);
  CHECK(job.beats("h1-1") == 2);
  CHECK(job.beats_if_any("h1-1") == 2);
  CHECK(job.beats("h2-2") == 0);
}

TEST_CASE("an alive key holds its lease id; another value reads as 0") {
  CHECK(alive_value(7587869) == "7587869");
  CHECK(alive_lease(Store::to_bytes("7587869")) == 7587869);
  CHECK(alive_lease(Store::to_bytes("up")) == 0);
  CHECK(alive_lease(Store::to_bytes("")) == 0);
}
