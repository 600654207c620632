#pragma once
// FileStore: a Store in one file, shared by processes on one host or a shared file system (file://
// init): a 16-byte header, then an append-only log of checksummed records (file_store.cc) whose
// replay is the state. A write holds an exclusive F_OFD_SETLK lock (per open file, so two
// FileStores in one process exclude each other) while it replays, decides and appends one record.
// Readers take no lock and accept only whole records with a matching checksum: a writer killed
// mid-write leaves a torn tail that the next writer truncates. get/wait watch with inotify and
// re-read on a backoff (1 to 100 ms: network file systems). A file that is not a FileStore is
// refused (InvalidArgument), never overwritten; the log is never compacted nor the file deleted
// (but one whose header could not be written). A full disk: SystemError naming the path, the file
// cut back to its last whole record. clone() opens the file again; interrupt() ends a get/wait
// within one backoff step. Thread-safe; not shareable across fork().
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
