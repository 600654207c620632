#pragma once
// StoreUrl: what a DDP_STORE value names, the one place its syntax is defined.
//
//   host:port, [v6]:port                a TCPStore (the launcher, or node 0, serves it)
//   etcd://host:port,host:port/prefix/  the job's keys in etcd (EtcdStore), under /prefix/:
//   etcd+https://...                    the same over TLS (DDP_ETCD_CACERT, _CERT, _KEY)
//
// With etcd no node serves the store: it outlives any node's loss. Members without a port get
// 2379; the prefix is normalized to start and end with '/'. User and password come from
// DDP_ETCD_USER / DDP_ETCD_PASSWORD (EtcdClient reads them). A malformed value is an
// InvalidArgument naming DDP_STORE and what is wrong. Pure (settings aside); thread-safe.
#include <string>
#include <vector>

#include "common/socket.h"
#include "rendezvous/etcd_client.h"

namespace ddp::rdzv {

struct StoreUrl {
  enum class Kind { kTcp, kEtcd };
  Kind kind = Kind::kTcp;
  net::Endpoint tcp;                        // kTcp
  std::vector<std::string> etcd_endpoints;  // kEtcd: "host:port", one per member
  std::string protocol = "http";            // kEtcd: http or https
  std::string prefix = "/ddp/";             // kEtcd: every key is prefix + key
};

StoreUrl parse_store_url(const std::string& text);

// The DDP_STORE value of an etcd store. Endpoints may carry http:// or https:// (any https
// makes the whole URL https, as etcd members of one cluster share a scheme).
std::string etcd_store_url(const std::vector<std::string>& endpoints, const std::string& protocol,
                           const std::string& prefix);

// A client of the URL's members, with TLS files from DDP_ETCD_CACERT / _CERT / _KEY.
EtcdClientOptions etcd_client_options(const StoreUrl& url);

}  // namespace ddp::rdzv
