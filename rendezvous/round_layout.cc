#include "rendezvous/round_layout.h"

#include <optional>
#include <sstream>

#include "common/error.h"
#include "common/safe_json.h"

namespace ddp::rdzv {
namespace {

constexpr int64_t kMaxCount = 1 << 20;  // nodes, nproc, restarts: far above any job

RoundLayout layout_of(const nlohmann::json& j, const std::string& source, int nnodes) {
  RoundLayout l;
  l.master_addr = safe_json::get_string(j, "master_addr", source);
  l.restarts = static_cast<int>(safe_json::get_int(j, "restarts", source, -1, kMaxCount));
  if (j.is_object() && j.contains("master_port"))
    l.master_port = static_cast<int>(safe_json::get_int(j, "master_port", source, 1, 65535));
  const auto& nodes = safe_json::member(j, "nodes", source);
  if (!nodes.is_array() || nodes.size() != static_cast<size_t>(nnodes))
    DDP_THROW(InvalidArgument, source, ": 'nodes' is not an array of ", nnodes, " nodes");
  for (const auto& n : nodes) {
    if (!n.is_array() || n.size() != 3 || !n[0].is_string() || !n[1].is_string() ||
        !n[2].is_number_integer() || n[2].get<int64_t>() < 1 || n[2].get<int64_t>() > kMaxCount)
      DDP_THROW(InvalidArgument, source, ": a node is not [host, id, nproc]");
    NodeInfo node;
    node.host = n[0].get<std::string>();
    node.id = n[1].get<std::string>();
    node.nproc = static_cast<int>(n[2].get<int64_t>());
    l.nodes.push_back(std::move(node));
  }
  return l;
}

}  // namespace

std::string encode_shape(const RoundShape& s) {
  return detail::str(s.nnodes, " ", s.dynamic ? "dynamic" : "static", " ", s.host);
}

RoundShape decode_shape(const std::string& key, const std::string& text) {
  std::istringstream in(text);
  RoundShape s;
  std::string mode;
  if (!(in >> s.nnodes >> mode >> s.host) || s.nnodes < 1 || (mode != "dynamic" && mode != "static"))
    DDP_THROW(StoreError, "node rendezvous: the round's shape under '", key, "' is '", text.substr(0, 64),
              "'");
  s.dynamic = mode == "dynamic";
  return s;
}

std::string encode_layout(const RoundLayout& l) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : l.nodes) nodes.push_back({n.host, n.id, n.nproc});
  nlohmann::json j{{"master_addr", l.master_addr}, {"restarts", l.restarts}, {"nodes", nodes}};
  if (l.master_port > 0) j["master_port"] = l.master_port;
  return j.dump();
}

std::string encode_layout_failure(const std::string& why) { return nlohmann::json{{"failed", why}}.dump(); }

RoundLayout decode_layout(const std::string& key, const Bytes& bytes, int nnodes) {
  const std::string source = "node rendezvous: layout under '" + key + "'";
  std::optional<std::string> failed;
  RoundLayout l;
  try {
    const auto j =
        safe_json::parse(Store::to_string(bytes), source, {.max_bytes = kMaxValueSize, .max_depth = 4});
    if (j.is_object() && j.contains("failed")) {
      failed = safe_json::get_string(j, "failed", source);
    } else {
      l = layout_of(j, source, nnodes);
    }
  } catch (const InvalidArgument& e) {
    DDP_THROW(StoreError, e.message());
  }
  if (failed)
    DDP_THROW(InvalidArgument, failed->empty() ? source + ": the round was marked broken" : *failed);
  return l;
}

std::string encode_closed(int64_t nodes) { return std::to_string(nodes); }

int64_t decode_closed(const std::string& key, const std::string& text) {
  try {
    size_t used = 0;
    const int64_t n = std::stoll(text, &used);
    if (used == text.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  DDP_THROW(StoreError, "elastic rendezvous: the node count under '", key, "' is '", text.substr(0, 32), "'");
}

}  // namespace ddp::rdzv
