#pragma once
// FileStore: a Store in one file, shared by many processes on one host or on a shared file
// system (file:// init).
//
// Layout: a 16-byte header, then an append-only log of records
//   u32 magic | u8 op (set/delete) | u32 key_len | u32 value_len | key | value | u64 FNV-1a
// The current state is the replay of the log. Every write (set, add, compare_set, delete_key)
// holds an exclusive fcntl open-file-description lock (F_OFD_SETLK: per open file, so two
// FileStore objects in one process exclude each other too) while it replays the new records,
// decides, and appends one record. Readers take no lock: they accept only complete records
// whose checksum matches, so a writer SIGKILLed mid-write leaves a torn tail that readers ignore
// and the next writer (which holds the lock, so no one else can be writing) truncates.
// get/wait watch the file with inotify (IN_MODIFY) and, because inotify does not see writes by
// other hosts on a network file system, also re-read on an adaptive backoff (1 ms doubling to
// 100 ms). A file that exists but is not a FileStore is refused (InvalidArgument), never
// overwritten. The log is never compacted: stores hold rendezvous data, which is small.
// The file is not deleted by the store, except one it could not even write the header to. A full
// disk is an error naming the path (a SystemError with the errno's text), the file cut back to
// its last whole record. clone() opens the file again; interrupt() ends a get/wait within one
// backoff step. Thread-safe; not shareable across fork() (open a new one).
#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "common/fd.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string path, Millis timeout = kDefaultStoreTimeout);
  const std::string& path() const { return path_; }
  std::unique_ptr<Store> clone() override;
  void interrupt() noexcept override { interrupted_ = true; }

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  class WriteLock;  // RAII exclusive lock on the file (file_store.cc)
  enum class Op : uint8_t { kSet = 1, kDelete = 2 };

  void init_header();
  void remove_if_still_ours() noexcept;
  void refresh_locked();  // mu_ held: applies complete records past offset_
  void append_locked(Op op, const std::string& key, const Bytes& value);  // mu_ + file lock held
  // Blocks until all keys exist; returns the value of keys.front().
  Bytes wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout);
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const;

  std::string path_;
  std::atomic<bool> interrupted_{false};
  std::mutex mu_;
  Fd fd_;
  uint64_t offset_ = 0;  // end of the last complete record applied
  std::map<std::string, Bytes> data_;
};

}  // namespace ddp::rdzv
