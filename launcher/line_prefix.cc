#include "launcher/line_prefix.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>

#include "common/settings.h"

namespace ddp::launcher {
namespace {

// Foreground colours that read on dark and light terminals alike.
constexpr std::array<const char*, 6> kPalette = {"\x1b[36m", "\x1b[33m", "\x1b[35m",
                                                 "\x1b[32m", "\x1b[34m", "\x1b[31m"};
constexpr const char* kReset = "\x1b[0m";

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

std::string value_of(const std::string& name, const LinePrefixOptions& o, bool* known) {
  *known = true;
  if (name == "role_name") return o.role;
  if (name == "rank") return std::to_string(o.rank);
  if (name == "local_rank") return std::to_string(o.local_rank);
  *known = false;
  return {};
}

std::string substitute(const std::string& t, const LinePrefixOptions& o) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '$' || i + 1 == t.size()) {
      out += t[i];
      continue;
    }
    if (t[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    const bool braced = t[i + 1] == '{';
    size_t start = i + (braced ? 2 : 1), end = start;
    while (end < t.size() && is_name_char(t[end])) ++end;
    bool known = false;
    std::string value = value_of(t.substr(start, end - start), o, &known);
    if (!known || end == start || (braced && (end == t.size() || t[end] != '}'))) {
      out += t[i];  // not a placeholder we fill: kept as written
      continue;
    }
    out += value;
    i = braced ? end : end - 1;
  }
  return out;
}

}  // namespace

std::string line_prefix(const LinePrefixOptions& options) {
  std::string text = options.template_text.empty()
                         ? "[" + options.role + std::to_string(options.local_rank) + "]:"
                         : substitute(options.template_text, options);
  if (!options.colour) return text;
  const size_t colour =
      static_cast<size_t>(options.local_rank < 0 ? 0 : options.local_rank) % kPalette.size();
  return kPalette[colour] + text + kReset;
}

bool colour_wanted(int fd) {
  if (settings::get(settings::kNoColor)) return false;
  return ::isatty(fd) == 1;
}

}  // namespace ddp::launcher
