#include "common/shm_names.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace ddp::shm_names {
namespace {

constexpr char kPrefix[] = "ddp-tcp-";
constexpr size_t kNonceDigits = 16;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string tcp_segment(pid_t creator, uint64_t nonce) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/%s%d-%016llx", kPrefix, static_cast<int>(creator),
                static_cast<unsigned long long>(nonce));
  return buf;
}

pid_t tcp_segment_creator(const std::string& entry) {
  const size_t prefix = sizeof kPrefix - 1;
  if (entry.size() < prefix + 2 + kNonceDigits || entry.compare(0, prefix, kPrefix) != 0) return -1;
  const size_t dash = entry.size() - kNonceDigits - 1;
  if (entry[dash] != '-' ||
      !std::all_of(entry.begin() + static_cast<std::ptrdiff_t>(dash) + 1, entry.end(), is_hex)) {
    return -1;
  }
  const std::string digits = entry.substr(prefix, dash - prefix);
  if (digits.empty() || digits.size() > 9 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return static_cast<pid_t>(std::stol(digits));
}

size_t remove_tcp_segments(const std::vector<pid_t>& creators) noexcept {
  if (creators.empty()) return 0;
  size_t removed = 0;
  try {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/dev/shm"), ::closedir);
    if (!dir) return 0;
    const int dfd = ::dirfd(dir.get());
    while (dirent* e = ::readdir(dir.get())) {
      const std::string name = e->d_name;
      const pid_t creator = tcp_segment_creator(name);
      if (creator <= 0 || std::find(creators.begin(), creators.end(), creator) == creators.end()) continue;
      struct stat st {};
      if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
      if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
    }
  } catch (...) {
    // bad_alloc while building a name: leave the rest; this is clean-up, best effort.
  }
  return removed;
}

}  // namespace ddp::shm_names
