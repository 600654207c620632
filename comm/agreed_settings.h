#pragma once
// Group-scoped settings (settings::Scope::kGroup) are agreed once, at group creation, through
// the group's store: rank 0 publishes its values, every other rank compares its own, and after
// a barrier every rank learns whether any differed. A difference fails every rank with an
// InvalidArgument naming the variable, the rank and both values, never a hang or a wrong
// result later. Also carries a backend's own decisions from rank 0 to the others
// (publish/receive). Ranks call it in the same order; blocking calls are bounded by `timeout`.
#include <map>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::comm {

struct AgreementOptions {
  int rank = 0;
  int size = 1;
  std::string group = "world";   // for errors
  std::string key = "settings";  // the store keys' prefix
  Millis timeout = kUseDefault;
};

// Name -> value (settings::effective) of every group-scoped setting of `section`.
using SettingValues = std::map<std::string, std::string>;
SettingValues group_values(settings::Section section);

// Throws (every rank alike) when a rank's `mine` differs from rank 0's.
void agree_settings(rdzv::Store& store, const AgreementOptions& options, const SettingValues& mine);

// "name=value" lines, and back (InvalidArgument for a line without '=').
std::string encode_values(const SettingValues& values);
SettingValues decode_values(const std::string& text);

}  // namespace ddp::comm
