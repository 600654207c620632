#pragma once
// CountingStore: a view of another store that counts one node's requests by kind, for tests
// that bound what a rendezvous costs per node.
#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/store.h"

namespace ddp::rdzv::testing {

class CountingStore final : public Store {
 public:
  explicit CountingStore(Store& base) : base_(base) {}
  std::atomic<int> node_gets{0};     // gets of a registration ("<round>/node/<rank>")
  std::atomic<int> node_reads{0};    // get_present calls of registrations, each one batch
  std::atomic<int> checks{0};        // check calls
  std::atomic<int> gets{0};          // gets of any other key (a get in slices: one per slice)
  std::atomic<int> others{0};        // every other request but wait (its slices vary)
  std::atomic<int> compare_sets{0};  // compare_set calls (counted in others too)
  std::atomic<int> adds{0};          // add calls (counted in others too)

 protected:
  void do_set(const std::string& k, const Bytes& v) override { ++others, base_.set(k, v); }
  Bytes do_get(const std::string& k, Millis t) override {
    ++(k.find("/node/") != std::string::npos ? node_gets : gets);
    return base_.get(k, t);
  }
  int64_t do_add(const std::string& k, int64_t d) override { return ++others, ++adds, base_.add(k, d); }
  int64_t do_ticket(const std::string& k) override { return ++others, base_.ticket(k); }
  int64_t do_tickets(const std::string& k) override { return ++others, base_.tickets(k); }
  Bytes do_compare_set(const std::string& k, const Bytes& e, const Bytes& d) override {
    return ++others, ++compare_sets, base_.compare_set(k, e, d);
  }
  bool do_check(const std::vector<std::string>& k) override { return ++checks, base_.check(k); }
  void do_wait(const std::vector<std::string>& k, Millis t) override { base_.wait(k, t); }
  bool do_delete_key(const std::string& k) override { return ++others, base_.delete_key(k); }
  int64_t do_num_keys() override { return ++others, base_.num_keys(); }
  std::vector<std::optional<Bytes>> do_get_present(const std::vector<std::string>& k) override {
    const bool nodes = std::any_of(k.begin(), k.end(),
                                   [](const auto& key) { return key.find("/node/") != std::string::npos; });
    return ++(nodes ? node_reads : others), base_.get_present(k);
  }

 private:
  Store& base_;
};

}  // namespace ddp::rdzv::testing
