// Workers' TORCHELASTIC_ERROR_FILE: read_error_file never throws and error_head is printable.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "launcher/error_file.h"

namespace {

const std::string& scratch_file() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string p =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/ddp-error-file-fuzz-" + std::to_string(::getpid());
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch_file();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(fd, data + off, size - off);
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (auto content = ddp::launcher::read_error_file(path)) {
    const std::string head = ddp::launcher::error_head(*content);
    for (unsigned char c : head) {
      if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') std::abort();  // promised printable
    }
  }
  return 0;
}
