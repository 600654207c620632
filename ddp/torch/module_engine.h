#pragma once
// ModuleEngine: the DDP engine bound to a torch::nn::Module — the untemplated half of
// DistributedDataParallel (distributed_data_parallel.h), usable on its own. Construction
// (collective) registers every parameter that requires grad (named_parameters() order) and every
// buffer, checks that every rank has the same model, broadcasts rank 0's parameters (frozen too) and buffers,
// and hooks each parameter (grad_hooks.h): a hook points .grad back at its home if autograd
// replaced it and marks it ready; the first queues finish_backward() on autograd, so backward()
// returns with .grad averaged. Gradients stay put (bucket views: until the one rebuild after the
// first iteration, which re-points .grad), so optimizer.zero_grad() zeroes them in place.
// Misuse is an InvalidArgument naming the parameter and the rank: a model that differs across
// ranks, storage or requires_grad changed after wrapping (load before wrapping), parameters on
// several devices or one the group cannot reach, a second training forward before backward
// without find_unused_parameters. Threading: as the Engine (hooks run on autograd's threads).
#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ddp/engine.h"
#include "ddp/torch/grad_hooks.h"

namespace torch::nn {
class Module;
}

namespace ddp::torch {

class ModuleEngine {
 public:
  ModuleEngine(std::shared_ptr<::torch::nn::Module> module, comm::ProcessGroupPtr group,
               EngineOptions options = {});
  ~ModuleEngine() noexcept;
  ModuleEngine(const ModuleEngine&) = delete;
  ModuleEngine& operator=(const ModuleEngine&) = delete;

  // Forward's first step: the misuse checks, the buffers' broadcast, the join round under a Join.
  void pre_forward();
  // The device the parameters live on; forward inputs must be there too.
  const at::Device& device() const { return device_; }
  // InvalidArgument when `input` (the forward argument at `position`) is on another device.
  void check_input(const at::Tensor& input, size_t position) const;

  Engine& engine() { return engine_; }
  const comm::ProcessGroupPtr& group() const { return engine_.group(); }
  int rank() const { return engine_.group()->rank(); }

 private:
  struct Param {
    std::string name;
    at::Tensor tensor;
    at::Tensor home;             // where .grad lives between iterations
    size_t index = 0;            // the Engine's
    const void* data = nullptr;  // where it was registered
  };
  struct Buffer {
    std::string name;
    at::Tensor tensor;
    const void* data = nullptr;
  };

  void register_state(const comm::ProcessGroup& group);
  void broadcast_frozen();
  void point_homes();
  void on_grad_ready(size_t param);
  void after_backward();
  void check_state() const;

  std::shared_ptr<::torch::nn::Module> module_;
  Engine engine_;
  at::Device device_{at::kCPU};
  std::vector<Param> params_;
  std::vector<std::pair<std::string, at::Tensor>> frozen_;
  std::vector<Buffer> buffers_;
  std::unique_ptr<GradHooks> hooks_;
  std::mutex mu_;
  bool callback_queued_ = false;
  bool awaiting_backward_ = false;
};

}  // namespace ddp::torch
