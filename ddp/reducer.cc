#include "ddp/reducer.h"

#include <algorithm>

#include "common/error.h"
#include "ddp/host_collectives.h"

namespace ddp {
namespace {

// Runs f, which finishes `work` itself when it succeeds; an exception finishes it with that error.
template <typename F>
void finish_with(comm::Work& work, F&& f) {
  try {
    f();
  } catch (...) {
    work.finish(std::current_exception());
  }
}

}  // namespace

Reducer::Reducer(comm::ProcessGroupPtr group, std::vector<ParamSpec> params, Options options)
    : group_(std::move(group)),
      params_(std::move(params)),
      options_(options),
      hook_(allreduce_hook()),
      divisor_(group_->size()),
      ready_(params_.size(), 0),
      fill_(params_.size(), Fill::kCopy) {
  DDP_CHECK(options_.predivide > 0, "gradient_predivide_factor must be positive, got ", options_.predivide);
  std::vector<ParamSize> sizes;
  for (const auto& p : params_) sizes.push_back({p.data.count, {p.data.dtype, p.data.device}});
  build(assign_buckets(sizes, reverse_order(params_.size()), options_.first_cap_bytes, options_.cap_bytes));
  // A program that never marks anything has nothing to learn the order from; a single
  // rank has nobody to agree with, but goes through the same steps for uniformity.
  if (!options_.rebuild_buckets) rebuilt_ = true;
}

Reducer::~Reducer() noexcept {
  // Launched buckets finish (their ops end by completion, error or deadline) before the
  // buffers, the group and the bucket thread they use go away.
  for (auto& b : buckets_) {
    if (!b.done) continue;
    try {
      b.done->wait();
    } catch (...) {  // reported by finish(), or nobody is left to report it to
    }
  }
}

void Reducer::set_hook(CommHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  DDP_CHECK(!in_iteration_, "register_comm_hook: not allowed in the middle of an iteration");
  hook_ = hook ? std::move(hook) : allreduce_hook();
}

void Reducer::set_timeline(Timeline* timeline) {
  std::lock_guard<std::mutex> lock(mu_);
  timeline_ = timeline;
}

int64_t Reducer::first_ready_us() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_ready_us_;
}

void Reducer::set_divisor(int divisor) {
  std::lock_guard<std::mutex> lock(mu_);
  DDP_CHECK(divisor >= 1, "gradient divisor must be at least 1, got ", divisor);
  divisor_ = divisor;
}

void Reducer::build(const BucketAssignment& assignment) {
  std::vector<Bucket> buckets(assignment.size());
  std::vector<Slot> slots(params_.size());
  for (size_t b = 0; b < assignment.size(); ++b) {
    const ParamSpec& first = params_[assignment[b].front()];
    size_t count = 0;
    for (size_t p : assignment[b]) {
      slots[p] = {b, count};
      count += params_[p].data.count;
    }
    buckets[b].params = assignment[b];
    const size_t bytes = count * comm::dtype_size(first.data.dtype);
    if (first.data.device.is_cuda()) {
      buckets[b].memory = DeviceMemory(bytes, first.data.device);
      buckets[b].flat = buckets[b].memory.view(count, first.data.dtype);
    } else {
      // Every rank builds the same buckets at the same point (construction, and the rebuild
      // after rank 0's broadcast), as allocate needs: tcp on one host reduces them in place.
      buckets[b].on_host = group_->allocate(bytes);
      buckets[b].flat = buckets[b].on_host->view(count, first.data.dtype);
    }
  }
  if (options_.gradient_as_bucket_view) {
    // Gradients live in the buckets: carry their values over (the user's initial buffer the
    // first time, the old bucket slot on a rebuild).
    for (size_t p = 0; p < params_.size(); ++p) {
      comm::Buffer dst = buckets[slots[p].bucket].flat.slice(slots[p].offset, params_[p].data.count);
      if (!buckets_.empty()) {
        copy_buffer(dst, slot_view(p));
      } else if (params_[p].grad.data) {
        copy_buffer(dst, params_[p].grad);
      }
    }
  }
  buckets_ = std::move(buckets);
  slots_ = std::move(slots);
}

comm::Buffer Reducer::slot_view(size_t p) const {
  const Slot& s = slots_[p];
  return buckets_[s.bucket].flat.slice(s.offset, params_[p].data.count);
}

comm::Buffer Reducer::grad(size_t param) const {
  std::lock_guard<std::mutex> lock(mu_);
  DDP_CHECK_LT(param, params_.size(), "grad: no such parameter");
  return options_.gradient_as_bucket_view ? slot_view(param) : params_[param].grad;
}

bool Reducer::buckets_shared() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(buckets_.begin(), buckets_.end(),
                     [](const Bucket& b) { return b.on_host && b.on_host->shared(); });
}

BucketAssignment Reducer::assignment() const {
  std::lock_guard<std::mutex> lock(mu_);
  BucketAssignment out;
  for (const auto& b : buckets_) out.push_back(b.params);
  return out;
}

bool Reducer::rebuilt() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rebuilt_;
}

void Reducer::begin_iteration() {
  in_iteration_ = true;
  std::fill(ready_.begin(), ready_.end(), 0);
  user_marks_ = 0;
  first_ready_us_ = 0;
  next_launch_ = 0;
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.done.reset();
  }
  // static_graph: the parameters found unused in iteration 1 are ready from the start, so the
  // buckets holding them do not wait for finish().
  if (unused_known_) {
    for (size_t p : known_unused_) mark_locked(p, Fill::kZero);
  }
}

void Reducer::mark_ready(size_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  DDP_CHECK_LT(param, params_.size(), "mark_ready: no such parameter");
  if (!in_iteration_) begin_iteration();
  if (ready_[param]) {
    bool premarked = std::find(known_unused_.begin(), known_unused_.end(), param) != known_unused_.end();
    DDP_THROW(InvalidArgument, "mark_ready: parameter '", params_[param].name, "' (index ", param, ") was ",
              premarked ? "unused in the first iteration, which static_graph assumes for every iteration"
                        : "already marked ready in this iteration");
  }
  if (!rebuilt_) ready_order_.push_back(param);
  if (timeline_ && user_marks_ == 0) first_ready_us_ = Timeline::now_us();
  ++user_marks_;
  mark_locked(param, Fill::kCopy);
}

void Reducer::mark_locked(size_t param, Fill fill) {
  ready_[param] = 1;
  fill_[param] = fill;
  Bucket& b = buckets_[slots_[param].bucket];
  if (--b.pending != 0) return;
  if (timeline_) {
    timeline_->instant(
        "ready", Timeline::bucket_track(slots_[param].bucket), Timeline::now_us(),
        "\"bytes\":" + std::to_string(b.flat.bytes()) + ",\"params\":" + std::to_string(b.params.size()));
  }
  launch_ready();
}

void Reducer::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    buckets_[next_launch_].done = launch(next_launch_);
    ++next_launch_;
  }
}

// Launched in bucket order, so the hooks' collectives are issued in bucket order. Bucket views
// need no copies: the hook runs right here (a hop to another thread costs a scheduler wake-up
// per bucket, milliseconds on a loaded machine). Copies go to the bucket thread. Its tasks
// take no lock: buckets, slots and fills stay put until finish() has waited for every bucket.
comm::WorkPtr Reducer::launch(size_t bucket) {
  GradBucket gb = grad_bucket(bucket, buckets_[bucket].flat);
  if (options_.gradient_as_bucket_view) {
    try {
      const int64_t start = timeline_ ? Timeline::now_us() : 0;
      fill(bucket);  // zeros for unused parameters; the gradients are already in place
      comm::WorkPtr work = run_hook(gb);
      if (!timeline_) return work;
      // The bucket completes once its span is recorded: finish() then never sees a bucket done
      // whose span is still to come (a Work wakes its waiters before it runs its callbacks).
      auto traced = std::make_shared<comm::Work>("ddp bucket " + std::to_string(bucket));
      trace_collective(*work, bucket, start);
      work->then([traced](comm::Work& w) { traced->finish(w.exception()); });
      return traced;
    } catch (...) {
      auto failed = std::make_shared<comm::Work>("ddp bucket " + std::to_string(bucket));
      failed->finish(std::current_exception());
      return failed;
    }
  }
  auto done = std::make_shared<comm::Work>("ddp bucket " + std::to_string(bucket));
  bucket_thread_.post([this, gb = std::move(gb), done]() mutable {
    finish_with(*done, [&] {
      const int64_t copy_in = timeline_ ? Timeline::now_us() : 0;
      fill(gb.index);
      if (timeline_) trace_span("copy in", gb.index, copy_in);
      const int64_t launched = timeline_ ? Timeline::now_us() : 0;
      comm::WorkPtr work = run_hook(gb);
      if (timeline_) trace_collective(*work, gb.index, launched);
      work->then([this, bucket = gb.index, done](comm::Work& work) {
        if (std::exception_ptr error = work.exception()) return done->finish(error);
        bucket_thread_.post([this, bucket, done] {
          finish_with(*done, [&] {
            const int64_t copy_out_at = timeline_ ? Timeline::now_us() : 0;
            copy_out(bucket);
            if (timeline_) trace_span("copy out", bucket, copy_out_at);
            done->finish();
          });
        });
      });
    });
  });
  return done;
}

// The timeline's bucket track: a span from `begin` to now.
void Reducer::trace_span(const char* name, size_t bucket, int64_t begin) const {
  timeline_->span(name, Timeline::bucket_track(bucket), begin, Timeline::now_us());
}

// The collective's span, from its launch to its Work's completion, recorded by the first
// callback on that Work (callbacks run in the order they were added, on the finishing thread).
void Reducer::trace_collective(comm::Work& work, size_t bucket, int64_t launched) const {
  const std::string args = "\"bytes\":" + std::to_string(buckets_[bucket].flat.bytes());
  work.then([timeline = timeline_, bucket, launched, args](comm::Work&) {
    timeline->span("collective", Timeline::bucket_track(bucket), launched, Timeline::now_us(), args);
  });
}

void Reducer::fill(size_t bucket) const {
  for (size_t p : buckets_[bucket].params) {
    if (fill_[p] == Fill::kZero) {
      zero_buffer(slot_view(p));
    } else if (!options_.gradient_as_bucket_view) {
      copy_buffer(slot_view(p), params_[p].grad);
    }
  }
}

void Reducer::copy_out(size_t bucket) const {
  for (size_t p : buckets_[bucket].params) copy_buffer(params_[p].grad, slot_view(p));
}

GradBucket Reducer::grad_bucket(size_t bucket, const comm::Buffer& buffer) const {
  GradBucket gb;
  gb.index = bucket;
  gb.is_last = bucket + 1 == buckets_.size();
  gb.buffer = buffer;
  gb.params = buckets_[bucket].params;
  for (size_t p : gb.params) {
    const ParamSpec& spec = params_[p];
    gb.shapes.push_back(spec.shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(spec.data.count)}
                                           : spec.shape);
  }
  gb.pre_divide = options_.predivide;
  gb.post_divide = static_cast<double>(divisor_) / options_.predivide;
  return gb;
}

comm::WorkPtr Reducer::run_hook(GradBucket& bucket) const {
  comm::WorkPtr work = hook_(*group_, bucket);
  if (!work) DDP_THROW(InvalidArgument, "comm hook returned no Work for bucket ", bucket.index);
  return work;
}

std::string Reducer::unready_message(const std::vector<size_t>& unready) const {
  std::string names;
  for (size_t i = 0; i < unready.size() && i < 5; ++i) {
    names += (i ? ", '" : "'") + params_[unready[i]].name + "' (index " + std::to_string(unready[i]) + ")";
  }
  if (unready.size() > 5) names += " and " + std::to_string(unready.size() - 5) + " more";
  return detail::str(
      "finish_backward: rank ", group_->rank(), ": parameter ", names,
      " not marked ready in this iteration although others were; mark every parameter "
      "that received a gradient, or set find_unused_parameters to reduce unused ones as zeros");
}

void Reducer::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_iteration_) begin_iteration();
  std::vector<size_t> unready;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!ready_[p]) unready.push_back(p);
  }
  const bool fairseq_mode = user_marks_ == 0;
  // Unready parameters are still reduced (as zeros) when that is an error: the collectives
  // stay aligned with the other ranks, so they fail on their own terms instead of waiting.
  for (size_t p : unready) mark_locked(p, fairseq_mode ? Fill::kCopy : Fill::kZero);
  std::string usage_error;
  // static_graph learns the unused set in iteration 1 (c10d's static_graph needs no
  // find_unused_parameters); from then on those are premarked and anything else is an error.
  const bool learning_unused = options_.static_graph && !unused_known_;
  if (!fairseq_mode && !unready.empty() && !options_.find_unused_parameters && !learning_unused) {
    usage_error = unready_message(unready);
  }

  std::vector<comm::WorkPtr> works;
  for (auto& b : buckets_) works.push_back(b.done);  // every parameter is ready: all launched
  in_iteration_ = false;
  const int64_t wait_from = timeline_ ? Timeline::now_us() : 0;
  comm::wait_all(works);
  if (timeline_) timeline_->span("wait for buckets", Timeline::kStepTrack, wait_from, Timeline::now_us());
  if (options_.static_graph && !unused_known_ && !fairseq_mode) {
    known_unused_ = unready;
    unused_known_ = true;
  }
  rebuild_once();
  if (!usage_error.empty()) DDP_THROW(InvalidArgument, usage_error);
}

void Reducer::shadow() {
  std::lock_guard<std::mutex> lock(mu_);
  DDP_CHECK(!in_iteration_, "join: this rank is in the middle of an iteration");
  std::vector<DeviceMemory> zeros;
  std::vector<comm::WorkPtr> works;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    zeros.emplace_back(buckets_[b].flat.bytes(), buckets_[b].flat.device);  // plain: peers fall back
    GradBucket gb = grad_bucket(b, zeros.back().view(buckets_[b].flat.count, buckets_[b].flat.dtype));
    works.push_back(run_hook(gb));
  }
  comm::wait_all(works);
  rebuild_once();
}

void Reducer::rebuild_once() {
  if (rebuilt_) return;
  rebuilt_ = true;
  const size_t n = params_.size();
  // [number of recorded parameters, then rank 0's ready order]; 0 means "keep the buckets".
  std::vector<int64_t> msg(n + 1, 0);
  if (group_->rank() == 0) {
    msg[0] = static_cast<int64_t>(ready_order_.size());
    std::copy(ready_order_.begin(), ready_order_.end(), msg.begin() + 1);
  }
  ready_order_.clear();
  ready_order_.shrink_to_fit();
  broadcast_host(*group_, comm::view(msg.data(), msg.size()), 0);
  if (msg[0] <= 0) return;
  std::vector<size_t> order;
  std::vector<char> seen(n, 0);
  for (int64_t i = 1; i <= msg[0] && i <= static_cast<int64_t>(n); ++i) {
    size_t p = static_cast<size_t>(msg[i]);
    DDP_CHECK(p < n && !seen[p], "bucket rebuild: bad parameter index ", msg[i], " from rank 0");
    seen[p] = 1;
    order.push_back(p);
  }
  for (size_t p : reverse_order(n)) {
    if (!seen[p]) order.push_back(p);
  }
  std::vector<ParamSize> sizes;
  for (const auto& p : params_) sizes.push_back({p.data.count, {p.data.dtype, p.data.device}});
  BucketAssignment next = assign_buckets(sizes, order, options_.first_cap_bytes, options_.cap_bytes);
  BucketAssignment now;
  for (const auto& b : buckets_) now.push_back(b.params);
  if (next != now) build(next);
}

}  // namespace ddp
