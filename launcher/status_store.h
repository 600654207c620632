#pragma once
// The job's rendezvous store, opened by an observer (ddp-launch --status) from the job's own
// flags, never as one of its launchers: a client only, it hosts nothing, joins no round and
// writes no key. Where the store is comes from plan_store (launcher/agent.h): tcp/c10d and
// static, a TCPStore client (token: DDP_JOB_TOKEN or AgentOptions::job_token, else derived from
// --rdzv-id); file, "<dir>/<run_id>.store" when it exists; etcd, an EtcdStore over the members
// under the job's prefix. One attempt, bounded by `connect_timeout`.
// Errors: nothing answers (TimeoutError/NetworkError) or the token is refused (StoreError), each
// naming the endpoint; a file backend without the job's file: StoreError; a single-node job or
// multicast (no endpoint to ask): InvalidArgument.
#include <memory>
#include <string>

#include "launcher/agent.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

struct StatusStore {
  std::unique_ptr<rdzv::Store> store;
  std::string where;  // "the rendezvous store at 10.0.0.1:29400", "etcd at ...", "the file store ..."
  rdzv::EtcdStore* etcd = nullptr;  // `store` itself when it is etcd (its leases tell liveness)
};

StatusStore open_rendezvous_store_readonly(const AgentOptions& options, Millis connect_timeout);

}  // namespace ddp::launcher
