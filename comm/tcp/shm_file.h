#pragma once
// ShmFile: one POSIX shared-memory object mapped into this process. The tcp backend's segment
// (shm_segment.h) and its group memory (shm_region.h) are both made of these.
//
// - create() makes a fresh object under a unique name ("/ddp-tcp-<pid>-<nonce>", the rule in
//   common/shm_names.h, so the launcher can remove one a killed worker left), reserves its pages
//   (a /dev/shm too small is an error naming the fix now, not a SIGBUS in a collective later),
//   and maps it. open() maps an existing one by name.
// - The creator unlinks the name when the object goes (or earlier, by unlink(): once every
//   process that needs it has mapped it, so nothing is left in /dev/shm even after a SIGKILL).
// - The mapping lives as long as the object: move-only.
#include <cstddef>
#include <string>

namespace ddp::comm::tcp {

class ShmFile {
 public:
  ShmFile() = default;
  // `purpose` completes the out-of-room error: "for a group of 4 ranks".
  static ShmFile create(size_t bytes, const std::string& purpose);
  static ShmFile open(const std::string& name);
  ~ShmFile();
  ShmFile(ShmFile&& o) noexcept;
  ShmFile& operator=(ShmFile&& o) noexcept;
  ShmFile(const ShmFile&) = delete;
  ShmFile& operator=(const ShmFile&) = delete;

  const std::string& name() const { return name_; }
  char* base() const { return static_cast<char*>(base_); }
  size_t bytes() const { return bytes_; }
  bool valid() const { return base_ != nullptr; }
  void unlink() noexcept;  // idempotent; ENOENT (another process was first) is fine

 private:
  void release() noexcept;
  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
  bool unlinked_ = false;
};

}  // namespace ddp::comm::tcp
