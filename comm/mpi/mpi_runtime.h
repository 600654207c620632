#pragma once
// MpiRuntime: the thread of this process that talks to MPI. It initializes MPI (MPI_Init_thread,
// MULTIPLE unless DDP_MPI_THREAD_LEVEL says otherwise; MULTIPLE if the application initialized
// MPI first) and makes the MPI calls, one thread at a time, except small ops a caller starts
// while it is idle (run_here). Ops start in post order per channel (one per group) and a
// channel's Works finish in post order. MPI has no timeouts: an op past its deadline fails
// with a TimeoutError and breaks its channel (MpiWatchdog watches blocking calls). Finalize at
// exit if this runtime initialized MPI and nothing is in flight; later uses are BackendErrors.
// How the thread levels, channels, hand-offs and deadlines work: mpi_runtime.cc.
#include <mpi.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "comm/work.h"
#include "common/timeouts.h"

namespace ddp::comm::mpi_backend {

// An op made of several MPI requests in turn (our own point-to-point rounds:
// mpi_p2p_allreduce.h) instead of one. Called by whichever thread holds the runtime's baton.
class MpiSteps {
 public:
  virtual ~MpiSteps() = default;
  // Posts the first round: an MPI error code.
  virtual int start() = 0;
  // Advances as far as MPI allows without waiting; `done` once the result is in place.
  virtual int test(bool& done) = 0;
  // Gives up: the requests still outstanding, each MPI_Cancel()ed (the runtime tests them until
  // MPI lets them go, keeping this object, whose memory they may still write, alive as long).
  virtual std::vector<MPI_Request> abandon() = 0;
};

// One nonblocking op. start() runs on the MPI thread and returns an MPI error code; done()
// (optional) runs there after completion (e.g. AVG's division) and may throw.
struct MpiOp {
  WorkPtr work;
  // "mpi all_reduce #3 in group 'world' (rank 0/4)": the Work's description.
  const std::string& what() const { return work->description(); }
  Millis timeout{0};
  std::function<int(MPI_Request*)> start;
  std::function<void()> done;
  // Point-to-point ops can be MPI_Cancel()ed when they time out; collectives cannot.
  bool cancellable = false;
  // A collective with a blocking form: start(nullptr) makes the blocking call. Run blocking
  // on a channel opened with blocking collectives (on every rank alike: MPI never matches a
  // blocking collective with a nonblocking one).
  bool can_block = false;
  // Set: the op is these steps, and `start` is unused. Started in post order like any op, but
  // within a window: at most kMaxStepsInFlight of a channel's from its oldest not finished on
  // (later ops of the channel wait their turn).
  std::shared_ptr<MpiSteps> steps;
};

// A reference to the callable that makes an op's Work, for run_here (no allocation: it is only
// called during run_here, while the callable lives on the caller's stack).
class WorkMaker {
 public:
  template <typename F>
  WorkMaker(const F& f)  // NOLINT(google-explicit-constructor): passed as a lambda
      : obj_(&f), call_([](const void* o) { return (*static_cast<const F*>(o))(); }) {}
  WorkPtr operator()() const { return call_(obj_); }

 private:
  const void* obj_;
  WorkPtr (*call_)(const void*);
};

class MpiRuntime;

// An mpi op's Work: its wait() polls before it sleeps (see Hand-off), and drives the op when
// its caller parked it (run_here).
class MpiWork final : public Work {
 public:
  MpiWork(MpiRuntime& runtime, std::string description);

 protected:
  std::chrono::microseconds poll_before_sleep() const noexcept override;
  void drive(Clock::time_point until) noexcept override;

 private:
  MpiRuntime& runtime_;
};

class MpiRuntime {
 public:
  // Starts the runtime on first use (blocks until MPI_Init_thread returned); BackendError if
  // MPI cannot be initialized or was finalized already.
  static MpiRuntime& instance();
  // Steps ops (MpiOp::steps) of one channel in flight at once, at most.
  static constexpr int kMaxStepsInFlight = 1024;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int thread_level() const { return provided_; }  // MPI_THREAD_*
  bool initialized_by_us() const { return owns_init_; }

  // Runs fn on the MPI thread, waits, and returns its result (or rethrows its exception).
  template <typename F>
  auto call(F fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto result = task->get_future();
    submit_command([task] { (*task)(); });
    return result.get();
  }

  // Channels: one per group; `blocking_collectives` as described above (the same on every
  // rank of the group). close_channel runs on_drained on the MPI thread once the
  // channel's ops are finished (immediately if none), unless a timed-out op never completes.
  uint64_t open_channel(bool blocking_collectives = false);
  void post(uint64_t channel, MpiOp op);
  // Starts a nonblocking op on the calling thread when the MPI thread is idle (nothing in
  // flight, nothing queued for the channel) and MPI allows it (at least
  // MPI_THREAD_SERIALIZED: the caller holds the runtime's baton meanwhile, so one thread calls
  // MPI at a time). It tests the request for poll_budget(); done then, the op is finished here;
  // otherwise it is parked: its Work's waiter drives it (drive), or the MPI thread adopts it
  // (deadline and all, ahead of anything posted since) after another poll_budget() or as soon
  // as anything else is queued. A small op then costs no hand-off to the MPI thread and
  // back (two wake-ups on a busy machine). `op` comes without a Work: make_work makes it (an
  // MpiWork of this runtime) when one is needed (the op is parked, or fails); an op that succeeds here
  // returns one completed Work shared by all such ops instead (no allocation, no description built). Null
  // when not taken: op is untouched; give it its Work and post() it. An op that succeeded here gives its
  // steps back in op.steps, for the caller to reuse.
  WorkPtr run_here(uint64_t channel, MpiOp& op, WorkMaker make_work);
  // Called by `work`'s waiter (MpiWork::wait): when `work` is the parked op's, takes it back
  // and tests it on this thread until it is done (finishing `work`), or until `until`, the op's
  // deadline, or anything queued for the MPI thread, whichever comes first: then the MPI
  // thread adopts it. Otherwise returns at once.
  void drive(const Work& work, Clock::time_point until) noexcept;
  // The completed Work run_here returns for every op that succeeded on the caller's thread.
  const WorkPtr& finished_here() const;
  // Ops run_here started on a caller's thread, ever; and of those, ones their waiter drove to
  // the end (drive).
  uint64_t ran_here() const;
  uint64_t driven_here() const;
  void close_channel(uint64_t channel, std::function<void()> on_drained);

  // Runs fn on the MPI thread just before MPI_Finalize (to free user-defined MPI objects).
  // Call only on the MPI thread.
  void at_finalize(std::function<void()> fn);
  // The largest usable MPI tag (MPI_TAG_UB).
  int tag_ub() const { return tag_ub_; }
  // How long the MPI thread and a waiting thread poll before they sleep (see Hand-off).
  std::chrono::microseconds poll_budget() const { return poll_budget_; }
  // The communicator whose ranks are this job's world ranks: set by the world group, used by
  // subgroups; MPI_COMM_WORLD until then. MPI thread only.
  MPI_Comm world_comm() const;
  void set_world_comm(MPI_Comm comm);

  // Stops the thread; finalizes MPI if we initialized it and nothing is in flight. Idempotent.
  // A thread stuck in a timed-out blocking call is left behind (joining it would hang).
  void shutdown() noexcept;

  struct Impl;

 private:
  MpiRuntime();
  void submit_command(std::function<void()> command);

  std::unique_ptr<Impl> impl_;
  int world_rank_ = 0;
  int world_size_ = 1;
  int provided_ = 0;
  bool owns_init_ = false;
  int tag_ub_ = 32767;
  std::chrono::microseconds poll_budget_{0};
};

// DDP_MPI_POLL_US, or the default (50 µs) where unset; InvalidArgument naming it outside
// 0..1 s or not an integer.
std::chrono::microseconds poll_budget_from_env();
// "MPI_THREAD_MULTIPLE", ...
const char* thread_level_name(int level);
// MPI_Error_string of an error code.
std::string mpi_error_string(int code);

}  // namespace ddp::comm::mpi_backend
