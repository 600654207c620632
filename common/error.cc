#include "common/error.h"

#include <cstring>

namespace ddp {
namespace {
const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

Error::Error(const std::string& what, const char* file, int line)
    : std::runtime_error(what + " [" + basename_of(file) + ":" + std::to_string(line) + "]"),
      message_(what),
      file_(file),
      line_(line) {}

SystemError::SystemError(const std::string& what, int err, const char* file, int line)
    : Error(what + ": " + std::strerror(err), file, line), errno_(err) {}

}  // namespace ddp
