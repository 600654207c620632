#pragma once
// Resolving an init method into (store, rank, world size): the part of init_process_group that
// talks to the environment. See comm/init.h for the rules; kept apart so they can be tested
// without building any group.
#include <memory>
#include <string>

#include "rendezvous/store.h"

namespace ddp::comm {

// What the environment says, in the order of comm/init.h; -1 when unknown. Malformed
// variables are InvalidArgument naming them.
struct EnvRanks {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
};
EnvRanks env_ranks();

struct StoreRequest {
  std::string backend = "tcp";
  std::string init_method = "env://";
  int rank = -1;  // -1: from the URL / environment
  int world_size = -1;
  std::string job_token;
  // Bounds connecting to a TCP store (and its handshake); kUseDefault: the store's default.
  // init_process_group passes its timeout when one was given (the option or DDP_TIMEOUT_MS).
  Millis connect_timeout = kUseDefault;
  std::shared_ptr<rdzv::Store> given;  // use this store instead of the init method
};

struct StoreHandle {
  std::shared_ptr<rdzv::Store> store;
  int rank = -1;
  int world_size = -1;
  bool hosts_server = false;  // this process serves the TCPStore the others reach
  std::string description;    // "DDP_STORE=host:port", "MASTER_ADDR:PORT (hosted here)", ...
};

// InvalidArgument names the missing or malformed variable / URL part.
StoreHandle open_init_store(const StoreRequest& request);

}  // namespace ddp::comm
