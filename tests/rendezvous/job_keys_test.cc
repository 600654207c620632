// The job's keys (rendezvous/job_keys.h): their exact text is a wire format, read and written
// by launchers and workers of other versions, so each is spelled out here.
#include "rendezvous/job_keys.h"

#include <doctest/doctest.h>

#include <set>

using namespace ddp::rdzv;

TEST_CASE("the job's own keys sit under <run_id>/") {
  const JobKeys job("job");
  CHECK(job.run_id() == "job");
  CHECK(job.closed() == "job/closed");
  CHECK(job.left() == "job/left");
  CHECK(job.job_token() == "job/job_token");
  CHECK(job.worker_store() == "job/worker_store");
  CHECK(job.heartbeat("h1-42") == "job/heartbeat/h1-42");
  CHECK(job.alive_prefix() == "job/alive/");
  CHECK(job.alive("h1-42") == "job/alive/h1-42");
}

TEST_CASE("a round's keys sit under <run_id>/round/<n>/") {
  const RoundKeys r = JobKeys("job").round(3);
  CHECK(r.round() == 3);
  CHECK(r.prefix() == "job/round/3/");
  CHECK(r.shape() == "job/round/3/shape");
  CHECK(r.arrived() == "job/round/3/arrived");
  CHECK(r.node(7) == "job/round/3/node/7");
  CHECK(r.layout() == "job/round/3/layout");
  CHECK(r.closed() == "job/round/3/closed");
  CHECK(r.master_port() == "job/round/3/master_port");
  CHECK(r.outcome() == "job/round/3/outcome");
  CHECK(r.done() == "job/round/3/done");
  CHECK(r.done(1) == "job/round/3/done/1");
  CHECK(r.left(2) == "job/round/3/left/2");
  CHECK(r.liveness() == "job/round/3/liveness");
  CHECK(r.in_place(4) == "job/round/3/in_place/4");
  CHECK(r.assign(4) == "job/round/3/assign/4");
  CHECK(r.group() == "job/round/3/group");
}

TEST_CASE("no two keys of a job collide, across rounds and jobs") {
  std::set<std::string> seen;
  auto add = [&](const std::string& k) { CHECK_MESSAGE(seen.insert(k).second, k); };
  for (const std::string id : {"a", "ab"}) {
    const JobKeys job(id);
    for (const auto& k :
         {job.closed(), job.left(), job.job_token(), job.worker_store(), job.heartbeat("x"), job.alive("x")})
      add(k);
    for (int n : {1, 11}) {
      const RoundKeys r = job.round(n);
      for (const auto& k :
           {r.shape(), r.arrived(), r.node(1), r.layout(), r.closed(), r.master_port(), r.outcome(), r.done(),
            r.done(1), r.left(1), r.liveness(), r.in_place(1), r.assign(1), r.group()})
        add(k);
    }
  }
}
