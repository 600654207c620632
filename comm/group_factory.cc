#include "comm/group_factory.h"

#include <algorithm>

#include "common/error.h"
#include "rendezvous/prefix_store.h"

namespace ddp::comm {

GroupFactory::GroupFactory(GroupFactoryOptions options) : options_(std::move(options)) {
  DDP_CHECK(options_.store != nullptr, "GroupFactory needs a store");
  if (options_.world_size < 1) {
    DDP_THROW(InvalidArgument, "init_process_group: world_size must be at least 1, got ",
              options_.world_size);
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    DDP_THROW(InvalidArgument, "init_process_group: rank ", options_.rank, " is outside [0, ",
              options_.world_size, ")");
  }
  if (options_.timeout.count() <= 0) {
    DDP_THROW(InvalidArgument, "init_process_group: timeout must be positive, got ", options_.timeout.count(),
              " ms");
  }
  GroupSetup setup;
  setup.store = std::make_shared<rdzv::PrefixStore>("world", options_.store);
  setup.rank = options_.rank;
  setup.size = options_.world_size;
  setup.options.timeout = options_.timeout;
  setup.job_token = options_.job_token;
  setup.global_ranks.resize(options_.world_size);
  for (int r = 0; r < options_.world_size; ++r) setup.global_ranks[r] = r;
  setup.name = "world";
  world_ = create_group(options_.backend, setup);
}

ProcessGroupPtr GroupFactory::new_group(const std::vector<int>& ranks, const NewGroupOptions& options) {
  if (ranks.empty()) DDP_THROW(InvalidArgument, "new_group: the rank list is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= options_.world_size) {
      DDP_THROW(InvalidArgument, "new_group: rank ", sorted[i], " is outside the world [0, ",
                options_.world_size, ")");
    }
    if (i > 0 && sorted[i] == sorted[i - 1])
      DDP_THROW(InvalidArgument, "new_group: rank ", sorted[i], " is listed twice");
  }
  int n = 0;
  {
    // Every rank numbers its calls the same way, so the n-th call meets under the same prefix.
    std::lock_guard<std::mutex> lock(mu_);
    n = next_group_++;
  }
  auto me = std::find(ranks.begin(), ranks.end(), options_.rank);
  if (me == ranks.end()) return nullptr;

  GroupSetup setup;
  setup.name = "group/" + std::to_string(n);
  setup.store = std::make_shared<rdzv::PrefixStore>(setup.name, options_.store);
  setup.rank = static_cast<int>(me - ranks.begin());
  setup.size = static_cast<int>(ranks.size());
  setup.options.timeout = options.timeout == kUseDefault ? options_.timeout : options.timeout;
  setup.job_token = options_.job_token;
  setup.global_ranks = ranks;
  return create_group(options.backend.empty() ? options_.backend : options.backend, setup);
}

}  // namespace ddp::comm
