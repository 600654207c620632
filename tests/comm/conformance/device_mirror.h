#pragma once
// For a backend that takes device buffers only (nccl): a ProcessGroup that runs each op of the
// inner group on GPU copies of the caller's host views, so the one conformance matrix checks it
// too. Inputs are copied to fresh device memory, the op runs and is waited for, outputs come back
// to the host views; the returned Work is already complete (errors are thrown by the call).
// Multi-buffer lists: a list of one goes to `device`; of K > 1, buffer i of rank r to device
// r*K + i (distinct devices, as nccl requires). Test-only: one allocation per buffer per op.
#include "comm/process_group.h"

namespace ddp::comm::conformance {

ProcessGroupPtr mirror_on_device(ProcessGroupPtr inner, int device);

// Without a GPU every nccl case skips: the binary exits 77 and ctest says Skipped.
bool nccl_runnable();
// Worlds above 1 and lists over several GPUs need a GPU each: those cases have their own ctest
// (conformance_nccl_multi_gpu), Skipped with fewer than two GPUs rather than quietly reduced.
bool nccl_multi_gpu();

}  // namespace ddp::comm::conformance
