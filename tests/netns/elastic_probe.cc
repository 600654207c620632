// ddp_elastic_probe: a worker for the in-place tests (hosts_in_place_test.sh). Trains a counter
// through ddp::elastic::run: each step all_reduces ones over the group, adds the sum and commits.
// Prints "group pid=<pid> round=<r> rank=<rank> world=<w>" for every group it forms, and at the
// end "done pid=<pid> value=<v> steps=<n>". Steps are paced (--step-ms) so a test can act mid-run.
// usage: ddp_elastic_probe STEPS STEP_MS
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "ddp/elastic.h"

namespace {

struct Counter : ddp::elastic::State {
  int64_t value = 0;
  int64_t step = 0;
  std::string save() override {
    std::string b(16, '\0');
    std::memcpy(b.data(), &value, 8);
    std::memcpy(b.data() + 8, &step, 8);
    return b;
  }
  void load(const std::string& b) override {
    std::memcpy(&value, b.data(), 8);
    std::memcpy(&step, b.data() + 8, 8);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ddp_elastic_probe STEPS STEP_MS\n");
    return 2;
  }
  const int64_t steps = std::atoll(argv[1]);
  const auto pace = std::chrono::milliseconds(std::atoi(argv[2]));
  try {
    ddp::elastic::Session session;
    Counter state;
    ddp::elastic::RunOptions ro;
    ro.on_group = [&](const ddp::comm::ProcessGroupPtr& g) {
      std::printf("group pid=%d round=%d rank=%d world=%d\n", static_cast<int>(::getpid()), session.round(),
                  g->rank(), g->size());
      std::fflush(stdout);
    };
    ddp::elastic::run(
        session, state,
        [&](const ddp::comm::ProcessGroupPtr& g) {
          while (state.step < steps) {
            int64_t one = 1;
            g->all_reduce(ddp::comm::view(&one, 1))->wait();
            state.value += one;
            ++state.step;
            state.commit();
            std::this_thread::sleep_for(pace);
          }
        },
        ro);
    std::printf("done pid=%d value=%lld steps=%lld\n", static_cast<int>(::getpid()),
                static_cast<long long>(state.value), static_cast<long long>(state.step));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_elastic_probe: %s\n", e.what());
    return 1;
  }
}
