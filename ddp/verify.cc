#include "ddp/verify.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/error.h"
#include "ddp/host_collectives.h"

namespace ddp {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every rank's text, through two all_gathers (lengths, then bytes padded to the longest).
std::vector<std::string> gather_texts(comm::ProcessGroup& group, const std::string& text) {
  const int n = group.size();
  int64_t len = static_cast<int64_t>(text.size());
  std::vector<int64_t> lens(n);
  all_gather_host(group, comm::view(&len, 1), comm::view(lens.data(), lens.size()));
  size_t max_len = static_cast<size_t>(*std::max_element(lens.begin(), lens.end()));
  std::vector<uint8_t> mine(max_len, 0), all(max_len * n, 0);
  std::copy(text.begin(), text.end(), mine.begin());
  all_gather_host(group, comm::view(mine.data(), mine.size()), comm::view(all.data(), all.size()));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    const char* begin = reinterpret_cast<const char*>(all.data()) + r * max_len;
    out.emplace_back(begin, static_cast<size_t>(lens[r]));
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks [";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return ranks.size() == 1 ? s : s + "]";
}

}  // namespace

uint64_t fnv1a(const std::string& text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void verify_same_across_ranks(comm::ProcessGroup& group, const std::vector<std::string>& lines,
                              const std::string& what) {
  if (group.size() == 1) return;
  const std::string text = join_lines(lines);
  int64_t hash = static_cast<int64_t>(fnv1a(text));
  std::vector<int64_t> hashes(group.size());
  all_gather_host(group, comm::view(&hash, 1), comm::view(hashes.data(), hashes.size()));
  if (std::all_of(hashes.begin(), hashes.end(), [&](int64_t h) { return h == hashes[0]; })) return;

  std::vector<std::vector<std::string>> per_rank;
  for (const auto& t : gather_texts(group, text)) per_rank.push_back(split_lines(t));
  size_t longest = 0;
  for (const auto& l : per_rank) longest = std::max(longest, l.size());
  for (size_t i = 0; i < longest; ++i) {
    std::map<std::string, std::vector<int>> by_value;  // the line (or its absence) -> ranks
    for (int r = 0; r < group.size(); ++r) {
      by_value[i < per_rank[r].size() ? "'" + per_rank[r][i] + "'" : "nothing"].push_back(r);
    }
    if (by_value.size() == 1) continue;
    std::string detail;
    for (const auto& [value, ranks] : by_value) {
      detail +=
          (detail.empty() ? "" : "; ") + rank_list(ranks) + (ranks.size() == 1 ? " has " : " have ") + value;
    }
    DDP_THROW(InvalidArgument, what, ": ranks registered different parameters: entry ", i,
              " differs: ", detail);
  }
  DDP_THROW(InvalidArgument, what, ": ranks registered different parameters (hashes differ; texts equal?)");
}

}  // namespace ddp
