#include "common/safe_json.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/fd.h"

namespace ddp::safe_json {
namespace {

// Where the nesting first passes max_depth (outside strings), or npos. A linear scan, so the
// check costs nothing a parse would not; text that is not JSON at all is left to the parser.
size_t too_deep_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return i;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " preamble (we say where ourselves).
std::string bare_message(const std::string& what) {
  std::string msg = what;
  if (!msg.starts_with("[json.exception.")) return msg;
  if (msg.starts_with("[json.exception.parse_error")) {
    if (auto p = msg.find(": "); p != std::string::npos) return msg.substr(p + 2);
  }
  if (auto q = msg.find("] "); q != std::string::npos) return msg.substr(q + 2);
  return msg;
}

std::string where(const std::string& source, std::string_view text, size_t byte) {
  const TextPosition pos = position_of(text, byte);
  return source + " line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column);
}

}  // namespace

std::optional<FileHead> read_file_head(const std::string& path, const ReadOptions& o, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<FileHead> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  int flags = O_RDONLY | O_CLOEXEC;
  if (!o.follow_symlinks) flags |= O_NOFOLLOW;
  if (o.regular_only) flags |= O_NONBLOCK;  // opening a FIFO must not wait for a writer
  Fd fd(::open(path.c_str(), flags));
  if (!fd) return fail(errno == ELOOP && !o.follow_symlinks ? "it is a symbolic link" : ::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(::strerror(errno));
  if (o.regular_only && !S_ISREG(st.st_mode)) return fail("it is not a regular file");
  if (S_ISDIR(st.st_mode)) return fail("it is a directory");
  FileHead head;
  // Up to one byte more than max_bytes tells "exactly max" from "more". The buffer starts at
  // the file's size (small error files stay cheap) and grows, if the file does, to that bound.
  const size_t limit = o.max_bytes + 1;
  const size_t expected = S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) + 1 : size_t{64} << 10;
  head.bytes.resize(std::min(limit, std::max<size_t>(expected, 4096)));
  size_t got = 0;
  while (true) {
    if (got == head.bytes.size()) {
      if (head.bytes.size() == limit) break;
      head.bytes.resize(std::min(limit, head.bytes.size() * 2));
    }
    ssize_t n = ::read(fd.get(), head.bytes.data() + got, head.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;  // a regular file never says this; be safe anyway
    if (n < 0) return fail(::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  head.truncated = got > o.max_bytes;
  head.bytes.resize(std::min(got, o.max_bytes));
  return head;
}

TextPosition position_of(std::string_view text, size_t byte) {
  TextPosition pos;
  const size_t upto = std::min(byte, text.size());
  for (size_t i = 0; i < upto; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

Json parse(std::string_view text, const std::string& source, const Limits& limits) {
  if (text.size() > limits.max_bytes) {
    DDP_THROW(InvalidArgument, source, ": ", text.size(), " bytes of JSON is more than the limit of ",
              limits.max_bytes);
  }
  if (size_t at = too_deep_at(text, limits.max_depth); at != std::string_view::npos) {
    DDP_THROW(InvalidArgument, where(source, text, at), ": JSON nested deeper than ", limits.max_depth,
              " levels");
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    DDP_THROW(InvalidArgument, where(source, text, e.byte == 0 ? 0 : e.byte - 1),
              ": malformed JSON: ", bare_message(e.what()));
  } catch (const Json::exception& e) {
    // A number out of range (1e400): nlohmann names the token but not its place; find it.
    std::string msg = bare_message(e.what());
    size_t at = std::string_view::npos;
    if (auto q = msg.find('\''); q != std::string::npos) {
      if (auto q2 = msg.find('\'', q + 1); q2 != std::string::npos && q2 > q + 1) {
        at = text.find(msg.substr(q + 1, q2 - q - 1));
      }
    }
    if (at == std::string_view::npos) DDP_THROW(InvalidArgument, source, ": malformed JSON: ", msg);
    DDP_THROW(InvalidArgument, where(source, text, at), ": malformed JSON: ", msg);
  }
}

std::optional<Json> try_parse(std::string_view text, const Limits& limits, std::string* error) {
  try {
    return parse(text, "JSON", limits);
  } catch (const InvalidArgument& e) {
    if (error != nullptr) *error = e.message();
    return std::nullopt;
  }
}

std::string type_name(const Json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_null()) return "null";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_boolean()) return "a boolean";
  return "a string";
}

std::optional<int64_t> as_int(const Json& v, int64_t lo, int64_t hi) {
  int64_t out = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exact in a double; anything at or past it (or NaN, or a fraction) is no int64.
    if (!std::isfinite(d) || d != std::floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
      return std::nullopt;
    }
    out = static_cast<int64_t>(d);
  } else {
    return std::nullopt;
  }
  if (out < lo || out > hi) return std::nullopt;
  return out;
}

std::string to_text(const Json& v, size_t max_bytes) {
  std::string s;
  try {
    s = v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const Json::exception& e) {
    s = std::string("<unprintable JSON: ") + e.what() + ">";
  }
  if (s.size() > max_bytes) s.resize(max_bytes);
  return s;
}

const Json& member(const Json& object, const std::string& key, const std::string& source) {
  if (!object.is_object())
    DDP_THROW(InvalidArgument, source, ": expected a JSON object, not ", type_name(object));
  auto it = object.find(key);
  if (it == object.end()) DDP_THROW(InvalidArgument, source, ": key '", key, "' is missing");
  return *it;
}

std::string get_string(const Json& object, const std::string& key, const std::string& source) {
  const Json& v = member(object, key, source);
  if (!v.is_string())
    DDP_THROW(InvalidArgument, source, ": key '", key, "' must be a string, not ", type_name(v));
  return v.get<std::string>();
}

int64_t get_int(const Json& object, const std::string& key, const std::string& source, int64_t lo,
                int64_t hi) {
  const Json& v = member(object, key, source);
  auto n = as_int(v, lo, hi);
  if (!n) {
    DDP_THROW(InvalidArgument, source, ": key '", key, "' must be an integer in ", lo, "..", hi, ", not ",
              v.is_number() ? to_text(v, 64) : type_name(v));
  }
  return *n;
}

std::vector<std::string> get_strings(const Json& object, const std::string& key, const std::string& source) {
  const Json& v = member(object, key, source);
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const auto& item : v) {
      if (!item.is_string()) break;
      out.push_back(item.get<std::string>());
    }
    if (out.size() == v.size()) return out;
  }
  DDP_THROW(InvalidArgument, source, ": key '", key, "' must be an array of strings, not ", type_name(v));
}

}  // namespace ddp::safe_json
