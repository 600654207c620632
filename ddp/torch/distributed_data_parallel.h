#pragma once
// DistributedDataParallel for LibTorch: what torch.nn.parallel.DistributedDataParallel is to
// PyTorch, for any torch::nn::Module, on any of our backends. Wrap the model (collective:
// DistributedDataParallel ddp_model(model, group)) and train through ddp_model as usual:
// loss.backward() returns with the gradients averaged over ranks.
// The wrapped module is this module's submodule "module" (state_dict keys "module.…", as in
// PyTorch). forward() runs ModuleEngine::pre_forward(), checks that tensor arguments are on
// the parameters' device, then calls the wrapped module's forward with the same arguments.
// ddp_model->no_sync() is a scope without gradient averaging (local accumulation);
// ddp::Join join(ddp_model->engine()) handles uneven inputs; register_comm_hook() takes the
// engine's hooks (fp16_compress_hook(), bf16_compress_hook(), or your own).
// Contracts, options and errors: ddp/torch/module_engine.h and ddp/engine.h.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <type_traits>
#include <utility>

#include "ddp/torch/module_engine.h"

namespace ddp::torch {

namespace detail {
template <typename T>
void check_inputs(const ModuleEngine& engine, size_t position, const T& arg) {
  if constexpr (std::is_convertible_v<const T&, const at::Tensor&>) engine.check_input(arg, position);
}
}  // namespace detail

// M: a module holder (what TORCH_MODULE defines) or a std::shared_ptr to a module.
template <typename M>
class DistributedDataParallelImpl : public ::torch::nn::Module {
 public:
  DistributedDataParallelImpl(M module, comm::ProcessGroupPtr group, EngineOptions options = {})
      : module_(register_module("module", std::move(module))),
        engine_(std::make_unique<ModuleEngine>(as_module(module_), std::move(group), options)) {}

  template <typename... Args>
  auto forward(Args&&... args) -> decltype(std::declval<M&>()->forward(std::forward<Args>(args)...)) {
    engine_->pre_forward();
    size_t position = 0;
    (detail::check_inputs(*engine_, position++, args), ...);
    auto out = module_->forward(std::forward<Args>(args)...);
    engine_->engine().forward_done();  // the timeline's end of forward (ddp/timeline.h)
    return out;
  }

  M& module() { return module_; }
  Engine& engine() { return engine_->engine(); }
  [[nodiscard]] Engine::NoSync no_sync() { return engine_->engine().no_sync(); }
  void register_comm_hook(CommHook hook) { engine_->engine().register_comm_hook(std::move(hook)); }
  const comm::ProcessGroupPtr& group() const { return engine_->group(); }

 private:
  template <typename H>
  static std::shared_ptr<::torch::nn::Module> as_module(const H& holder) {
    if constexpr (std::is_convertible_v<const H&, std::shared_ptr<::torch::nn::Module>>) {
      return holder;
    } else {
      return holder.ptr();
    }
  }

  M module_;
  std::unique_ptr<ModuleEngine> engine_;
};

template <typename M>
class DistributedDataParallel : public ::torch::nn::ModuleHolder<DistributedDataParallelImpl<M>> {
 public:
  using Impl = DistributedDataParallelImpl<M>;
  DistributedDataParallel(M module, comm::ProcessGroupPtr group, EngineOptions options = {})
      : ::torch::nn::ModuleHolder<Impl>(
            std::make_shared<Impl>(std::move(module), std::move(group), options)) {}

  // ModuleHolder's own operator() only sees a non-template forward(); ours forwards any
  // argument list the wrapped module's forward() takes.
  template <typename... Args>
  auto operator()(Args&&... args) -> decltype(std::declval<Impl&>().forward(std::forward<Args>(args)...)) {
    return this->get()->forward(std::forward<Args>(args)...);
  }
};

template <typename M>
DistributedDataParallel(M, comm::ProcessGroupPtr) -> DistributedDataParallel<M>;
template <typename M>
DistributedDataParallel(M, comm::ProcessGroupPtr, EngineOptions) -> DistributedDataParallel<M>;

}  // namespace ddp::torch
