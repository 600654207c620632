#pragma once
// ReadOnlyStore: a view of another store that answers reads and fails the test on any write,
// for code that promises never to write (rdzv::read_job_status, the liveness probes).
#include <doctest/doctest.h>

#include <memory>

#include "common/error.h"
#include "rendezvous/store.h"

namespace ddp::rdzv::testing {

class ReadOnlyStore final : public Store {
 public:
  explicit ReadOnlyStore(Store& base) : base_(base) {}
  int writes() const { return writes_; }

 protected:
  void do_set(const std::string& key, const Bytes&) override { refuse("set", key); }
  Bytes do_get(const std::string& key, Millis timeout) override { return base_.get(key, timeout); }
  int64_t do_add(const std::string& key, int64_t) override { refuse("add", key); }
  Bytes do_compare_set(const std::string& key, const Bytes&, const Bytes&) override {
    refuse("compare_set", key);
  }
  bool do_check(const std::vector<std::string>& keys) override { return base_.check(keys); }
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override { base_.wait(keys, timeout); }
  bool do_delete_key(const std::string& key) override { refuse("delete_key", key); }
  int64_t do_num_keys() override { return base_.num_keys(); }
  int64_t do_ticket(const std::string& key) override { refuse("ticket", key); }
  int64_t do_tickets(const std::string& key) override { return base_.tickets(key); }
  std::vector<std::optional<Bytes>> do_get_present(const std::vector<std::string>& keys) override {
    return base_.get_present(keys);
  }

 private:
  [[noreturn]] void refuse(const char* op, const std::string& key) {
    ++writes_;
    const std::string what = std::string("a read-only reader wrote: ") + op + " " + key;
    FAIL_CHECK(what);
    DDP_THROW(StoreError, "read-only store: ", op, " ", key);
  }
  Store& base_;
  int writes_ = 0;
};

}  // namespace ddp::rdzv::testing
