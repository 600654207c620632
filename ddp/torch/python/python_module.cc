// The Python module ddp_torch: `import ddp_torch` registers the c10d backend "ddp", so
// torch.distributed.init_process_group("ddp") runs PyTorch's collectives on our backends.
//
//   import torch.distributed as dist, ddp_torch
//   dist.init_process_group("ddp")          # env://, tcp://, file://: any init method
//
// Underneath: tcp, unless ddp_torch.set_backend("gloo"|"mpi") or DDP_TORCH_BACKEND says
// otherwise (read when each group is created). Errors reach Python as RuntimeError with our
// message (the op, its sequence number, the peer or missing ranks, the timeout).
// dist.monitored_barrier works on ddp groups too (PyTorch's own refuses all but gloo).
#include <pybind11/chrono.h>
#include <pybind11/eval.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <algorithm>
#include <mutex>

#include "comm/backend.h"
#include "common/error.h"
#include "common/settings.h"
#include "ddp/torch/python/torch_process_group.h"

namespace py = pybind11;

namespace ddp::torch {
namespace {

std::mutex chosen_mu;
std::string chosen_backend;  // set_backend(); empty: DDP_TORCH_BACKEND, else tcp

std::string backend_for_new_group() {
  std::lock_guard<std::mutex> lock(chosen_mu);
  if (!chosen_backend.empty()) return chosen_backend;
  return settings::get_or(settings::kTorchBackend, std::string(settings::kTorchBackend.fallback));
}

void set_backend(const std::string& name) {
  const auto built = comm::available_backends();
  if (std::find(built.begin(), built.end(), name) == built.end()) {
    std::string list;
    for (const auto& b : built) list += (list.empty() ? "" : ", ") + b;
    DDP_THROW(InvalidArgument, "ddp_torch.set_backend: '", name, "' is not a built backend (", list, ")");
  }
  std::lock_guard<std::mutex> lock(chosen_mu);
  chosen_backend = name;
}

// The creator torch.distributed calls (extended API): the group's store, rank, size, timeout,
// name and its members' ranks in the default group (empty for the default group itself).
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(const c10d::DistributedBackendOptions& dist,
                                                            const py::object& /* pg_options, unused */) {
  PluginOptions options;
  options.backend = backend_for_new_group();
  const auto timeout = std::chrono::duration_cast<Millis>(dist.timeout);
  if (timeout.count() > 0) options.timeout = timeout;
  if (!dist.global_ranks_in_group.empty()) {
    options.name = "group/" + dist.group_id;
    options.global_ranks.assign(dist.global_ranks_in_group.begin(), dist.global_ranks_in_group.end());
  }
  py::gil_scoped_release no_gil;  // the rendezvous blocks; a store written in Python takes the GIL
  return c10::make_intrusive<TorchProcessGroup>(dist.store, dist.group_rank, dist.group_size, options);
}

}  // namespace
}  // namespace ddp::torch

PYBIND11_MODULE(ddp_torch, m) {
  m.doc() = "torch.distributed backend 'ddp': PyTorch collectives on ddp-launch's backends";
  auto dist = py::module_::import("torch.distributed");
  m.def("_create_process_group", &ddp::torch::create_process_group, py::arg("backend_options"),
        py::arg("pg_options") = py::none(),
        "The creator registered with torch.distributed.Backend.register_backend('ddp', ..., "
        "extended_api=True).");
  m.def("set_backend", &ddp::torch::set_backend, py::arg("name"),
        "Which of our backends groups created from now on run on: 'tcp' (default), 'gloo', 'mpi'.");
  m.def("backend", &ddp::torch::backend_for_new_group, "The backend the next group will run on.");
  m.def("available_backends", &ddp::comm::available_backends, "Our backends built into this module.");
  m.attr("BACKEND_NAME") = "ddp";
  // A group destroyed with the GIL held (destroy_process_group) lets its threads take it.
  ddp::torch::set_blocking_section([](const std::function<void()>& body) {
    if (PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      body();
    } else {
      body();
    }
  });
  dist.attr("Backend").attr("register_backend")("ddp", m.attr("_create_process_group"),
                                                py::arg("extended_api") = true);
  // PyTorch 1.13's dist.monitored_barrier refuses every backend but gloo in Python, before the
  // group's own monitoredBarrier (ours: Gloo's algorithm and messages) is reached: let ddp groups
  // through, the rest to PyTorch's function as before.
  py::exec(R"(
import torch.distributed as _dist
import torch.distributed.distributed_c10d as _c10d
_torch_monitored_barrier = _c10d.monitored_barrier
def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    if _c10d._rank_not_in_group(group) or _c10d.get_backend(group) != "ddp":
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    group_to_use = _c10d._get_default_group() if group is None else group
    timeout = _c10d.default_pg_timeout if timeout is None else timeout
    return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)
monitored_barrier.__doc__ = _torch_monitored_barrier.__doc__
_c10d.monitored_barrier = _dist.monitored_barrier = monitored_barrier
)",
           m.attr("__dict__"));
}
