#pragma once
// StagingOnDemand: how the shared libddp's tcp groups take CUDA buffers without loading CUDA
// for programs that never pass one. Host buffers go straight to the tcp group; the first CUDA
// buffer loads the nccl plugin (libddp_backend_nccl.so, comm/backend_plugin.h) and its staging
// decorator (comm/nccl/cuda_staging.h: pinned host copies around the tcp op), which handles
// every CUDA buffer from then on. Both paths drive the same tcp group, so ops keep their order.
// Without the plugin (libddp built without CUDA, or CUDA not installed) a CUDA buffer is a
// BackendError naming what could not be loaded.
#include "comm/process_group.h"

namespace ddp::comm {

// `load_staging` builds the staging decorator around `inner` (called once, on first need).
using StagingFactory = ProcessGroupPtr (*)(ProcessGroupPtr inner);
using StagingLoader = StagingFactory (*)();

ProcessGroupPtr stage_on_demand(ProcessGroupPtr inner, StagingLoader load_staging);

}  // namespace ddp::comm
