#include "cli/config_file.h"

#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "cli/option_specs.h"
#include "cli/suggest.h"
#include "common/error.h"
#include "common/safe_json.h"

namespace ddp::cli {
namespace {

using json = safe_json::Json;

// A config is a page of settings: anything near these sizes is not one.
constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxConfigDepth = 16;

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
  std::vector<char> stack;        // '{' or '['
  std::vector<std::string> keys;  // key of each open container, as seen from its parent
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
        if (text[i] == '\\') {
          s += text[i++];
        }
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

std::vector<std::string> known_keys() {
  std::vector<std::string> out(kMetaKeys.begin(), kMetaKeys.end());
  for (const auto& s : option_specs()) {
    if (s.in_config) out.emplace_back(s.name);
  }
  return out;
}

// A JSON number as an int setting's text: whole numbers within int (3.0 and -0 included).
std::optional<std::string> int_text(const json& v) {
  auto n = safe_json::as_int(v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (!n) return std::nullopt;
  return std::to_string(*n);
}

// Converts one typed JSON value to the setting's text items; on a mismatch returns what is
// wrong ("must be ..., not ..."), with *bad_inner set to the inner key at fault for objects.
std::string to_items(const OptionSpec& spec, const json& v, std::vector<std::string>* items,
                     std::string* bad_inner) {
  const std::string expected = "must be " + std::string(kind_text(spec.kind)) + ", not ";
  auto mismatch = [&]() { return expected + safe_json::type_name(v); };
  auto out_of_range = [&]() {
    return "must be an integer in " + std::to_string(std::numeric_limits<int>::min()) + ".." +
           std::to_string(std::numeric_limits<int>::max()) + ", not " + safe_json::to_text(v, 64);
  };
  switch (spec.kind) {
    case ValueKind::kInt:
    case ValueKind::kIntOrString:
      if (v.is_string() && spec.kind == ValueKind::kIntOrString) {
        items->push_back(v.get<std::string>());
        return "";
      }
      if (!v.is_number()) return mismatch();
      if (auto text = int_text(v)) {
        items->push_back(*text);
        return "";
      }
      // A fraction is the wrong type; a whole number too large for an int is out of range.
      return v.is_number_float() && v.get<double>() != std::floor(v.get<double>()) ? mismatch()
                                                                                   : out_of_range();
    case ValueKind::kSeconds:
      if (!v.is_number()) return mismatch();
      items->push_back(safe_json::to_text(v));  // parse_seconds checks the range
      return "";
    case ValueKind::kString:
      if (!v.is_string()) return mismatch();
      items->push_back(v.get<std::string>());
      return "";
    case ValueKind::kBool:
      if (!v.is_boolean()) return mismatch();
      items->push_back(v.get<bool>() ? "true" : "false");
      return "";
    case ValueKind::kKeyValues:
      if (!v.is_object()) return mismatch();
      for (const auto& [k, val] : v.items()) {
        if (!val.is_string()) {
          *bad_inner = k;
          return "must be a string, not " + safe_json::type_name(val);
        }
        items->push_back(k + "=" + val.get<std::string>());
      }
      return "";
    case ValueKind::kStringList:
      if (!v.is_array() || v.empty()) return mismatch();
      for (const auto& word : v) {
        if (!word.is_string()) return expected + "an array holding " + safe_json::type_name(word);
        items->push_back(word.get<std::string>());
      }
      return "";
  }
  return mismatch();
}

int line_of(const std::vector<KeyPos>& pos, const std::string& parent, const std::string& key) {
  for (const auto& p : pos) {
    if (p.parent == parent && p.key == key) return p.line;
  }
  return 0;
}

std::string where(const std::string& path, int line) { return path + " line " + std::to_string(line); }

}  // namespace

SettingLayer parse_config(const std::string& text, const std::string& path) {
  const json doc = safe_json::parse(text, path, {.max_bytes = kMaxConfigBytes, .max_depth = kMaxConfigDepth});
  if (!doc.is_object()) {
    DDP_THROW(InvalidArgument, path, ": a config must be a JSON object of settings, not ",
              safe_json::type_name(doc));
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
    if (std::string wrong = to_items(*spec, value, &sv.items, &bad_inner); !wrong.empty()) {
      if (!bad_inner.empty()) {
        DDP_THROW(InvalidArgument, where(path, line_of(positions, key, bad_inner)), ": key '", key, ".",
                  bad_inner, "' ", wrong);
      }
      DDP_THROW(InvalidArgument, where(path, line), ": key '", key, "' ", wrong);
    }
    layer[key] = std::move(sv);
  }
  return layer;
}

SettingLayer load_config_file(const std::string& path) {
  std::string why;
  auto head = safe_json::read_file_head(path, {.max_bytes = kMaxConfigBytes}, &why);
  if (!head) DDP_THROW(InvalidArgument, "cannot read config file '", path, "': ", why);
  if (head->truncated) {
    DDP_THROW(InvalidArgument, "config file '", path, "' is larger than ", kMaxConfigBytes,
              " bytes: not a ddp-launch config");
  }
  return parse_config(head->bytes, path);
}

}  // namespace ddp::cli
