#pragma once
// The machine a figure was measured on, as every ddp-bench JSON row carries it: CPU model, usable
// and online CPUs, cache sizes (common/machine.h reads them from sysfs).
#include <nlohmann/json.hpp>

namespace ddp::bench {

nlohmann::json machine_json();

}  // namespace ddp::bench
