// ddp_elastic_probe: a worker for the in-place tests (hosts_in_place_test.sh). Trains a counter
// through ddp::elastic::run: each step all_reduces ones over the group, adds the sum and commits.
// Prints "group pid=<pid> round=<r> rank=<rank> world=<w>" for every group it forms, and at the
// end "done pid=<pid> value=<v> steps=<n>". Steps are paced (STEP_MS) so a test can act mid-run.
// With --print-steps, one line per step as bench/elastic_job.py prints them (bench/elastic.sh):
// "elastic_job step <s> rank <r> world <w> restart <TORCHELASTIC_RESTART_COUNT> t <unix time, s>".
// With --restart, the same steps printed so, by a plain worker that does not recover in place: its
// group from the launcher's environment (ddp::init_process_group), no ddp::elastic; a failure exits
// 1 and the launcher starts it again (bench/elastic.sh's "cpp-restart" path: the same program both
// ways; hosts_restart_test.sh).
// With --stall-on-change (hosts_in_place_test.sh MAX_RESTARTS), a worker of the job's first attempt
// (TORCHELASTIC_RESTART_COUNT 0) whose step in a group of more than one fails with a
// NetworkError (a lost peer, or the round's MembershipChanged) prints "stalled pid=<pid>: <why>"
// and waits until it is stopped instead of re-joining: a worker stuck in its own code, which its
// launcher must restart. (A group of one that grows re-joins as usual.)
// With --exit-on-change, such a worker prints "exited pid=<pid>: <why>" and exits 3 instead: a
// moved worker that dies, which its launcher must count as a failure and restart.
// usage: ddp_elastic_probe STEPS STEP_MS [--print-steps | --restart | --stall-on-change |
//        --exit-on-change]   (STEPS 0: until stopped)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "comm/init.h"
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
    std::printf("elastic_job step %lld rank %d world %d restart %lld t %.6f\n",
                static_cast<long long>(state.step), g.rank(), g.size(),
                static_cast<long long>(ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount)),
                t);
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

enum class Mode { kInPlace, kPrintSteps, kRestart, kStall, kExit };

std::optional<Mode> mode_of(int argc, char** argv) {
  if (argc == 3) return Mode::kInPlace;
  if (argc != 4) return std::nullopt;
  const std::string_view flag = argv[3];
  if (flag == "--print-steps") return Mode::kPrintSteps;
  if (flag == "--restart") return Mode::kRestart;
  if (flag == "--stall-on-change") return Mode::kStall;
  if (flag == "--exit-on-change") return Mode::kExit;
  return std::nullopt;
}

struct Run {
  Mode mode;
  int64_t steps;
  std::chrono::milliseconds pace;
  bool more(const Counter& state) const { return steps == 0 || state.step < steps; }
};

void print_group(int round, const ddp::comm::ProcessGroup& g) {
  std::printf("group pid=%d round=%d rank=%d world=%d\n", static_cast<int>(::getpid()), round, g.rank(),
              g.size());
  std::fflush(stdout);
}

// --restart: no recovery in place; a failure propagates (exit 1) and the launcher restarts us.
void run_restart(const Run& r, Counter& state) {
  ddp::comm::ProcessGroupPtr g = ddp::init_process_group();  // tcp, env://
  print_group(static_cast<int>(ddp::settings::int_value(ddp::settings::kElasticRound)), *g);
  for (; r.more(state); std::this_thread::sleep_for(r.pace)) step(*g, state, true);
  ddp::destroy_process_group();
}

void run_in_place(const Run& r, Counter& state) {
  // Only the job's first attempt gives up (a restarted worker re-joins as usual).
  const bool give_up_on_change = (r.mode == Mode::kStall || r.mode == Mode::kExit) &&
                                 ddp::settings::int_value(ddp::settings::kTorchelasticRestartCount) == 0;
  ddp::elastic::Session session;
  ddp::elastic::RunOptions ro;
  ro.on_group = [&](const ddp::comm::ProcessGroupPtr& g) { print_group(session.round(), *g); };
  ddp::elastic::run(
      session, state,
      [&](const ddp::comm::ProcessGroupPtr& g) {
        for (; r.more(state); std::this_thread::sleep_for(r.pace)) {
          try {
            step(*g, state, r.mode == Mode::kPrintSteps);
          } catch (const ddp::NetworkError& e) {
            if (give_up_on_change && g->size() > 1) give_up(e, r.mode == Mode::kExit);
            throw;
          }
        }
      },
      ro);
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Mode> mode = mode_of(argc, argv);
  if (!mode) {
    std::fprintf(stderr,
                 "usage: ddp_elastic_probe STEPS STEP_MS [--print-steps | --restart | --stall-on-change | "
                 "--exit-on-change]\n");
    return 2;
  }
  const Run run{*mode, std::atoll(argv[1]), std::chrono::milliseconds(std::atoi(argv[2]))};
  try {
    Counter state;
    if (run.mode == Mode::kRestart) {
      run_restart(run, state);
    } else {
      run_in_place(run, state);
    }
    std::printf("done pid=%d value=%lld steps=%lld\n", static_cast<int>(::getpid()),
                static_cast<long long>(state.value), static_cast<long long>(state.step));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_elastic_probe: %s\n", e.what());
    return 1;
  }
}
