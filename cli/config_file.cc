#include "cli/config_file.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/option_specs.h"
#include "cli/suggest.h"
#include "common/error.h"

namespace ddp::cli {
namespace {

using nlohmann::json;

// Keys a config may carry that are not settings: a schema reference and free text.
const std::set<std::string> kMetaKeys = {"$schema", "description"};

struct KeyPos {
  std::string parent;  // "" for top-level keys, else the top-level key it sits under
  std::string key;
  int line = 0;
};

// A small pass over (already valid) JSON text recording the line of every object key at depth 1
// and 2: nlohmann::json keeps no positions, and errors must name lines.
std::vector<KeyPos> key_positions(const std::string& text) {
  std::vector<KeyPos> out;
  std::vector<char> stack;          // '{' or '['
  std::vector<std::string> keys;    // key of each open container, as seen from its parent
  std::string last_string;
  int line = 1, string_line = 1;
  bool pending_key = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') ++line;
    if (c == '"') {
      std::string s;
      string_line = line;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') { s += text[i++]; }
        s += text[i];
      }
      last_string = s;
      pending_key = !stack.empty() && stack.back() == '{';
      continue;
    }
    if (c == ':' && pending_key) {
      if (stack.size() <= 2) out.push_back({stack.size() == 2 ? keys.back() : "", last_string, string_line});
      pending_key = false;
      continue;
    }
    if (c == '{' || c == '[') {
      keys.push_back(stack.size() == 1 ? last_string : "");
      stack.push_back(c);
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      if (!keys.empty()) keys.pop_back();
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') pending_key = false;
  }
  return out;
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return std::string("a") + (v.is_array() || v.is_object() ? "n " : " ") + v.type_name();
}

std::vector<std::string> known_keys() {
  std::vector<std::string> out(kMetaKeys.begin(), kMetaKeys.end());
  for (const auto& s : option_specs()) {
    if (s.in_config) out.emplace_back(s.name);
  }
  return out;
}

// Converts one typed JSON value to the setting's text items, or returns false on a type mismatch.
bool to_items(const OptionSpec& spec, const json& v, std::vector<std::string>* items, std::string* bad_inner) {
  switch (spec.kind) {
    case ValueKind::kInt:
      if (!v.is_number_integer()) return false;
      items->push_back(v.dump());
      return true;
    case ValueKind::kSeconds:
      if (!v.is_number()) return false;
      items->push_back(v.dump());
      return true;
    case ValueKind::kString:
      if (!v.is_string()) return false;
      items->push_back(v.get<std::string>());
      return true;
    case ValueKind::kIntOrString:
      if (v.is_number_integer()) items->push_back(v.dump());
      else if (v.is_string()) items->push_back(v.get<std::string>());
      else return false;
      return true;
    case ValueKind::kBool:
      if (!v.is_boolean()) return false;
      items->push_back(v.get<bool>() ? "true" : "false");
      return true;
    case ValueKind::kKeyValues:
      if (!v.is_object()) return false;
      for (const auto& [k, val] : v.items()) {
        if (!val.is_string()) {
          *bad_inner = k;
          return false;
        }
        items->push_back(k + "=" + val.get<std::string>());
      }
      return true;
    case ValueKind::kStringList:
      if (!v.is_array() || v.empty()) return false;
      for (const auto& word : v) {
        if (!word.is_string()) return false;
        items->push_back(word.get<std::string>());
      }
      return true;
  }
  return false;
}

int line_of(const std::vector<KeyPos>& pos, const std::string& parent, const std::string& key) {
  for (const auto& p : pos) {
    if (p.parent == parent && p.key == key) return p.line;
  }
  return 0;
}

std::string where(const std::string& path, int line) {
  return path + " line " + std::to_string(line);
}

}  // namespace

SettingLayer parse_config(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    size_t upto = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1, col = 1;
    for (size_t i = 0; i < upto; ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string msg = e.what();
    if (auto p = msg.find(": "); p != std::string::npos) msg = msg.substr(p + 2);
    DDP_THROW(InvalidArgument, path, " line ", line, ", column ", col, ": malformed JSON: ", msg);
  }
  if (!doc.is_object()) {
    DDP_THROW(InvalidArgument, path, ": a config must be a JSON object of settings, not ", type_name(doc));
  }
  const auto positions = key_positions(text);
  std::set<std::string> seen;
  for (const auto& p : positions) {
    if (!p.parent.empty()) continue;
    if (!seen.insert(p.key).second) {
      DDP_THROW(InvalidArgument, where(path, p.line), ": key '", p.key, "' appears twice");
    }
  }
  SettingLayer layer;
  for (const auto& [key, value] : doc.items()) {
    const int line = line_of(positions, "", key);
    if (kMetaKeys.count(key)) continue;
    const OptionSpec* spec = find_option(key);
    if (spec == nullptr || !spec->in_config) {
      DDP_THROW(InvalidArgument, where(path, line), ": unknown key '", key, "'",
                did_you_mean(key, known_keys()));
    }
    SettingValue sv;
    sv.source = where(path, line) + " (key '" + key + "')";
    std::string bad_inner;
    if (!to_items(*spec, value, &sv.items, &bad_inner)) {
      if (!bad_inner.empty()) {
        DDP_THROW(InvalidArgument, where(path, line_of(positions, key, bad_inner)), ": key '", key,
                  ".", bad_inner, "' must be a string, not ", type_name(value[bad_inner]));
      }
      DDP_THROW(InvalidArgument, where(path, line), ": key '", key, "' must be ",
                kind_text(spec->kind), ", not ", type_name(value));
    }
    layer[key] = std::move(sv);
  }
  return layer;
}

SettingLayer load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) DDP_THROW(InvalidArgument, "cannot read config file '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path);
}

}  // namespace ddp::cli
