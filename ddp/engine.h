#pragma once
// Engine: data-parallel gradient averaging for a training program's own buffers — what
// PyTorch's DistributedDataParallel does, for any program that can hand over pointers.
// Register every parameter and buffer, finalize(), then per step: pre_forward(), forward,
// backward calling mark_ready(p) as each gradient is final (buckets launch as they fill; never
// calling it is fine), finish_backward() (gradients now hold the average), optimizer step.
// no_sync() is a scope in which gradients accumulate and the next synchronized step reduces the sum.
// With gradient_as_bucket_view the engine owns the gradients: use them through grad(p).
// Every rank must make the same calls in the same order (collectives inside). Errors:
// InvalidArgument for misuse (naming the parameter, the rank); communication errors (TimeoutError,
// NetworkError) propagate from the collective calls: rebuild the group.
// Not thread-safe except mark_ready, which autograd-like callers may call from several threads.
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "ddp/bucket_assignment.h"
#include "ddp/comm_hook.h"
#include "ddp/join.h"
#include "ddp/options.h"
#include "ddp/param.h"
#include "ddp/timeline.h"

namespace ddp {

class Reducer;

class Engine {
 public:
  Engine(comm::ProcessGroupPtr group, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registration (before finalize). Returns the index used by mark_ready and grad.
  size_t register_param(ParamSpec spec);
  size_t register_buffer(BufferSpec spec);
  // The hook for every bucket (default: allreduce_hook()); same hook on every rank.
  void register_comm_hook(CommHook hook);
  // Collective: checks that every rank registered the same parameters, buffers and options
  // (InvalidArgument naming the first difference and the ranks), broadcasts from rank 0, and
  // assigns the buckets.
  void finalize();

  void pre_forward();
  // The end of the forward pass, for the timeline (ddp/timeline.h) when the caller knows it
  // (the LibTorch wrapper does); without it the timeline's forward ends at the first gradient.
  void forward_done() {
    if (timeline_) forward_end_at_ = Timeline::now_us();
  }
  void mark_ready(size_t param);
  void finish_backward();

  class NoSync {
   public:
    explicit NoSync(Engine& engine) : engine_(engine), previous_(engine.no_sync_) { engine.no_sync_ = true; }
    ~NoSync() noexcept { engine_.no_sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Engine& engine_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  void set_no_sync(bool on) { no_sync_ = on; }  // the C ABI's scope
  bool in_no_sync() const { return no_sync_; }

  comm::Buffer grad(size_t param) const;
  comm::Buffer param_data(size_t param) const;
  size_t num_params() const { return params_.size(); }
  BucketAssignment buckets() const;
  bool buckets_rebuilt() const;
  const comm::ProcessGroupPtr& group() const { return group_; }
  const EngineOptions& options() const { return options_; }

 private:
  friend class Join;
  void enable_join(JoinOptions options);
  void disable_join() noexcept;
  void shadow_iteration(const JoinRound& round);
  void sync_model(int source);
  void check_finalized(const char* op) const;
  std::vector<std::string> describe() const;
  void timeline_begin_step();
  void timeline_compute_spans(int64_t finish_called_at);

  comm::ProcessGroupPtr group_;
  EngineOptions options_;
  std::vector<ParamSpec> params_;
  std::vector<BufferSpec> buffers_;
  CommHook hook_;
  // Null when off (the hooks above then read no clock). Declared before the reducer, whose
  // pending buckets still record into it while it is destroyed.
  std::unique_ptr<Timeline> timeline_;
  int64_t step_ = 0;
  int64_t forward_at_ = 0, forward_end_at_ = 0, step_end_at_ = 0;  // microseconds; 0: not known
  std::unique_ptr<Reducer> reducer_;
  bool no_sync_ = false;
  bool join_enabled_ = false;
  JoinOptions join_options_;
  bool forwarded_ = false;  // pre_forward ran in this iteration
};

}  // namespace ddp
