#pragma once
// "did you mean ...?" for mistyped flags, config keys and rdzv-conf keys: the closest known
// name by edit distance, when it is close enough to be a plausible typo.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::cli {

// Levenshtein distance (insert, delete, substitute, each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` ('-' and '_' compare equal), if within max(2, len/3) edits.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ddp::cli
