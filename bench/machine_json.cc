#include "bench/machine_json.h"

#include "common/machine.h"

namespace ddp::bench {

nlohmann::json machine_json() {
  const MachineProfile& m = machine_profile();
  return {{"cpu", m.cpu_model},
          {"cpus", m.usable_cpus},
          {"online_cpus", m.online_cpus},
          {"l1d_bytes", m.l1d_bytes},
          {"l2_bytes", m.l2_bytes},
          {"l3_bytes", m.l3_bytes},
          {"l3_shared_by", m.l3_shared_by}};
}

}  // namespace ddp::bench
