#include "launcher/timeline_merge.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/text.h"
#include "common/timeline_path.h"

namespace ddp::launcher {
namespace {

// The events of one rank's file: what lies between its '[' and its ']' (absent when the
// worker was killed), without a trailing separator.
std::string events_of(const std::string& text) {
  size_t b = text.find('[');
  if (b == std::string::npos) return "";
  std::string body = text.substr(b + 1);
  while (!body.empty() &&
         (body.back() == ']' || body.back() == ',' || std::isspace(static_cast<unsigned char>(body.back()))))
    body.pop_back();
  return trim(body);
}

// "trace.rank12.json" -> 12 when it is `prefix` + digits + ".json"; else -1.
int rank_of(const std::string& name, const std::string& prefix) {
  const std::string suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(digits);
}

}  // namespace

std::vector<int> merge_timelines(const std::string& path, std::filesystem::file_time_type since) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string rank0 = fs::path(timeline_rank_path(target.filename().string(), 0)).filename().string();
  const std::string prefix = rank0.substr(0, rank0.rfind(".rank") + 5);  // "trace.rank"
  std::map<int, std::string> events;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int rank = rank_of(entry.path().filename().string(), prefix);
    if (rank < 0 || !entry.is_regular_file(ec) || entry.last_write_time(ec) < since) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string body = events_of(text.str());
    if (!body.empty()) events[rank] = std::move(body);
  }
  std::vector<int> ranks;
  if (events.empty()) return ranks;
  const std::string tmp = path + ".merging";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "[\n";
    bool first = true;
    for (const auto& [rank, body] : events) {
      out << (first ? "" : ",\n") << body;
      first = false;
      ranks.push_back(rank);
    }
    out << "\n]\n";
    if (!out.good()) DDP_THROW_ERRNO("write merged timeline '", tmp, "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) DDP_THROW_ERRNO("rename '", tmp, "' to '", path, "'");
  return ranks;
}

}  // namespace ddp::launcher
