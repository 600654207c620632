// libddp_backend_gloo.so: the gloo backend as a plugin of the shared libddp (comm/backend_plugin.h).
#include "comm/backend_plugin.h"

DDP_BACKEND_PLUGIN("gloo", &ddp::comm::make_gloo_group, nullptr)
