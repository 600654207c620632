#include "ddp/engine.h"

#include <set>
#include <utility>

#include "common/error.h"
#include "ddp/coalesce.h"
#include "ddp/device_ops.h"
#include "ddp/reducer.h"
#include "ddp/verify.h"

namespace ddp {
namespace {

size_t shape_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    DDP_CHECK(d >= 0, "negative dimension in shape ", shape_string(shape));
    n *= static_cast<size_t>(d);
  }
  return n;
}

void check_view(const char* op, const std::string& name, const comm::Buffer& b, std::vector<int64_t>& shape) {
  if (name.empty()) DDP_THROW(InvalidArgument, op, ": empty name");
  if (shape.empty()) shape = {static_cast<int64_t>(b.count)};
  if (shape_count(shape) != b.count) {
    DDP_THROW(InvalidArgument, op, ": '", name, "' has shape ", shape_string(shape), " but ", b.count,
              " elements");
  }
  if (b.count > 0 && !b.data) DDP_THROW(InvalidArgument, op, ": '", name, "' has no data");
  if (b.device.is_cuda() && !cuda_supported()) {
    DDP_THROW(InvalidArgument, op, ": '", name, "' is on ", b.device.str(),
              " but libddp was built without CUDA");
  }
}

size_t mb_to_bytes(double mb) { return static_cast<size_t>(mb * 1024.0 * 1024.0); }

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Engine::Engine(comm::ProcessGroupPtr group, EngineOptions options)
    : group_(std::move(group)), options_(std::move(options)) {
  DDP_CHECK(group_ != nullptr, "Engine needs a process group");
  DDP_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, "bucket caps must be positive");
  DDP_CHECK(options_.gradient_predivide_factor > 0, "gradient_predivide_factor must be positive");
}

Engine::~Engine() = default;

void Engine::check_finalized(const char* op) const {
  if (!reducer_) DDP_THROW(InvalidArgument, op, ": call finalize() first");
}

size_t Engine::register_param(ParamSpec spec) {
  if (reducer_) DDP_THROW(InvalidArgument, "register_param('", spec.name, "'): already finalized");
  check_view("register_param", spec.name, spec.data, spec.shape);
  const bool needs_grad = !options_.gradient_as_bucket_view;
  if (spec.grad.data || needs_grad) {
    if (spec.grad.count != spec.data.count || spec.grad.dtype != spec.data.dtype ||
        spec.grad.device != spec.data.device || (spec.grad.count > 0 && !spec.grad.data)) {
      DDP_THROW(InvalidArgument, "register_param: gradient of '", spec.name, "' must match its data (",
                spec.data.count, " x ", comm::to_string(spec.data.dtype), " on ", spec.data.device.str(),
                "), got ", spec.grad.count, " x ", comm::to_string(spec.grad.dtype), " on ",
                spec.grad.device.str(), spec.grad.data ? "" : " (null)");
    }
  }
  for (const auto& p : params_) {
    if (p.name == spec.name) DDP_THROW(InvalidArgument, "register_param: '", spec.name, "' registered twice");
  }
  params_.push_back(std::move(spec));
  return params_.size() - 1;
}

size_t Engine::register_buffer(BufferSpec spec) {
  if (reducer_) DDP_THROW(InvalidArgument, "register_buffer('", spec.name, "'): already finalized");
  check_view("register_buffer", spec.name, spec.data, spec.shape);
  for (const auto& b : buffers_) {
    if (b.name == spec.name)
      DDP_THROW(InvalidArgument, "register_buffer: '", spec.name, "' registered twice");
  }
  buffers_.push_back(std::move(spec));
  return buffers_.size() - 1;
}

void Engine::register_comm_hook(CommHook hook) {
  hook_ = std::move(hook);
  if (reducer_) reducer_->set_hook(hook_);
}

std::vector<std::string> Engine::describe() const {
  std::vector<std::string> lines;
  // Options that change which collectives run, or what they compute.
  lines.push_back(detail::str("options broadcast_at_construction=", options_.broadcast_at_construction,
                              " broadcast_buffers=", options_.broadcast_buffers, " first_bucket_cap_mb=",
                              options_.first_bucket_cap_mb, " bucket_cap_mb=", options_.bucket_cap_mb,
                              " rebuild_buckets=", options_.rebuild_buckets,
                              " gradient_predivide_factor=", options_.gradient_predivide_factor));
  // Device types only: each rank drives its own GPU.
  for (const auto& p : params_) {
    lines.push_back(detail::str("parameter '", p.name, "' ", shape_string(p.shape), " ",
                                comm::to_string(p.data.dtype), " ", comm::to_string(p.data.device.type)));
  }
  for (const auto& b : buffers_) {
    lines.push_back(detail::str("buffer '", b.name, "' ", shape_string(b.shape), " ",
                                comm::to_string(b.data.dtype), " ", comm::to_string(b.data.device.type)));
  }
  return lines;
}

void Engine::finalize() {
  if (reducer_) DDP_THROW(InvalidArgument, "finalize: called twice");
  verify_same_across_ranks(*group_, describe(), "Engine::finalize");
  if (options_.broadcast_at_construction) sync_model(0);
  Reducer::Options ro;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.static_graph = options_.static_graph;
  ro.rebuild_buckets = options_.rebuild_buckets;
  ro.first_cap_bytes = mb_to_bytes(options_.first_bucket_cap_mb);
  ro.cap_bytes = mb_to_bytes(options_.bucket_cap_mb);
  ro.predivide = options_.gradient_predivide_factor;
  reducer_ = std::make_unique<Reducer>(group_, params_, ro);
  if (hook_) reducer_->set_hook(hook_);
  timeline_ = Timeline::open(options_.timeline, group_->rank());
  reducer_->set_timeline(timeline_.get());
}

// Per step on the "step" track: the optimizer step of the previous one (what ran between its
// finish_backward and this pre_forward), then this step's number.
void Engine::timeline_begin_step() {
  const int64_t now = Timeline::now_us();
  if (step_end_at_ != 0) timeline_->span("optimizer step", Timeline::kStepTrack, step_end_at_, now);
  timeline_->set_step(++step_);
  forward_at_ = now;
  forward_end_at_ = 0;
}

// Forward and backward, as far as the engine knows them: forward from pre_forward to
// forward_done() (else to the first gradient), backward from there to finish_backward.
void Engine::timeline_compute_spans(int64_t finish_called_at) {
  const int64_t first_grad = reducer_->first_ready_us();
  const int64_t forward_end = forward_end_at_ != 0 ? forward_end_at_ : first_grad;
  if (forward_at_ != 0 && forward_end != 0) {
    timeline_->span(forward_end_at_ != 0 ? "forward" : "forward (to the first gradient)",
                    Timeline::kStepTrack, forward_at_, forward_end);
  }
  const int64_t backward_begin = forward_end != 0 ? forward_end : forward_at_;
  if (backward_begin != 0) {
    timeline_->span(forward_end != 0 ? "backward" : "forward and backward", Timeline::kStepTrack,
                    backward_begin, finish_called_at);
  }
  forward_at_ = forward_end_at_ = 0;
}

void Engine::sync_model(int source) {
  std::vector<comm::Buffer> all;
  for (const auto& p : params_) all.push_back(p.data);
  for (const auto& b : buffers_) all.push_back(b.data);
  broadcast_coalesced(*group_, all, source);
}

void Engine::pre_forward() {
  check_finalized("pre_forward");
  if (timeline_) timeline_begin_step();
  int source = 0;
  if (join_enabled_) {
    JoinRound round = join_round(*group_, /*active=*/true, /*sync=*/!no_sync_);
    reducer_->set_divisor(join_options_.divide_by_initial_world_size ? group_->size() : round.active);
    source = round.authority;
  }
  if (options_.broadcast_buffers && !buffers_.empty()) {
    std::vector<comm::Buffer> bufs;
    for (const auto& b : buffers_) bufs.push_back(b.data);
    broadcast_coalesced(*group_, bufs, source);
  }
  forwarded_ = true;
}

void Engine::mark_ready(size_t param) {
  check_finalized("mark_ready");
  if (no_sync_) return;
  if (join_enabled_ && !forwarded_)
    DDP_THROW(InvalidArgument, "mark_ready: under a Join, call pre_forward() first");
  reducer_->mark_ready(param);
}

void Engine::finish_backward() {
  check_finalized("finish_backward");
  if (join_enabled_ && !forwarded_) {
    DDP_THROW(InvalidArgument, "finish_backward: under a Join, call pre_forward() in every iteration");
  }
  forwarded_ = false;
  if (no_sync_) return;
  if (!timeline_) {
    reducer_->finish();
    return;
  }
  timeline_compute_spans(Timeline::now_us());
  reducer_->finish();  // records the wait for the buckets
  step_end_at_ = Timeline::now_us();
  timeline_->flush();
}

void Engine::enable_join(JoinOptions options) {
  check_finalized("Join");
  DDP_CHECK(!join_enabled_, "Join: one Join at a time");
  join_enabled_ = true;
  join_options_ = options;
  forwarded_ = false;
}

void Engine::disable_join() noexcept {
  join_enabled_ = false;
  if (reducer_) {
    try {
      reducer_->set_divisor(group_->size());
    } catch (...) {
    }
  }
}

void Engine::shadow_iteration(const JoinRound& round) {
  if (options_.broadcast_buffers && !buffers_.empty()) {
    std::vector<comm::Buffer> bufs;
    for (const auto& b : buffers_) bufs.push_back(b.data);
    broadcast_coalesced(*group_, bufs, round.authority);
  }
  if (!round.sync) return;
  reducer_->set_divisor(join_options_.divide_by_initial_world_size ? group_->size() : round.active);
  reducer_->shadow();
}

comm::Buffer Engine::grad(size_t param) const {
  if (reducer_) return reducer_->grad(param);
  DDP_CHECK_LT(param, params_.size(), "grad: no such parameter");
  return params_[param].grad;
}

comm::Buffer Engine::param_data(size_t param) const {
  DDP_CHECK_LT(param, params_.size(), "param_data: no such parameter");
  return params_[param].data;
}

BucketAssignment Engine::buckets() const {
  check_finalized("buckets");
  return reducer_->assignment();
}

bool Engine::buckets_rebuilt() const {
  check_finalized("buckets_rebuilt");
  return reducer_->rebuilt();
}

}  // namespace ddp
