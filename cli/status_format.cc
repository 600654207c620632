#include "cli/status_format.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ddp::cli {
namespace {

using rdzv::NodeLiveness;
using rdzv::NodeStatus;

std::string seconds(Millis d) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << static_cast<double>(d.count()) / 1000.0 << " s";
  return os.str();
}

std::string ranks_text(const NodeStatus& n) {
  if (n.nproc == 1) return std::to_string(n.rank_offset);
  return std::to_string(n.rank_offset) + "-" + std::to_string(n.rank_offset + n.nproc - 1);
}

std::string liveness_text(const NodeStatus& n) {
  std::string out = rdzv::to_string(n.liveness);
  if (n.liveness == NodeLiveness::kAlive && n.last_seen)
    return out + " (seen " + seconds(*n.last_seen) + " ago or less)";
  if (!n.liveness_detail.empty()) out += " (" + n.liveness_detail + ")";
  return out;
}

// Rows padded to each column's widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t i = 0; i < r.size(); ++i)
      line += " " + r[i] + std::string(i + 1 < r.size() ? width[i] - r[i].size() + 1 : 0, ' ');
    out += line + "\n";
  }
  return out;
}

std::string node_table(const std::vector<NodeStatus>& nodes, bool ranked) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({ranked ? "node" : "arrival", "host", "id"});
  if (ranked) rows.back().push_back("ranks");
  rows.back().insert(rows.back().end(), {"nproc", "liveness"});
  for (const auto& n : nodes) {
    rows.push_back({std::to_string(n.node_rank), n.host, n.id.empty() ? "-" : n.id});
    if (ranked) rows.back().push_back(ranks_text(n));
    rows.back().insert(rows.back().end(), {std::to_string(n.nproc), liveness_text(n)});
  }
  return table(rows);
}

nlohmann::json node_json(const NodeStatus& n) {
  return {{"node_rank", n.node_rank},
          {"host", n.host},
          {"id", n.id},
          {"nproc", n.nproc},
          {"rank_offset", n.rank_offset},
          {"ranks", {n.rank_offset, n.rank_offset + n.nproc - 1}},
          {"liveness", rdzv::to_string(n.liveness)},
          {"last_seen_s",
           n.last_seen ? nlohmann::json(static_cast<double>(n.last_seen->count()) / 1000.0) : nullptr},
          {"liveness_detail", n.liveness_detail}};
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string format_status_text(const rdzv::JobStatus& j, const StatusSource& src) {
  std::string out = "job '" + j.run_id + "' (" + src.backend + ": " + src.where + ")\n";
  if (j.ended) out += "the job ended: " + *j.ended + "\n";
  if (j.left && !j.ended) out += "a launcher of the job has left: it is finishing or finished\n";
  if (j.round < 0) {
    out += "no round has formed yet\n";
  } else {
    out += "round " + std::to_string(j.round) + ": " + std::to_string(j.nodes.size()) +
           " node(s), world size " + std::to_string(j.world_size) + ", " +
           (j.outcome ? "outcome: " + *j.outcome : "running (no outcome yet)") + "\n";
    out += node_table(j.nodes, true);
  }
  if (j.forming_round < 0) {
    out += "waiting to join: none\n";
  } else {
    out += "round " + std::to_string(j.forming_round) + " forming: " + std::to_string(j.waiting.size()) +
           " node(s) waiting to join\n";
    if (!j.waiting.empty()) out += node_table(j.waiting, false);
  }
  return out;
}

std::string format_status_json(const rdzv::JobStatus& j, const StatusSource& src) {
  nlohmann::json nodes = nlohmann::json::array(), waiting = nlohmann::json::array();
  for (const auto& n : j.nodes) nodes.push_back(node_json(n));
  for (const auto& n : j.waiting) waiting.push_back(node_json(n));
  nlohmann::json out = {
      {"run_id", j.run_id},
      {"backend", src.backend},
      {"store", src.where},
      {"round", j.round >= 0 ? nlohmann::json(j.round) : nlohmann::json(nullptr)},
      {"world_size", j.world_size},
      {"outcome", or_null(j.outcome)},
      {"nodes", nodes},
      {"forming_round", j.forming_round >= 0 ? nlohmann::json(j.forming_round) : nlohmann::json(nullptr)},
      {"waiting", waiting},
      {"ended", or_null(j.ended)},
      {"left", j.left}};
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ddp::cli
