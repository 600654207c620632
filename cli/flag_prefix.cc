#include "cli/flag_prefix.h"

#include <algorithm>

#include "common/error.h"

namespace ddp::cli {
namespace {

const FlagSpelling* exact(const std::string& word, const std::vector<FlagSpelling>& flags) {
  auto it = std::find_if(flags.begin(), flags.end(), [&](const FlagSpelling& f) { return f.flag == word; });
  return it == flags.end() ? nullptr : &*it;
}

// The options whose long spellings start with `word`, each once, in table order.
std::vector<const FlagSpelling*> candidates(const std::string& word, const std::vector<FlagSpelling>& flags) {
  std::vector<const FlagSpelling*> out;
  for (const auto& f : flags) {
    if (!f.flag.starts_with("--") || !f.flag.starts_with(word)) continue;
    bool seen =
        std::any_of(out.begin(), out.end(), [&](const FlagSpelling* o) { return o->option == f.option; });
    if (!seen) out.push_back(&f);
  }
  return out;
}

const FlagSpelling& first_spelling(const std::string& option, const std::vector<FlagSpelling>& flags) {
  return *std::find_if(flags.begin(), flags.end(), [&](const FlagSpelling& f) { return f.option == option; });
}

}  // namespace

std::vector<std::string> expand_flag_prefixes(const std::vector<std::string>& args,
                                              const std::vector<FlagSpelling>& flags) {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& arg = out[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;  // PROGRAM (or '--') starts here
    const size_t eq = arg.find('=');
    const std::string word = arg.substr(0, eq);
    const FlagSpelling* f = exact(word, flags);
    if (f == nullptr && word.starts_with("--") && word.size() > 2) {
      auto found = candidates(word, flags);
      if (found.size() > 1) {
        std::string list;
        for (const auto* c : found) list += (list.empty() ? "" : ", ") + c->flag;
        DDP_THROW(InvalidArgument, "ambiguous option '", word, "' could match ", list,
                  " (see ddp-launch --help)");
      }
      if (found.size() == 1) {
        f = &first_spelling(found.front()->option, flags);
        out[i] = f->flag + (eq == std::string::npos ? "" : arg.substr(eq));
      }
    }
    // A value given as the next word is not an option: skip it.
    if (f != nullptr && f->takes_value && eq == std::string::npos) ++i;
  }
  return out;
}

}  // namespace ddp::cli
