// libddp_backend_mpi.so: the mpi backend as a plugin of the shared libddp (comm/backend_plugin.h).
#include "comm/backend_plugin.h"

DDP_BACKEND_PLUGIN("mpi", &ddp::comm::make_mpi_group, nullptr)
