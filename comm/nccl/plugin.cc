// libddp_backend_nccl.so: the nccl backend as a plugin of the shared libddp (comm/backend_plugin.h),
// with the CUDA staging the shared libddp's tcp groups use for CUDA buffers.
#include "comm/backend_plugin.h"
#include "comm/nccl/cuda_staging.h"

DDP_BACKEND_PLUGIN("nccl", &ddp::comm::make_nccl_group, &ddp::comm::wrap_cuda_staging)
