// ddp_elastic_probe: a worker for the in-place tests (hosts_in_place_test.sh). Trains a counter
// through ddp::elastic::run: each step all_reduces ones over the group, adds the sum and commits.
// Prints "group pid=<pid> round=<r> rank=<rank> world=<w>" for every group it forms, and at the
// end "done pid=<pid> value=<v> steps=<n>". Steps are paced (STEP_MS) so a test can act mid-run.
// With --print-steps, one line per step as bench/elastic_job.py prints them (bench/elastic.sh):
// "elastic_job step <s> rank <r> world <w> restart 0 t <unix time, s>".
// With --stall-on-change (hosts_in_place_test.sh MAX_RESTARTS), a worker of the job's first attempt
// (TORCHELASTIC_RESTART_COUNT 0) whose step in a group of more than one fails with a
// NetworkError (a lost peer, or the round's MembershipChanged) prints "stalled pid=<pid>: <why>"
// and waits until it is stopped instead of re-joining: a worker stuck in its own code, which its
// launcher must restart. (A group of one that grows re-joins as usual.)
// With --exit-on-change, such a worker prints "exited pid=<pid>: <why>" and exits 3 instead: a
// moved worker that dies, which its launcher must count as a failure and restart.
// usage: ddp_elastic_probe STEPS STEP_MS [--print-steps | --stall-on-change | --exit-on-change]
//        (STEPS 0: until stopped)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "common/error.h"
#include "common/settings.h"
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

// One step: a 1 all_reduced over the group and added, then committed.
void step(ddp::comm::ProcessGroup& g, Counter& state, bool print_steps) {
  int64_t one = 1;
  g.all_reduce(ddp::comm::view(&one, 1))->wait();
  state.value += one;
  ++state.step;
  if (print_steps) {
    const double t =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::printf("elastic_job step %lld rank %d world %d restart 0 t %.6f\n",
                static_cast<long long>(state.step), g.rank(), g.size(), t);
    std::fflush(stdout);
  }
  state.commit();
}

// --stall-on-change: never returns (the launcher stops the process); --exit-on-change: exits 3.
[[noreturn]] void give_up(const std::exception& why, bool exit) {
  std::printf("%s pid=%d: %s\n", exit ? "exited" : "stalled", static_cast<int>(::getpid()), why.what());
  std::fflush(stdout);
  if (exit) std::_Exit(3);
  while (true) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view flag = argc == 4 ? argv[3] : "";
  const bool print_steps = flag == "--print-steps";
  const bool exit_on_change = flag == "--exit-on-change";
  const bool give_up_on_change = (flag == "--stall-on-change" || exit_on_change) &&
                                 ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount) == 0;
  if (argc < 3 || argc > 4 ||
      (argc == 4 && !print_steps && !exit_on_change && flag != "--stall-on-change")) {
    std::fprintf(stderr,
                 "usage: ddp_elastic_probe STEPS STEP_MS [--print-steps | --stall-on-change | "
                 "--exit-on-change]\n");
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
          while (steps == 0 || state.step < steps) {
            try {
              step(*g, state, print_steps);
            } catch (const ddp::NetworkError& e) {
              if (give_up_on_change && g->size() > 1) give_up(e, exit_on_change);
              throw;
            }
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
