#include "rendezvous/store_url.h"

#include "common/error.h"
#include "common/settings.h"

namespace ddp::rdzv {
namespace {

constexpr uint16_t kEtcdPort = 2379;
constexpr std::string_view kEtcd = "etcd://";
constexpr std::string_view kEtcdHttps = "etcd+https://";

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  DDP_THROW(InvalidArgument, settings::kStore.name, "='", text, "': ", why);
}

std::string normalized_prefix(std::string p) {
  if (p.empty() || p.front() != '/') p.insert(p.begin(), '/');
  if (p.back() != '/') p.push_back('/');
  return p;
}

StoreUrl parse_etcd(const std::string& text, std::string_view scheme) {
  StoreUrl u;
  u.kind = StoreUrl::Kind::kEtcd;
  u.protocol = scheme == kEtcdHttps ? "https" : "http";
  const std::string rest = text.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string members = rest.substr(0, slash);
  if (slash == std::string::npos || slash + 1 >= rest.size())
    bad(text, "an etcd store needs a key prefix: etcd://HOST:PORT,.../PREFIX");
  u.prefix = normalized_prefix(rest.substr(slash));
  size_t start = 0;
  while (start <= members.size()) {
    const size_t comma = members.find(',', start);
    const std::string m =
        members.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (m.empty()) bad(text, "an empty etcd member");
    try {
      u.etcd_endpoints.push_back(net::parse_endpoint(m, kEtcdPort).str());
    } catch (const InvalidArgument& e) {
      bad(text, e.message());
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return u;
}

}  // namespace

StoreUrl parse_store_url(const std::string& text) {
  if (text.starts_with(kEtcd)) return parse_etcd(text, kEtcd);
  if (text.starts_with(kEtcdHttps)) return parse_etcd(text, kEtcdHttps);
  if (text.find("://") != std::string::npos) bad(text, "not HOST:PORT, etcd://... or etcd+https://...");
  StoreUrl u;
  try {
    u.tcp = net::parse_endpoint(text);
  } catch (const InvalidArgument& e) {
    bad(text, e.message());
  }
  if (u.tcp.port == 0) bad(text, "no port");
  return u;
}

std::string etcd_store_url(const std::vector<std::string>& endpoints, const std::string& protocol,
                           const std::string& prefix) {
  bool https = protocol == "https";
  std::string members;
  for (std::string e : endpoints) {
    if (e.starts_with("https://")) {
      https = true;
      e = e.substr(8);
    } else if (e.starts_with("http://")) {
      e = e.substr(7);
    }
    members += (members.empty() ? "" : ",") + e;
  }
  return std::string(https ? kEtcdHttps : kEtcd) + members + normalized_prefix(prefix);
}

EtcdClientOptions etcd_client_options(const StoreUrl& url) {
  EtcdClientOptions o;
  o.endpoints = url.etcd_endpoints;
  o.protocol = url.protocol;
  o.cacert = settings::get_or(settings::kEtcdCacert, "");
  o.cert = settings::get_or(settings::kEtcdCert, "");
  o.key = settings::get_or(settings::kEtcdKey, "");
  return o;
}

}  // namespace ddp::rdzv
