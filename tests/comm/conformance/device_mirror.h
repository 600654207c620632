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

}  // namespace ddp::comm::conformance
