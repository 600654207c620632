#pragma once
// The job on etcd (--rdzv-backend etcd): how the agent reaches etcd, opens the job's store,
// names it to the workers, and proves itself alive.
//
// Every key of the job is "<etcd_prefix><run_id>/..." (the rounds' keys carry the run id, as on
// every store), read and written by every launcher and worker alike: no launcher hosts
// anything, so the job's state outlives any node. The workers' DDP_STORE is etcd itself
// (rendezvous/store_url.h), TLS files in DDP_ETCD_CACERT/_CERT/_KEY.
//
// A run id whose job has ended (a launcher of it left) is refused, as with the file backend: its
// keys would replay the old rounds. Errors: etcd not answering within join_timeout is a
// TimeoutError naming the members and what they did; not etcd, a wrong password, a refused
// certificate: StoreError at once.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/liveness.h"
#include "rendezvous/etcd_store.h"

namespace ddp::launcher {

// l.etcd's members as this host uses them: those on this host first, then the others from a place
// that depends on this host's name. Every client (the launcher's, its liveness's, its workers'
// through DDP_STORE) starts with the first: its watches, which see a member's loss only at the
// link-loss bound when that member's host vanishes, are then on a member that dies with this
// host, and the load of many hosts is spread over the members.
std::vector<std::string> members_near_first(const std::vector<std::string>& endpoints);

// The members and TLS of l.etcd; each call gives up within the heartbeat bound (at least 2 s,
// which outlasts an etcd leader election; at most read_timeout), so a launcher whose etcd lost
// its quorum ends within about twice the bound.
rdzv::EtcdClientOptions etcd_client_options(const LaunchOptions& l);

// The job's store, once etcd answers (tried until join_timeout; check_interrupt between tries).
std::unique_ptr<rdzv::EtcdStore> open_etcd_store(const LaunchOptions& l,
                                                 const std::function<void()>& check_interrupt);

// The workers' DDP_STORE: "etcd://host:port,.../<etcd_prefix>" (etcd+https:// with TLS), the
// members near first.
std::string etcd_worker_store(const LaunchOptions& l);

// This launcher's lease and its watch on the others' (launcher/lease_liveness.h).
std::unique_ptr<Liveness> start_lease_liveness(const LaunchOptions& l, const std::string& id,
                                               std::function<void()> on_loss);

}  // namespace ddp::launcher
