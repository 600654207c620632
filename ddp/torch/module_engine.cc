#include "ddp/torch/module_engine.h"

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>

#include "common/error.h"
#include "ddp/coalesce.h"
#include "ddp/torch/tensor_buffer.h"
#include "ddp/verify.h"

namespace ddp::torch {
namespace {

std::vector<int64_t> shape_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

}  // namespace

ModuleEngine::ModuleEngine(std::shared_ptr<::torch::nn::Module> module, comm::ProcessGroupPtr group,
                           EngineOptions options)
    : module_(std::move(module)), engine_(group, options) {
  DDP_CHECK(module_ != nullptr, "DistributedDataParallel needs a module");
  register_state(*group);
  engine_.finalize();
  broadcast_frozen();
  point_homes();
  std::vector<at::Tensor> tensors;
  std::vector<std::string> names;
  for (const auto& p : params_) {
    tensors.push_back(p.tensor);
    names.push_back(p.name);
  }
  hooks_ = std::make_unique<GradHooks>(tensors, names, [this](size_t i) { on_grad_ready(i); });
}

ModuleEngine::~ModuleEngine() noexcept = default;

void ModuleEngine::register_state(const comm::ProcessGroup& group) {
  const std::string where = " (rank " + std::to_string(group.rank()) + ")";
  bool first = true;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = item.value();
    const std::string what = "parameter '" + item.key() + "'" + where;
    if (first) device_ = t.device();
    first = false;
    if (t.device() != device_) {
      DDP_THROW(InvalidArgument, what, " is on ", t.device().str(), " but the first parameter is on ",
                device_.str(), ": one device per process");
    }
    comm::Buffer data = buffer_of(t, what);
    const comm::Device wanted = group.buffer_device();
    if (wanted.is_cuda() && !data.device.is_cuda()) {
      DDP_THROW(InvalidArgument, what, " is on ", t.device().str(), " but the ", group.backend_name(),
                " group's buffers live on ", wanted.str(), ": move the model there before wrapping it");
    }
    if (!t.requires_grad()) {
      frozen_.emplace_back(item.key(), t);
      continue;
    }
    Param p{item.key(), t, {}, 0, data.data};
    ParamSpec spec{p.name, data, {}, shape_of(t)};
    if (!engine_.options().gradient_as_bucket_view) {
      p.home = at::zeros_like(t);
      spec.grad = buffer_of(p.home, what + " gradient");
    }
    p.index = engine_.register_param(std::move(spec));
    params_.push_back(std::move(p));
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    const std::string what = "buffer '" + item.key() + "'" + where;
    comm::Buffer data = buffer_of(item.value(), what);
    engine_.register_buffer(BufferSpec{item.key(), data, shape_of(item.value())});
    buffers_.push_back({item.key(), item.value(), data.data});
  }
}

void ModuleEngine::broadcast_frozen() {
  // Part of the model, never reduced: rank 0's values once. The Engine's finalize() checked
  // the registered part; the frozen part is checked the same way before the broadcast, so
  // ranks that differ get an error naming the parameter instead of mismatched collectives.
  if (!engine_.options().broadcast_at_construction) return;
  std::vector<std::string> lines;
  std::vector<comm::Buffer> bufs;
  for (const auto& [name, t] : frozen_) {
    bufs.push_back(buffer_of(t, "frozen parameter '" + name + "'"));
    lines.push_back(detail::str("frozen parameter '", name, "' ", shape_string(shape_of(t)), " ",
                                comm::to_string(bufs.back().dtype)));
  }
  verify_same_across_ranks(*engine_.group(), lines, "DistributedDataParallel (frozen parameters)");
  if (!bufs.empty()) broadcast_coalesced(*engine_.group(), bufs, 0);
}

// With bucket views the engine owns the gradients; their views move once (the rebuild after
// the first iteration): re-point the homes, and .grad where it pointed at the old home.
void ModuleEngine::point_homes() {
  if (!engine_.options().gradient_as_bucket_view) return;
  for (auto& p : params_) {
    comm::Buffer view = engine_.grad(p.index);
    if (p.home.defined() && p.home.data_ptr() == view.data) continue;
    at::Tensor home = tensor_of(view, p.tensor.sizes());
    at::Tensor& grad = p.tensor.mutable_grad();
    if (grad.defined() && grad.is_same(p.home)) grad = home;
    p.home = home;
  }
}

void ModuleEngine::check_state() const {
  // Runs every forward: compare first, build a message only for the one that moved.
  auto moved = [&](const char* kind, const std::string& name, const at::Tensor& t, const void* registered) {
    if (t.data_ptr() == registered) return;
    DDP_THROW(
        InvalidArgument, kind, " '", name, "' (rank ", rank(),
        ") no longer lives where DistributedDataParallel registered it (its storage was replaced, e.g. by "
        "torch::load or set_data after wrapping): load state and move the model before wrapping it");
  };
  for (const auto& p : params_) moved("parameter", p.name, p.tensor, p.data);
  for (const auto& b : buffers_) moved("buffer", b.name, b.tensor, b.data);
  for (const auto& p : params_) {
    if (!p.tensor.requires_grad()) {
      DDP_THROW(InvalidArgument, "parameter '", p.name, "' (rank ", rank(),
                ") no longer requires grad: DistributedDataParallel registered it at construction; "
                "set requires_grad before wrapping the model");
    }
  }
  for (const auto& [name, t] : frozen_) {
    if (t.requires_grad()) {
      DDP_THROW(
          InvalidArgument, "parameter '", name, "' (rank ", rank(),
          ") requires grad now but did not at construction: set requires_grad before wrapping the model");
    }
  }
}

void ModuleEngine::pre_forward() {
  check_state();
  const bool training =
      ::torch::autograd::GradMode::is_enabled() && module_->is_training() && !engine_.in_no_sync();
  if (training) {
    std::lock_guard<std::mutex> lock(mu_);
    if (awaiting_backward_ && !engine_.options().find_unused_parameters) {
      DDP_THROW(
          InvalidArgument, "forward (rank ", rank(),
          "): the previous training forward has not been followed by backward(); run backward() "
          "after each forward, wrap evaluation in torch::NoGradGuard or model->eval(), or construct with "
          "find_unused_parameters = true");
    }
    awaiting_backward_ = true;
  }
  engine_.pre_forward();
}

void ModuleEngine::check_input(const at::Tensor& input, size_t position) const {
  if (input.defined() && input.device() != device_) {
    DDP_THROW(InvalidArgument, "forward (rank ", rank(), "): argument ", position, " is on ",
              input.device().str(), " but the model's parameters are on ", device_.str());
  }
}

void ModuleEngine::on_grad_ready(size_t param) {
  Param& p = params_[param];
  at::Tensor& grad = p.tensor.mutable_grad();
  if (!grad.is_same(p.home)) {
    // Autograd made a fresh gradient (the first backward, or after .grad was reset): it
    // moves into its home, where the engine reads it and the optimizer finds it.
    p.home.copy_(grad);
    grad = p.home;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!callback_queued_) {
      callback_queued_ = true;
      queue_after_backward([this] { after_backward(); });
    }
  }
  engine_.mark_ready(p.index);
}

void ModuleEngine::after_backward() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    callback_queued_ = false;
    awaiting_backward_ = false;
  }
  engine_.finish_backward();
  point_homes();
  if (engine_.in_no_sync()) return;
  // Parameters this rank did not use got the average (or zeros) in their homes.
  for (auto& p : params_) {
    at::Tensor& grad = p.tensor.mutable_grad();
    if (!grad.is_same(p.home)) grad = p.home;
  }
}

}  // namespace ddp::torch
