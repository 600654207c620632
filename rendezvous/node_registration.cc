#include "rendezvous/node_registration.h"

#include <sstream>

#include "common/auth.h"
#include "common/error.h"
#include "common/safe_json.h"

namespace ddp::rdzv {

using json = safe_json::Json;

std::string encode_registration(const Registration& r) {
  json j = {{"host", r.info.host},   {"addresses", r.info.addresses},
            {"nproc", r.info.nproc}, {"requested_rank", r.info.requested_rank},
            {"nnodes", r.nnodes},    {"nonce", r.nonce},
            {"id", r.info.id},       {"restarts", r.info.restarts}};
  if (r.info.master_port > 0) j["master_port"] = r.info.master_port;
  return j.dump();
}

Registration decode_registration(const std::string& key, const Bytes& bytes) {
  const std::string source = "node rendezvous: registration under '" + key + "'";
  try {
    const json j = safe_json::parse(Store::to_string(bytes), source, {.max_bytes = 64 << 10, .max_depth = 4});
    constexpr int64_t kMax = 1 << 20;  // nodes or workers per node: sums stay far from overflow
    Registration r;
    r.info.host = safe_json::get_string(j, "host", source);
    r.info.addresses = safe_json::get_strings(j, "addresses", source);
    r.info.nproc = static_cast<int>(safe_json::get_int(j, "nproc", source, 1, kMax));
    r.info.requested_rank = static_cast<int>(safe_json::get_int(j, "requested_rank", source, -1, kMax));
    r.nnodes = static_cast<int>(safe_json::get_int(j, "nnodes", source, 1, kMax));
    r.nonce = safe_json::get_string(j, "nonce", source);
    if (j.is_object() && j.contains("id")) r.info.id = safe_json::get_string(j, "id", source);
    if (j.is_object() && j.contains("restarts"))
      r.info.restarts = static_cast<int>(safe_json::get_int(j, "restarts", source, -1, kMax));
    if (j.is_object() && j.contains("master_port"))  // from launchers of this version on
      r.info.master_port = static_cast<int>(safe_json::get_int(j, "master_port", source, 1, 65535));
    return r;
  } catch (const InvalidArgument& e) {
    DDP_THROW(StoreError, e.message());
  }
}

std::string registration_nonce() {
  std::ostringstream os;
  os << std::hex << auth::random_u64();
  return os.str();
}

std::string describe_node(int rank, const std::string& host) {
  return "node " + std::to_string(rank) + " (" + host + ")";
}

}  // namespace ddp::rdzv
