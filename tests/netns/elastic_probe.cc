// ddp_elastic_probe: a worker for the in-place tests (tests/netns/hosts_*_test.sh). Trains a counter
// through ddp::elastic::run: each step all_reduces ones over the group, adds the sum and commits.
// Prints "group pid=<pid> round=<r> rank=<rank> world=<w>" for every group it forms, and at the
// end "done pid=<pid> value=<v> steps=<n>". Steps are paced (STEP_MS) so a test can act mid-run.
// usage: ddp_elastic_probe STEPS STEP_MS [--print-steps] [--restart | --stall-on-change |
//        --exit-on-change] [--slow-on-group MS]   (STEPS 0: until stopped)
// --print-steps: a line per step, as bench/elastic_job.py prints them (elastic_harness.sh checks
// the value they imply against "done"). --restart: a plain worker (no ddp::elastic; a failure exits
// 1 for the launcher to restart it; steps printed). --stall-on-change / --exit-on-change: in the
// job's first attempt, a step failing with a NetworkError prints "stalled|exited pid=<pid>: <why>"
// and waits to be stopped / exits 3. --slow-on-group MS: each group re-formed after a change waits
// MS in on_group, before its state sync.
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
#include "ddp/elastic/elastic.h"

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

// kRestart: bench/elastic.sh's "cpp-restart", hosts_restart_test.sh. kStall: a worker stuck in its
// own code, which its launcher must restart; kExit: a moved worker that dies (both only in a group
// of more than one).
enum class Mode { kInPlace, kRestart, kStall, kExit };

struct Run {
  Mode mode = Mode::kInPlace;
  bool print_steps = false;
  // A slow rebuild: the window in which hosts_in_place_second_loss_test.sh loses another node.
  std::chrono::milliseconds slow_on_group{0};
  int64_t steps = 0;
  std::chrono::milliseconds pace{0};
  bool more(const Counter& state) const { return steps == 0 || state.step < steps; }
};

// STEPS STEP_MS [flags]; nullopt on a usage error.
std::optional<Run> parse(int argc, char** argv) {
  if (argc < 3) return std::nullopt;
  Run r;
  r.steps = std::atoll(argv[1]);
  r.pace = std::chrono::milliseconds(std::atoi(argv[2]));
  bool moded = false;
  auto set_mode = [&](Mode m) {
    if (moded) return false;
    moded = true;
    r.mode = m;
    return true;
  };
  for (int i = 3; i < argc; ++i) {
    const std::string_view flag = argv[i];
    bool ok = true;
    if (flag == "--print-steps") {
      r.print_steps = true;
    } else if (flag == "--restart") {
      ok = set_mode(Mode::kRestart);
    } else if (flag == "--stall-on-change") {
      ok = set_mode(Mode::kStall);
    } else if (flag == "--exit-on-change") {
      ok = set_mode(Mode::kExit);
    } else if (flag == "--slow-on-group" && i + 1 < argc) {
      r.slow_on_group = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else {
      ok = false;
    }
    if (!ok) return std::nullopt;
  }
  return r;
}

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
  ro.on_group = [&](const ddp::comm::ProcessGroupPtr& g) {
    print_group(session.round(), *g);
    if (session.rounds() > 1) std::this_thread::sleep_for(r.slow_on_group);
  };
  ddp::elastic::run(
      session, state,
      [&](const ddp::comm::ProcessGroupPtr& g) {
        for (; r.more(state); std::this_thread::sleep_for(r.pace)) {
          try {
            step(*g, state, r.print_steps);
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
  const std::optional<Run> run = parse(argc, argv);
  if (!run) {
    std::fprintf(stderr,
                 "usage: ddp_elastic_probe STEPS STEP_MS [--print-steps] [--restart | --stall-on-change | "
                 "--exit-on-change] [--slow-on-group MS]\n");
    return 2;
  }
  try {
    Counter state;
    if (run->mode == Mode::kRestart) {
      run_restart(*run, state);
    } else {
      run_in_place(*run, state);
    }
    std::printf("done pid=%d value=%lld steps=%lld\n", static_cast<int>(::getpid()),
                static_cast<long long>(state.value), static_cast<long long>(state.step));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_elastic_probe: %s\n", e.what());
    return 1;
  }
}
