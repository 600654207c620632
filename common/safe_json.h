#pragma once
// Untrusted JSON and the files it comes in (a config file, a worker's error file, a node
// registration from the store): input that gets a clear error, never a crash or a hang.
// read_file_head reads at most max_bytes and, when told, never blocks on a FIFO or follows a
// symlink; parse refuses nesting deeper than max_depth *before* nlohmann builds a document (its
// dump, copy and compare recurse), and turns every nlohmann exception into one InvalidArgument
// naming the source, line and column; the getters are typed and name the key and the source.
// Everything here throws InvalidArgument (or std::bad_alloc) and nothing else; the try_
// variants never throw. Internal header (not installed): it exposes nlohmann::json.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::safe_json {

using Json = nlohmann::json;

struct Limits {
  size_t max_bytes = 1 << 20;  // larger text is refused, not parsed
  int max_depth = 64;          // objects and arrays nested deeper are refused
};

struct ReadOptions {
  size_t max_bytes = 1 << 20;
  bool regular_only = false;    // refuse FIFOs, devices, directories (never blocks on open)
  bool follow_symlinks = true;  // false: O_NOFOLLOW (a symlink is refused)
};

struct FileHead {
  std::string bytes;       // at most max_bytes
  bool truncated = false;  // the file holds more than max_bytes
};

// The first max_bytes of a file; nullopt when it cannot be opened or read, or is refused by
// the options (*error says why). Never throws but std::bad_alloc.
std::optional<FileHead> read_file_head(const std::string& path, const ReadOptions& options,
                                       std::string* error = nullptr);

// Parses `text` named `source` in messages ("job.json", "node registration 'k'").
Json parse(std::string_view text, const std::string& source, const Limits& limits = {});
// The same without exceptions: nullopt and *error set on failure.
std::optional<Json> try_parse(std::string_view text, const Limits& limits = {}, std::string* error = nullptr);

// 1-based line and column of a byte offset.
struct TextPosition {
  int line = 1;
  int column = 1;
};
TextPosition position_of(std::string_view text, size_t byte);

// "an integer", "a number", "a string", "an object", "an array", "a boolean", "null".
std::string type_name(const Json& v);
// A whole number in [lo, hi] (3.0 is 3), or nullopt (wrong type, fraction, out of range).
std::optional<int64_t> as_int(const Json& v, int64_t lo = std::numeric_limits<int64_t>::min(),
                              int64_t hi = std::numeric_limits<int64_t>::max());
// Any value as text for a message: a string as it is, others as compact JSON; invalid UTF-8
// replaced, cut to max_bytes.
std::string to_text(const Json& v, size_t max_bytes = 1 << 20);

// Typed members of an object; InvalidArgument "<source>: key 'k' ..." when missing or mistyped.
const Json& member(const Json& object, const std::string& key, const std::string& source);
std::string get_string(const Json& object, const std::string& key, const std::string& source);
int64_t get_int(const Json& object, const std::string& key, const std::string& source,
                int64_t lo = std::numeric_limits<int64_t>::min(),
                int64_t hi = std::numeric_limits<int64_t>::max());
std::vector<std::string> get_strings(const Json& object, const std::string& key, const std::string& source);

}  // namespace ddp::safe_json
