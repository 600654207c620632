#pragma once
// GroupFactory: the world group of one rank and the subgroups made from it, without any
// global state (init_process_group keeps one of these; tests run one per thread-rank).
//
// Contract:
// - The world group is built through the backend registry over PrefixStore("world", store).
// - new_group(ranks) must be called by EVERY rank of the world, in the same order (as in
//   torch.distributed): each call takes the next group number n on every rank, and the members
//   build their group over PrefixStore("group/<n>", store) with its own sequence numbers.
//   Non-members get nullptr (and touch nothing). Ranks may be given in any order: the group
//   rank of a member is its position in the list, as in torch.
// - Groups are shared_ptrs: the backend tears a group down when the last owner drops it.
// Thread-safe.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "rendezvous/store.h"

namespace ddp::comm {

struct GroupFactoryOptions {
  std::string backend = "tcp";
  std::shared_ptr<rdzv::Store> store;  // shared by every rank (a TCPStore client, a HashStore)
  int rank = 0;
  int world_size = 1;
  Millis timeout = kDefaultCollectiveTimeout;
  std::string job_token;
};

struct NewGroupOptions {
  std::string backend;           // empty: the world's backend
  Millis timeout = kUseDefault;  // kUseDefault: the world's timeout
};

class GroupFactory {
 public:
  // Validates the options (InvalidArgument) and builds the world group (may block in the
  // backend's rendezvous until every rank arrives or the timeout passes).
  explicit GroupFactory(GroupFactoryOptions options);
  ~GroupFactory() = default;
  GroupFactory(const GroupFactory&) = delete;
  GroupFactory& operator=(const GroupFactory&) = delete;

  const ProcessGroupPtr& world() const { return world_; }
  const std::string& backend() const { return options_.backend; }
  const std::shared_ptr<rdzv::Store>& store() const { return options_.store; }

  // See the contract above. InvalidArgument for an empty list, a duplicate or an out-of-range
  // rank. Returns nullptr on ranks that are not members.
  ProcessGroupPtr new_group(const std::vector<int>& ranks, const NewGroupOptions& options = {});

 private:
  GroupFactoryOptions options_;
  ProcessGroupPtr world_;
  std::mutex mu_;
  int next_group_ = 0;
};

}  // namespace ddp::comm
