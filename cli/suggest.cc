#include "cli/suggest.h"

#include <algorithm>
#include <numeric>

namespace ddp::cli {
namespace {

std::string normalize(std::string_view s) {
  std::string out(s);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string w = normalize(word);
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, w.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(w, normalize(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  auto c = closest(word, candidates);
  return c ? " (did you mean '" + *c + "'?)" : "";
}

}  // namespace ddp::cli
