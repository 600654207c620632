#pragma once
// The rendezvous of one NCCL communicator (or clique): the process of rank 0 creates the
// ncclUniqueId and puts it in the group's store under `key`; every other process reads it, with a
// deadline. Each communicator a group creates has a key of its own. Errors: BackendError (NCCL,
// or a value of the wrong size under the key), TimeoutError from the store's get.
#include <nccl.h>

#include <string>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::comm::nccl_backend {

struct UniqueIdExchange {
  std::string key;
  bool create = false;  // this process makes the id (group rank 0)
  Millis timeout{0};
  std::string what;  // for errors: "nccl group 'world'"
};

ncclUniqueId exchange_unique_id(rdzv::Store& store, const UniqueIdExchange& how);

}  // namespace ddp::comm::nccl_backend
