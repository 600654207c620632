#pragma once
// Reducer: the buckets and the per-iteration state machine of gradient averaging.
// mark_ready(p) for each parameter whose gradient is final; a bucket whose last parameter is ready
// is launched strictly in bucket order, so every rank issues the same collectives in the same
// order. With gradient copies a launched bucket goes to the bucket thread (TaskThread), which
// copies its gradients in, runs the comm hook and copies the averages back out, overlapping compute
// and the other buckets' communication; with bucket views the hook runs on the caller's thread.
// finish() marks what is left (all, when nothing was marked; zeros for unused parameters), waits
// for every bucket, and after the first iteration rebuilds the buckets once from rank 0's ready
// order (broadcast, so identical everywhere).
// Thread-safe: mark_ready may be called from several threads (e.g. autograd workers). In copy
// mode a gradient is read after mark_ready, until finish() returns: leave it alone meanwhile.
// Errors from communication or from a hook propagate from finish(); the group is then unusable.
#include <cstddef>
#include <mutex>
#include <vector>

#include "comm/process_group.h"
#include "common/task_thread.h"
#include "ddp/bucket_assignment.h"
#include "ddp/comm_hook.h"
#include "ddp/device_ops.h"
#include "ddp/param.h"
#include "ddp/timeline.h"

namespace ddp {

class Reducer {
 public:
  struct Options {
    bool gradient_as_bucket_view = false;
    bool find_unused_parameters = false;
    bool static_graph = false;
    bool rebuild_buckets = true;
    size_t first_cap_bytes = size_t{1} << 20;
    size_t cap_bytes = size_t{25} << 20;
    double predivide = 1.0;
  };

  Reducer(comm::ProcessGroupPtr group, std::vector<ParamSpec> params, Options options);
  ~Reducer() noexcept;
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void set_hook(CommHook hook);
  // Records each bucket's ready time and collective, and the wait in finish() (ddp/timeline.h);
  // nullptr: off. Not owned; outlives the reducer.
  void set_timeline(Timeline* timeline);
  // When this iteration's first gradient was marked ready (microseconds); 0: none yet, or off.
  int64_t first_ready_us() const;
  // The divisor of the coming iteration: the world size, or the active ranks under join.
  void set_divisor(int divisor);

  void mark_ready(size_t param);
  void finish();
  // A joined rank's half of one synchronized iteration: the hook on zero-filled buckets, in
  // bucket order, and the one-time rebuild. Leaves this rank's gradients untouched.
  void shadow();

  comm::Buffer grad(size_t param) const;
  BucketAssignment assignment() const;
  bool rebuilt() const;
  // Whether every bucket lives in memory the group reduces in place (GroupMemory::shared: tcp
  // within a host). For tests and benchmarks.
  bool buckets_shared() const;

 private:
  enum class Fill { kCopy, kZero };
  struct Slot {
    size_t bucket = 0;
    size_t offset = 0;
  };
  struct Bucket {
    std::vector<size_t> params;
    DeviceMemory memory;                         // on a GPU
    std::shared_ptr<comm::GroupMemory> on_host;  // on the host: the group's (all_reduce in place)
    comm::Buffer flat;
    size_t pending = 0;
    comm::WorkPtr done;  // completes when the gradients are final: reduced and copied out
  };

  void build(const BucketAssignment& assignment);
  void begin_iteration();
  void mark_locked(size_t param, Fill fill);
  void launch_ready();
  comm::WorkPtr launch(size_t bucket);
  void fill(size_t bucket) const;
  void copy_out(size_t bucket) const;
  GradBucket grad_bucket(size_t bucket, const comm::Buffer& buffer) const;
  comm::WorkPtr run_hook(GradBucket& bucket) const;
  void trace_span(const char* name, size_t bucket, int64_t begin) const;
  void trace_collective(comm::Work& work, size_t bucket, int64_t launched) const;
  void rebuild_once();
  std::string unready_message(const std::vector<size_t>& unready) const;
  comm::Buffer slot_view(size_t param) const;

  comm::ProcessGroupPtr group_;
  std::vector<ParamSpec> params_;
  Options options_;
  CommHook hook_;

  mutable std::mutex mu_;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;
  int divisor_;
  bool in_iteration_ = false;
  std::vector<char> ready_;
  std::vector<Fill> fill_;  // how each ready parameter enters its bucket; read by the bucket thread
  size_t user_marks_ = 0;
  size_t next_launch_ = 0;
  bool rebuilt_ = false;
  std::vector<size_t> ready_order_;  // the first iteration's, for the rebuild
  bool unused_known_ = false;        // static_graph: the unused set was found in iteration 1
  std::vector<size_t> known_unused_;
  Timeline* timeline_ = nullptr;
  int64_t first_ready_us_ = 0;
  TaskThread bucket_thread_;  // last: destroyed first, while what its tasks touch still lives
};

}  // namespace ddp
