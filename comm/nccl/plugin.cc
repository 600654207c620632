// libddp_backend_nccl.so: the nccl backend as a plugin of the shared libddp (comm/backend_plugin.h).
#include "comm/backend_plugin.h"

DDP_BACKEND_PLUGIN("nccl", &ddp::comm::make_nccl_group)
