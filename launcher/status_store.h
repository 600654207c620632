#pragma once
// The job's rendezvous store, opened by an observer (ddp-launch --status) from the same flags
// the job's launchers were given, never as one of them: it connects as a client and never
// hosts a store, joins a round or writes a key. Where each backend's store is comes from
// plan_store (launcher/agent.h), as for the launchers themselves:
//   tcp/c10d, static  a TCPStore client of the launcher that hosts it; the job token is
//                     DDP_JOB_TOKEN (or AgentOptions::job_token), else derived from --rdzv-id
//                     as the launchers derive it (derive_job_token)
//   file              the FileStore "<dir>/<run_id>.store", only when the file exists
//   etcd              an EtcdStore over the members (etcd_client_options), the job's prefix
// One attempt, bounded by `connect_timeout`: an observer reports, it does not wait for a job.
// Errors: nothing answers at the endpoint (TimeoutError/NetworkError) or it refuses the token
// (StoreError), each naming the endpoint; a file backend without the job's file: StoreError; a
// single-node job (its store is private to its launcher) or multicast (no endpoint to ask):
// InvalidArgument.
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
