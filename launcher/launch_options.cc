#include "launcher/launch_options.h"

namespace ddp::launcher {

const char* to_string(RdzvBackend backend) {
  switch (backend) {
    case RdzvBackend::kStatic: return "static";
    case RdzvBackend::kTcp: return "tcp";
    case RdzvBackend::kFile: return "file";
    case RdzvBackend::kMulticast: return "multicast";
    case RdzvBackend::kEtcd: return "etcd";
  }
  return "?";
}

}  // namespace ddp::launcher
