#include "cli/settings.h"

#include "cli/option_specs.h"

namespace ddp::cli {
namespace {

std::string key_of(const std::string& item) { return item.substr(0, item.find('=')); }

void merge_key_values(SettingValue& into, const SettingValue& from) {
  for (const auto& item : from.items) {
    std::erase_if(into.items, [&](const std::string& old) { return key_of(old) == key_of(item); });
    into.items.push_back(item);
  }
  into.source = from.source;
}

}  // namespace

SettingLayer merge_layers(const std::vector<SettingLayer>& lowest_first) {
  SettingLayer out;
  for (const auto& layer : lowest_first) {
    for (const auto& [name, value] : layer) {
      const OptionSpec* spec = find_option(name);
      auto it = out.find(name);
      if (spec && spec->kind == ValueKind::kKeyValues && it != out.end()) {
        merge_key_values(it->second, value);
      } else {
        out[name] = value;
      }
    }
  }
  return out;
}

}  // namespace ddp::cli
