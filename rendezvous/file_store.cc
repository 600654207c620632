#include "rendezvous/file_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"

namespace ddp::rdzv {
namespace {

// The file: kHeader, then records
//   u32 magic | u8 op (set/delete) | u32 key_len | u32 value_len | key | value | u64 FNV-1a
constexpr char kHeader[17] = "DDP-FILESTORE-1\n";
constexpr size_t kHeaderSize = 16;
constexpr uint32_t kRecordMagic = 0x4c524444;  // "DDRL"
constexpr size_t kRecordHead = 4 + 1 + 4 + 4;
constexpr size_t kRecordTail = 8;
constexpr Millis kMaxBackoff{100};

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) DDP_THROW_ERRNO("FileStore: pwrite to '", path, "'");
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
}

uint64_t file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) DDP_THROW_ERRNO("FileStore: fstat '", path, "'");
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

// Exclusive OFD lock on the whole file. Retried with backoff until the store timeout so that a
// holder that is stopped (not killed: the kernel drops a dead holder's lock) is an error, not a hang.
class FileStore::WriteLock {
 public:
  WriteLock(int fd, const std::string& path, Millis timeout) : fd_(fd) {
    Deadline deadline(timeout);
    auto backoff = std::chrono::microseconds(50);
    while (!set(F_WRLCK)) {
      if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
        DDP_THROW_ERRNO("FileStore: fcntl(F_OFD_SETLK) on '", path, "'");
      }
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, "FileStore: the write lock on '", path, "' was not released within ",
                  timeout.count(), " ms");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::microseconds(2000));
    }
  }
  ~WriteLock() noexcept { set(F_UNLCK); }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;

 private:
  bool set(short type) const {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 0;  // the whole file, however long it grows
    return ::fcntl(fd_, F_OFD_SETLK, &fl) == 0;
  }
  int fd_;
};

FileStore::FileStore(std::string path, Millis timeout) : Store(timeout), path_(std::move(path)) {
  if (path_.empty()) DDP_THROW(InvalidArgument, "FileStore: empty path");
  fd_ = Fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd_) DDP_THROW_ERRNO("FileStore: open '", path_, "'");
  init_header();
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
}

// Writes the header of a new (or torn-at-creation) file; refuses a file that is something else.
void FileStore::init_header() {
  WriteLock lock(fd_.get(), path_, timeout());
  uint64_t size = file_size(fd_.get(), path_);
  uint8_t head[kHeaderSize] = {};
  size_t have = std::min<uint64_t>(size, kHeaderSize);
  if (have > 0 && ::pread(fd_.get(), head, have, 0) != static_cast<ssize_t>(have)) {
    DDP_THROW_ERRNO("FileStore: read the header of '", path_, "'");
  }
  bool prefix_ok = std::memcmp(head, kHeader, have) == 0;
  if (!prefix_ok) {
    DDP_THROW(InvalidArgument, "FileStore: '", path_,
              "' exists and is not a FileStore file (refusing to overwrite it)");
  }
  if (have < kHeaderSize) {
    if (::ftruncate(fd_.get(), 0) != 0) DDP_THROW_ERRNO("FileStore: ftruncate '", path_, "'");
    try {
      pwrite_all(fd_.get(), reinterpret_cast<const uint8_t*>(kHeader), kHeaderSize, 0, path_);
    } catch (const Error&) {
      remove_if_still_ours();  // a full disk leaves no empty store file behind
      throw;
    }
  }
  offset_ = kHeaderSize;
}

// Unlinks the path if it still names our (empty, header-less) file, not one made since.
void FileStore::remove_if_still_ours() noexcept {
  struct stat ours {
  }, named{};
  if (::fstat(fd_.get(), &ours) == 0 && ::stat(path_.c_str(), &named) == 0 && ours.st_dev == named.st_dev &&
      ours.st_ino == named.st_ino && ours.st_size < static_cast<off_t>(kHeaderSize)) {
    ::unlink(path_.c_str());
  }
}

void FileStore::refresh_locked() {
  uint64_t size = file_size(fd_.get(), path_);
  if (size <= offset_) return;
  std::vector<uint8_t> buf(size - offset_);
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd_.get(), buf.data() + got, buf.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) DDP_THROW_ERRNO("FileStore: read '", path_, "'");
    if (n == 0) break;  // truncated under us (a torn tail being cut): parse what we have
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  while (got - pos >= kRecordHead + kRecordTail) {
    const uint8_t* r = buf.data() + pos;
    uint32_t klen = get_u32(r + 5);
    uint32_t vlen = get_u32(r + 9);
    if (get_u32(r) != kRecordMagic || klen == 0 || klen > kMaxKeySize || vlen > kMaxValueSize) break;
    size_t total = kRecordHead + klen + vlen + kRecordTail;
    if (got - pos < total) break;  // still being written, or torn
    if (fnv1a(r, total - kRecordTail) != get_u64(r + total - kRecordTail)) break;  // torn
    std::string key(reinterpret_cast<const char*>(r + kRecordHead), klen);
    if (static_cast<Op>(r[4]) == Op::kSet) {
      data_[key] = Bytes(r + kRecordHead + klen, r + kRecordHead + klen + vlen);
    } else {
      data_.erase(key);
    }
    pos += total;
  }
  offset_ += pos;
}

void FileStore::append_locked(Op op, const std::string& key, const Bytes& value) {
  // Only the lock holder appends, so bytes past the last complete record are a dead writer's
  // torn record: cut them so the new record is reachable.
  if (file_size(fd_.get(), path_) > offset_ && ::ftruncate(fd_.get(), static_cast<off_t>(offset_)) != 0) {
    DDP_THROW_ERRNO("FileStore: ftruncate '", path_, "'");
  }
  std::vector<uint8_t> rec;
  rec.reserve(kRecordHead + key.size() + value.size() + kRecordTail);
  put_u32(rec, kRecordMagic);
  rec.push_back(static_cast<uint8_t>(op));
  put_u32(rec, static_cast<uint32_t>(key.size()));
  put_u32(rec, static_cast<uint32_t>(value.size()));
  rec.insert(rec.end(), key.begin(), key.end());
  rec.insert(rec.end(), value.begin(), value.end());
  uint64_t sum = fnv1a(rec.data(), rec.size());
  for (int i = 0; i < 8; ++i) rec.push_back(static_cast<uint8_t>(sum >> (8 * i)));
  try {
    pwrite_all(fd_.get(), rec.data(), rec.size(), offset_, path_);
  } catch (const Error&) {
    // A full disk: cut the part that was written, so the file ends at the last whole record.
    (void)!::ftruncate(fd_.get(), static_cast<off_t>(offset_));
    throw;
  }
  offset_ += rec.size();
  if (op == Op::kSet) {
    data_[key] = value;
  } else {
    data_.erase(key);
  }
}

void FileStore::do_set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteLock file_lock(fd_.get(), path_, timeout());
  refresh_locked();
  append_locked(Op::kSet, key, value);
}

int64_t FileStore::do_add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteLock file_lock(fd_.get(), path_, timeout());
  refresh_locked();
  int64_t value = delta;
  if (auto it = data_.find(key); it != data_.end())
    value = checked_add(key, parse_counter(key, it->second), delta);
  append_locked(Op::kSet, key, Store::to_bytes(std::to_string(value)));
  return value;
}

Bytes FileStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteLock file_lock(fd_.get(), path_, timeout());
  refresh_locked();
  auto it = data_.find(key);
  if (it == data_.end() ? !expected.empty() : it->second != expected) {
    return it == data_.end() ? expected : it->second;
  }
  append_locked(Op::kSet, key, desired);
  return desired;
}

bool FileStore::do_delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteLock file_lock(fd_.get(), path_, timeout());
  refresh_locked();
  if (!data_.count(key)) return false;
  append_locked(Op::kDelete, key, {});
  return true;
}

bool FileStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  return missing_locked(keys).empty();
}

int64_t FileStore::do_num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  return static_cast<int64_t>(data_.size());
}

std::unique_ptr<Store> FileStore::clone() { return std::make_unique<FileStore>(path_, timeout()); }

Bytes FileStore::do_get(const std::string& key, Millis timeout) { return wait_for("get", {key}, timeout); }

void FileStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  wait_for("wait", keys, timeout);
}

std::vector<std::string> FileStore::missing_locked(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!data_.count(k)) out.push_back(k);
  }
  return out;
}

Bytes FileStore::wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout) {
  Deadline deadline(timeout);
  Fd watch;
  bool watch_tried = false;
  Millis backoff(1);
  while (true) {
    std::vector<std::string> missing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      refresh_locked();
      missing = missing_locked(keys);
      if (missing.empty()) return data_.at(keys.front());
    }
    if (deadline.expired()) throw_wait_timeout(op, missing, timeout);
    if (interrupted_)
      DDP_THROW(NetworkError, "store ", op, " on ", path_, " interrupted (the store handle was closed)");
    if (!watch_tried) {
      // inotify wakes us promptly for writers on this host; the backoff covers network file
      // systems. Set up only when we must wait, then re-check: a write may have come between.
      watch_tried = true;
      watch = Fd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
      if (watch && ::inotify_add_watch(watch.get(), path_.c_str(), IN_MODIFY) < 0) watch.reset();
      continue;
    }
    pollfd p{watch.get(), POLLIN, 0};
    int rc = ::poll(&p, watch ? 1 : 0, std::min(deadline.poll_ms(), static_cast<int>(backoff.count())));
    if (rc > 0) {
      char events[4096];
      while (::read(watch.get(), events, sizeof(events)) > 0) {
      }
    }
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace ddp::rdzv
