#pragma once
// CUDA staging: a ProcessGroup decorator that lets a host-memory backend (tcp, gloo) take CUDA
// buffers, so two ranks can share one GPU in tests (NCCL refuses two ranks on one GPU).
//
// - Host buffers pass straight through to the inner group.
// - A CUDA view is copied into pinned host memory at issue time (after the caller's work on
//   the legacy default stream), the inner op runs on the copy, and outputs are copied back
//   when the inner op completes; the returned Work completes after that copy. Pinned buffers
//   are pooled per group.
// - Everything else (ranks, sequence numbers, errors, timeouts) is the inner group's; a CUDA
//   failure is a BackendError naming the op. The registry wraps tcp with this when CUDA is built.
#include "comm/process_group.h"

namespace ddp::comm {

ProcessGroupPtr wrap_cuda_staging(ProcessGroupPtr inner);

}  // namespace ddp::comm
