#include "ddp/torch/sync_batch_norm.h"

#include <ATen/Functions.h>
#include <ATen/core/ivalue.h>
#include <c10/util/irange.h>
#include <torch/autograd.h>
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/torch/tensor_buffer.h"

namespace ddp::torch {

namespace {

using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

// The group, carried from forward to backward in the autograd context.
struct GroupCapsule : ::torch::CustomClassHolder {
  explicit GroupCapsule(comm::ProcessGroupPtr g) : group(std::move(g)) {}
  comm::ProcessGroupPtr group;
};

// Running statistics: not inputs of the autograd function (they are updated in place, without
// gradients).
struct RunningStats {
  at::Tensor mean, var;
  double momentum = 0.1;
};

std::vector<int64_t> reduce_dims(int64_t dim) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < dim; ++d) dims.push_back(d);
  return dims;
}

// (C) -> (1, C, 1, ...) to broadcast against the input.
at::Tensor per_channel(const at::Tensor& t, int64_t dim) {
  std::vector<int64_t> shape(static_cast<size_t>(dim), 1);
  shape[1] = t.numel();
  return t.view(shape);
}

// Sums `t` (float64, contiguous) over the group, in place, on the group's device.
void all_reduce_sum(comm::ProcessGroup& group, at::Tensor& t) {
  const at::Device device = torch_device_of(group.buffer_device());
  at::Tensor staged = t.device() == device ? t : t.to(device);
  group.all_reduce(buffer_of(staged, "SyncBatchNorm statistics"))->wait();
  if (!staged.is_same(t)) t.copy_(staged);
}

class SyncBatchNormFunction : public ::torch::autograd::Function<SyncBatchNormFunction> {
 public:
  // weight and bias are optional: an undefined tensor cannot be an autograd input.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& in,
                            const c10::optional<at::Tensor>& weight_in,
                            const c10::optional<at::Tensor>& bias_in, const RunningStats& running, double eps,
                            const comm::ProcessGroupPtr& group) {
    const at::Tensor x = in.contiguous();
    const at::Tensor weight = weight_in.value_or(at::Tensor()), bias = bias_in.value_or(at::Tensor());
    const int64_t channels = x.size(1);
    const auto dims = reduce_dims(x.dim());
    const double rows = channels > 0 ? static_cast<double>(x.numel() / channels) : 0.0;
    at::Tensor stats =
        at::cat({at::sum(x, dims, false, at::kDouble), at::sum(x.square(), dims, false, at::kDouble),
                 at::full({1}, rows, x.options().dtype(at::kDouble))});
    all_reduce_sum(*group, stats);
    const double count = stats[2 * channels].item<double>();
    if (count <= 1) {
      DDP_THROW(InvalidArgument,
                "SyncBatchNorm: expected more than 1 value per channel over the group when training, got ",
                count);
    }
    const at::Tensor mean = stats.narrow(0, 0, channels) / count;
    const at::Tensor var = (stats.narrow(0, channels, channels) / count - mean.square()).clamp_min(0);
    if (running.mean.defined()) {
      ::torch::NoGradGuard no_grad;
      running.mean.mul_(1 - running.momentum).add_(mean.to(running.mean.options()), running.momentum);
      running.var.mul_(1 - running.momentum)
          .add_((var * (count / (count - 1))).to(running.var.options()), running.momentum);
    }
    const at::Tensor mean_x = mean.to(x.scalar_type());
    const at::Tensor invstd = (var + eps).rsqrt().to(x.scalar_type());
    at::Tensor out = (x - per_channel(mean_x, x.dim())) * per_channel(invstd, x.dim());
    if (weight.defined()) out = out * per_channel(weight, x.dim());
    if (bias.defined()) out = out + per_channel(bias, x.dim());
    ctx->save_for_backward({x, weight, bias, mean_x, invstd});
    ctx->saved_data["count"] = count;
    // Gradient edges exist for the defined tensors only: input, then weight and bias if given.
    ctx->saved_data["weight_edge"] = static_cast<int64_t>(weight.defined() ? 1 : -1);
    ctx->saved_data["bias_edge"] = static_cast<int64_t>(bias.defined() ? (weight.defined() ? 2 : 1) : -1);
    ctx->saved_data["group"] = at::IValue::make_capsule(c10::make_intrusive<GroupCapsule>(group));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &bias = saved[2], &mean = saved[3],
                     &invstd = saved[4];
    const double count = ctx->saved_data["count"].toDouble();
    auto group =
        c10::static_intrusive_pointer_cast<GroupCapsule>(ctx->saved_data["group"].toCapsule())->group;
    const at::Tensor dy = grads[0].contiguous();
    const int64_t dim = x.dim(), channels = x.size(1);
    const auto dims = reduce_dims(dim);
    const at::Tensor xmu = x - per_channel(mean, dim);
    at::Tensor sums =
        at::cat({at::sum(dy, dims, false, at::kDouble), at::sum(dy * xmu, dims, false, at::kDouble)});
    at::Tensor grad_input, grad_weight, grad_bias;
    const int64_t weight_edge = ctx->saved_data["weight_edge"].toInt();
    const int64_t bias_edge = ctx->saved_data["bias_edge"].toInt();
    if (weight_edge >= 0 && ctx->needs_input_grad(static_cast<size_t>(weight_edge)))
      grad_weight = (sums.narrow(0, channels, channels) * invstd).to(weight.scalar_type());
    if (bias_edge >= 0 && ctx->needs_input_grad(static_cast<size_t>(bias_edge)))
      grad_bias = sums.narrow(0, 0, channels).to(bias.scalar_type());
    if (ctx->needs_input_grad(0)) {
      all_reduce_sum(*group, sums);  // after the local weight and bias gradients took theirs
      const at::Tensor mean_dy = (sums.narrow(0, 0, channels) / count).to(x.scalar_type());
      const at::Tensor mean_dy_xmu = (sums.narrow(0, channels, channels) / count).to(x.scalar_type());
      const at::Tensor scale = weight.defined() ? invstd * weight : invstd;
      grad_input = (dy - per_channel(mean_dy, dim) - xmu * per_channel(invstd * invstd * mean_dy_xmu, dim)) *
                   per_channel(scale, dim);
    }
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

template <size_t D, typename BatchNorm>
std::shared_ptr<::torch::nn::Module> sync_copy(const BatchNorm& bn, const comm::ProcessGroupPtr& group) {
  auto sync = std::make_shared<SyncBatchNormImpl<D>>(bn.options, group);
  auto copy = [](at::Tensor& dst, const at::Tensor& src) {
    if (!src.defined()) return;
    const bool grad = src.requires_grad();
    dst.set_data(src.detach().clone());
    dst.requires_grad_(grad);
  };
  copy(sync->weight, bn.weight);
  copy(sync->bias, bn.bias);
  copy(sync->running_mean, bn.running_mean);
  copy(sync->running_var, bn.running_var);
  copy(sync->num_batches_tracked, bn.num_batches_tracked);
  sync->train(bn.is_training());
  return sync;
}

std::shared_ptr<::torch::nn::Module> sync_of(const ::torch::nn::Module& m,
                                             const comm::ProcessGroupPtr& group) {
  if (const auto* bn = dynamic_cast<const ::torch::nn::BatchNorm1dImpl*>(&m)) return sync_copy<1>(*bn, group);
  if (const auto* bn = dynamic_cast<const ::torch::nn::BatchNorm2dImpl*>(&m)) return sync_copy<2>(*bn, group);
  if (const auto* bn = dynamic_cast<const ::torch::nn::BatchNorm3dImpl*>(&m)) return sync_copy<3>(*bn, group);
  return nullptr;
}

// Points a container's own list entry at `now` where it held `old`.
void replace_in_container(::torch::nn::Module& parent, const std::string& name,
                          const std::shared_ptr<::torch::nn::Module>& old,
                          const std::shared_ptr<::torch::nn::Module>& now) {
  if (auto* seq = dynamic_cast<::torch::nn::SequentialImpl*>(&parent)) {
    for (auto& any : *seq) {
      if (any.ptr() != old) continue;
      if (auto s1 = std::dynamic_pointer_cast<SyncBatchNorm1dImpl>(now)) any = ::torch::nn::AnyModule(s1);
      if (auto s2 = std::dynamic_pointer_cast<SyncBatchNorm2dImpl>(now)) any = ::torch::nn::AnyModule(s2);
      if (auto s3 = std::dynamic_pointer_cast<SyncBatchNorm3dImpl>(now)) any = ::torch::nn::AnyModule(s3);
    }
  } else if (auto* list = dynamic_cast<::torch::nn::ModuleListImpl*>(&parent)) {
    for (auto& entry : *list) {
      if (entry == old) entry = now;
    }
  } else if (auto* dict = dynamic_cast<::torch::nn::ModuleDictImpl*>(&parent)) {
    if (dict->contains(name) && (*dict)[name] == old) dict->update({{name, now}});
  }
}

void convert_below(::torch::nn::Module& module, const comm::ProcessGroupPtr& group, const std::string& prefix,
                   std::vector<std::pair<std::string, std::shared_ptr<::torch::nn::Module>>>& replaced) {
  for (const auto& name : module.named_children().keys()) {
    std::shared_ptr<::torch::nn::Module> child = module.named_children()[name];
    auto sync = sync_of(*child, group);
    if (!sync) {
      convert_below(*child, group, prefix + name + ".", replaced);
      continue;
    }
    module.replace_module(name, sync);
    replace_in_container(module, name, child, sync);
    replaced.emplace_back(prefix + name, std::move(child));
  }
}

}  // namespace

at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                           double eps, const comm::ProcessGroupPtr& group) {
  if (input.dim() < 2)
    DDP_THROW(InvalidArgument, "SyncBatchNorm: expected an input of at least 2 dimensions, got ",
              input.dim());
  auto given = [](const at::Tensor& t) { return t.defined() ? c10::optional<at::Tensor>(t) : c10::nullopt; };
  return SyncBatchNormFunction::apply(input, given(weight), given(bias),
                                      RunningStats{running_mean, running_var, momentum}, eps, group);
}

template <size_t D>
SyncBatchNormImpl<D>::SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options,
                                        comm::ProcessGroupPtr group)
    : ::torch::nn::NormImplBase<D, SyncBatchNormImpl<D>, ::torch::nn::BatchNormOptions>(options),
      group_(std::move(group)) {
  if (!group_) DDP_THROW(InvalidArgument, "SyncBatchNorm: no process group");
}

template <size_t D>
at::Tensor SyncBatchNormImpl<D>::forward(const at::Tensor& input) {
  _check_input_dim(input);
  const auto& opts = this->options;
  double factor = opts.momentum().value_or(0.0);
  if (this->is_training() && opts.track_running_stats() && this->num_batches_tracked.defined()) {
    this->num_batches_tracked += 1;
    if (!opts.momentum()) factor = 1.0 / this->num_batches_tracked.template item<double>();
  }
  const bool batch_stats = this->is_training() || !opts.track_running_stats();
  if (!(batch_stats && this->is_training() && group_->size() > 1)) {
    return ::torch::nn::functional::detail::batch_norm(input, this->running_mean, this->running_var,
                                                       this->weight, this->bias, batch_stats, factor,
                                                       opts.eps());
  }
  return sync_batch_norm(input, this->weight, this->bias, this->running_mean, this->running_var, factor,
                         opts.eps(), group_);
}

template <size_t D>
void SyncBatchNormImpl<D>::_check_input_dim(const at::Tensor& input) {
  const int64_t dim = input.dim();
  const bool ok = D == 1 ? (dim == 2 || dim == 3) : dim == static_cast<int64_t>(D) + 2;
  if (!ok) {
    DDP_THROW(InvalidArgument, "SyncBatchNorm", D, "d: expected ",
              D == 1 ? "2D or 3D" : std::to_string(D + 2) + "D", " input (got ", dim, "D input)");
  }
}

template <size_t D>
void SyncBatchNormImpl<D>::pretty_print(std::ostream& stream) const {
  const auto& o = this->options;
  stream << std::boolalpha << "ddp::torch::SyncBatchNorm" << D << "d(" << o.num_features()
         << ", eps=" << o.eps() << ", momentum=";
  if (o.momentum()) {
    stream << *o.momentum();
  } else {
    stream << "None";
  }
  stream << ", affine=" << o.affine() << ", track_running_stats=" << o.track_running_stats()
         << ", group size=" << group_->size() << ")";
}

template class SyncBatchNormImpl<1>;
template class SyncBatchNormImpl<2>;
template class SyncBatchNormImpl<3>;

size_t convert_sync_batchnorm(::torch::nn::Module& module, const comm::ProcessGroupPtr& group) {
  if (!group) DDP_THROW(InvalidArgument, "convert_sync_batchnorm: no process group");
  std::vector<std::pair<std::string, std::shared_ptr<::torch::nn::Module>>> replaced;
  convert_below(module, group, "", replaced);
  std::string held;
  for (const auto& [name, old] : replaced) {
    if (old.use_count() > 1) held += (held.empty() ? "" : ", ") + name;
  }
  if (!held.empty()) {
    DDP_THROW(InvalidArgument, "convert_sync_batchnorm: BatchNorm layer(s) ", held,
              " are also held outside the module registry (a member of the parent module?), whose forward "
              "would keep "
              "calling the old layer; declare them as ddp::torch::SyncBatchNorm instead (the registry "
              "already holds "
              "the new ones)");
  }
  return replaced.size();
}

}  // namespace ddp::torch
