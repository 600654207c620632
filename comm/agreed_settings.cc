#include "comm/agreed_settings.h"

#include "common/error.h"

namespace ddp::comm {
namespace {

std::string shown(const std::string& value) { return value.empty() ? "unset" : "'" + value + "'"; }

// The first difference between a rank's values and rank 0's, as an error text; empty if none.
std::string difference(const AgreementOptions& o, const SettingValues& mine, const SettingValues& root) {
  for (const auto& [name, value] : mine) {
    auto it = root.find(name);
    const std::string theirs = it == root.end() ? "" : it->second;
    if (theirs == value) continue;
    return detail::str("group '", o.group, "': ", name, " must be the same on every rank, but rank ", o.rank,
                       " has ", shown(value), " and rank 0 has ", shown(theirs));
  }
  return "";
}

}  // namespace

SettingValues group_values(settings::Section section) {
  SettingValues out;
  for (const settings::Setting* s : settings::all()) {
    if (s->section == section && s->scope == settings::Scope::kGroup)
      out[std::string(s->name)] = settings::effective(*s);
  }
  return out;
}

std::string encode_values(const SettingValues& values) {
  std::string out;
  for (const auto& [name, value] : values) out.append(name).append("=").append(value).append("\n");
  return out;
}

SettingValues decode_values(const std::string& text) {
  SettingValues out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(at, nl - at);
    const size_t eq = line.find('=');
    if (eq == std::string::npos) DDP_THROW(InvalidArgument, "malformed setting line '", line, "'");
    out[line.substr(0, eq)] = line.substr(eq + 1);
    at = nl + 1;
  }
  return out;
}

void agree_settings(rdzv::Store& store, const AgreementOptions& o, const SettingValues& mine) {
  const std::string root_key = o.key + "/0", mismatch_key = o.key + "/mismatch";
  const std::string arrived_key = o.key + "/arrived", all_key = o.key + "/all";
  std::string mine_wrong;
  if (o.rank == 0) {
    store.set(root_key, encode_values(mine));
  } else {
    mine_wrong = difference(o, mine, decode_values(store.get_string(root_key, o.timeout)));
    if (!mine_wrong.empty()) store.set(mismatch_key, mine_wrong);
  }
  // A counting barrier: one key to wait for, whatever the group's size.
  if (store.add(arrived_key, 1) == o.size) store.set(all_key, "1");
  store.wait({all_key}, o.timeout);
  if (!mine_wrong.empty()) DDP_THROW(InvalidArgument, mine_wrong);
  if (store.check({mismatch_key})) DDP_THROW(InvalidArgument, store.get_string(mismatch_key, o.timeout));
}

}  // namespace ddp::comm
