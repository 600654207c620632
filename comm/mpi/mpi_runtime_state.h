#pragma once
// Internal to MpiRuntime: its state, shared by mpi_runtime.cc (the MPI thread's channels and
// deadlines), mpi_runtime_loop.cc (the MPI thread: init, its loop, finalize) and
// mpi_runtime_caller.cc (small ops started on a caller's thread: run_here, and the baton that
// keeps one thread in MPI at a time).
#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_runtime.h"
#include "comm/mpi/mpi_watchdog.h"

namespace ddp::comm::mpi_backend {

// The baton: who may call MPI now (run_here).
inline constexpr int kBatonFree = 0;    // nobody: the MPI thread is idle
inline constexpr int kBatonThread = 1;  // the MPI thread
inline constexpr int kBatonCaller = 2;  // a caller running a small op

// A request MPI has not let go of after its op was given up (a timed-out collective, a
// cancelled send/recv), tested until it has; `owner` keeps the memory it may write alive.
struct Zombie {
  MPI_Request request = MPI_REQUEST_NULL;
  std::shared_ptr<MpiSteps> owner;
};

struct Inflight {
  MpiOp op;
  MPI_Request request = MPI_REQUEST_NULL;
  bool done = false;
  Clock::time_point deadline;

  // The op's nonblocking start (its request, or its steps' first round): an MPI error code.
  int begin();
  // MPI_Test of the request, or a pass over the steps: sets done.
  int test();
  // Its requests still outstanding, for the zombies (cancelled where the op allows it).
  void abandon(std::vector<Zombie>& zombies);
};

// A caller's op not done within its poll (run_here): its waiter may drive it until the MPI
// thread adopts it, at adopt_at or as soon as anything else is queued.
struct Parked {
  uint64_t channel = 0;
  Inflight f;
  Clock::time_point adopt_at;
};

struct Channel {
  uint64_t id = 0;
  bool blocking = false;  // collectives as blocking calls (open_channel)
  std::deque<Inflight> inflight;
  // Posted behind a steps op that could not start (kMaxStepsInFlight), in post order.
  std::deque<Inflight> held;
  std::exception_ptr broken;
  bool closing = false;
  std::function<void()> on_drained;
};

// What one pass of the MPI thread took from the queues (take_queues), run in this order by
// dispatch: commands, adopted, posted, closes.
struct TakenQueues {
  std::deque<std::function<void()>> commands;
  std::deque<std::pair<uint64_t, MpiOp>> posted;
  std::deque<std::pair<uint64_t, std::function<void()>>> closes;
  std::deque<std::pair<uint64_t, Inflight>> adopted;
  bool stopping = false;  // `stop` as taken: this pass is the last
};

// The MPI thread's pacing, carried from one pass to the next (run).
struct LoopPace {
  int idle = 0;                   // consecutive passes without progress while ops are in flight
  Clock::time_point quiet_since;  // the first of those passes
  uint64_t seen = 0;              // `submitted` when the queues were last taken
  Clock::time_point poll_end;     // the hand-off's poll, from the last pass that did something
};

struct MpiRuntime::Impl {
  // Shared with user threads, under mu.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> commands;
  std::deque<std::pair<uint64_t, MpiOp>> posted;
  std::deque<std::pair<uint64_t, std::function<void()>>> closes;
  std::deque<std::pair<uint64_t, Inflight>> adopted;  // run_here's ops still in flight, in order
  std::map<uint64_t, std::exception_ptr> broken;      // channels broken, as callers must see them
  std::vector<Zombie> orphans;                        // left by a caller's failed op, for `zombies`
  std::optional<Parked> parked;                       // at most one: run_here needs the MPI thread idle
  std::atomic<bool> has_parked{false};                // parked.has_value(), set with it under mu
  bool stop = false;
  std::atomic<uint64_t> submitted{0};  // commands, posts, closes and the stop, ever: polled
  // `submitted` when the MPI thread last emptied the queues (under mu, with the baton): equal
  // to it, nothing has been queued since (run_here's check without mu).
  std::atomic<uint64_t> taken{0};
  std::atomic<bool> any_broken{false};  // !broken.empty(), set with it under mu
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> next_channel{1};
  std::map<uint64_t, bool> opened;  // channel -> blocking collectives, until its first use
  std::string stuck_in;             // the timed-out blocking call the MPI thread is in, if any
  std::thread thread;
  MpiWatchdog watchdog;
  std::atomic<int> baton{kBatonThread};
  std::atomic<uint64_t> ran_here{0};     // written by the baton's holder only
  std::atomic<uint64_t> driven_here{0};  // likewise
  const WorkPtr finished_here = Work::completed("mpi op (finished on the caller's thread)");

  // MPI thread only.
  std::map<uint64_t, Channel> channels;
  std::vector<Zombie> zombies;  // given-up requests MPI has not let go of
  std::vector<std::function<void()>> finalizers;
  MPI_Comm world = MPI_COMM_WORLD;

  Channel& channel(uint64_t id);
  void start(uint64_t id, MpiOp op);
  void start_now(Channel& ch, Inflight f);
  void start_held(Channel& ch);
  void adopt(uint64_t id, Inflight f);
  void hand_over(uint64_t channel, Inflight f);  // a caller's op, to the MPI thread (adopted)
  void park(uint64_t channel, Inflight f, std::chrono::microseconds poll);
  // Under mu, on the MPI thread: the parked op, into `into`, when it is due (or `force`).
  void adopt_parked(std::deque<std::pair<uint64_t, Inflight>>& into, bool force);
  // With the baton, after f was tested on a caller's thread to its end: its error (`error`, or
  // one made of a failed MPI code `rc`), recorded as the channel's (its later ops fail with it);
  // null when it succeeded. The caller finishes its Work.
  std::exception_ptr conclude_here(uint64_t channel, Inflight& f, int rc, std::exception_ptr error);
  void add_orphans(std::vector<Zombie> left);  // a caller's leftover requests, for `zombies`
  void take_baton();
  bool take_baton_to_drive(std::chrono::microseconds patience);  // a waiter's (drive)
  bool drive_here(Inflight& f, Clock::time_point stop, int& rc, std::exception_ptr& error);
  bool try_take_baton();  // true when this thread holds it (had it, or took it now)
  bool start_here(Inflight& f, std::chrono::microseconds poll, int& rc, std::exception_ptr& error,
                  std::vector<Zombie>& left);
  void run_blocking(Channel& ch, Inflight f);
  void on_stuck(const MpiOp& op, const std::vector<WorkPtr>& others);
  bool progress(Channel& ch);
  void break_channel(Channel& ch, std::exception_ptr error);
  void finish_front(Channel& ch);
  void test_zombies();
  void run(MpiRuntime& rt, std::promise<void>& ready);
  void init_mpi(MpiRuntime& rt);  // on the MPI thread, first: MPI up, rt's world filled in
  // One pass's steps, in run's order: wait for work and take the queues (with the baton), run
  // what was taken, then test every channel (closing the drained ones being closed).
  TakenQueues take_queues(LoopPace& pace);
  void await_turn(std::unique_lock<std::mutex>& lock, const LoopPace& pace);  // under mu
  void dispatch(TakenQueues& pass);
  void begin_close(uint64_t id, std::function<void()> on_drained);
  bool progress_channels();  // whether any op moved
  void await_submission(std::unique_lock<std::mutex>& lock, uint64_t seen, Clock::time_point poll_end);
  bool has_work() const;  // under mu: something for the MPI thread in the queues, or the stop
  // With the baton: whether run_here may start an op of `channel` now (nothing queued for it,
  // MPI up, not stuck); `error` is the channel's, if a caller's op broke it.
  bool callers_turn(uint64_t channel, std::exception_ptr& error);
  // Under mu, ops in flight and none moved for a while: yield, or (quiet for long) sleep briefly.
  void back_off(std::unique_lock<std::mutex>& lock, Clock::time_point quiet_since);
  void wind_down(MpiRuntime& rt);
};

}  // namespace ddp::comm::mpi_backend
