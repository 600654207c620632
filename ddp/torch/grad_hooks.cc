#include "ddp/torch/grad_hooks.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "common/error.h"

namespace ddp::torch {
namespace {

class ReadyHook : public ::torch::autograd::FunctionPostHook {
 public:
  ReadyHook(size_t index, std::function<void(size_t)> on_ready)
      : index_(index), on_ready_(std::move(on_ready)) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    on_ready_(index_);
    return outputs;
  }

 private:
  size_t index_;
  std::function<void(size_t)> on_ready_;
};

}  // namespace

GradHooks::GradHooks(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                     std::function<void(size_t)> on_ready) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad() || !params[i].is_leaf()) {
      DDP_THROW(InvalidArgument, "parameter '", names[i], "' must be a leaf tensor that requires grad");
    }
    auto acc = ::torch::autograd::impl::grad_accumulator(params[i]);
    DDP_CHECK(acc != nullptr, "parameter '", names[i], "' has no gradient accumulator");
    keys_.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(i, on_ready)));
    accumulators_.push_back(std::move(acc));
  }
}

GradHooks::~GradHooks() noexcept {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(keys_[i]);
}

void queue_after_backward(std::function<void()> fn) {
  ::torch::autograd::Engine::get_default_engine().queue_callback(std::move(fn));
}

}  // namespace ddp::torch
