// Slurm host lists (SLURM_JOB_NODELIST): bounded output, errors only as InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/values.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto hosts = ddp::cli::expand_hostlist(text);
    if (hosts.size() > ddp::cli::kMaxHosts) __builtin_trap();
  } catch (const ddp::InvalidArgument&) {
  }
  return 0;
}
