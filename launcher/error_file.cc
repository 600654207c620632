#include "launcher/error_file.h"

#include "common/safe_json.h"

namespace ddp::launcher {
namespace {

using safe_json::Json;

// A worker cannot make the launcher load gigabytes, recurse without bound, or wait on a FIFO.
constexpr size_t kMaxErrorFileBytes = 1 << 20;
constexpr int kMaxErrorFileDepth = 32;

long as_long(const Json& v) {
  if (auto n = safe_json::as_int(v)) return static_cast<long>(*n);
  if (v.is_number_float()) return 0;  // a fraction or out of range: no usable time
  if (v.is_string()) {
    // PyTorch writes the timestamp as a string of digits.
    auto n = safe_json::try_parse(v.get<std::string>(), {.max_bytes = 32, .max_depth = 1});
    if (n) {
      if (auto i = safe_json::as_int(*n)) return static_cast<long>(*i);
    }
  }
  return 0;
}

// Length of the valid UTF-8 sequence at s[i], or 0 (overlong forms and surrogates are invalid).
size_t utf8_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;
  return n;
}

// What a worker wrote, made safe to print: invalid UTF-8 becomes U+FFFD and control characters
// other than newline, tab and CR become '?', so a summary never garbles a terminal or a log parser.
std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_length(text, i);
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (n == 1 && (c < 0x20 || c == 0x7F) && c != '\n' && c != '\t' && c != '\r')
      out += '?';
    else
      out.append(text, i, n);
    i += n;
  }
  return out;
}

const Json* find(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

std::optional<ErrorFileContent> read_error_file(const std::string& path) {
  auto head = safe_json::read_file_head(
      path, {.max_bytes = kMaxErrorFileBytes, .regular_only = true, .follow_symlinks = false});
  if (!head || head->bytes.empty()) return std::nullopt;

  ErrorFileContent out;
  std::optional<Json> doc;
  if (!head->truncated)
    doc =
        safe_json::try_parse(head->bytes, {.max_bytes = kMaxErrorFileBytes, .max_depth = kMaxErrorFileDepth});
  const Json* message = doc ? find(*doc, "message") : nullptr;
  if (message == nullptr) {
    out.message = std::move(head->bytes);  // not PyTorch's format: show what the worker wrote
    return out;
  }
  if (message->is_object()) {
    if (const Json* text = find(*message, "message")) out.message = safe_json::to_text(*text);
    if (const Json* extra = find(*message, "extraInfo")) {
      if (const Json* stack = find(*extra, "py_callstack")) out.traceback = safe_json::to_text(*stack);
      if (const Json* time = find(*extra, "timestamp")) out.timestamp = as_long(*time);
    }
  } else {
    out.message = safe_json::to_text(*message);
    if (const Json* time = find(*doc, "timestamp")) out.timestamp = as_long(*time);
  }
  return out;
}

std::string error_head(const ErrorFileContent& content, int max_lines, size_t max_bytes) {
  const std::string& text = content.traceback.empty() ? content.message : content.traceback;
  size_t end = 0;
  for (int line = 0; line < max_lines && end < text.size(); ++line) {
    size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
  }
  const size_t cut = std::min(end, max_bytes);
  // Cut, then cleaned: a cut through a multi-byte character becomes one U+FFFD.
  std::string head = printable(text.substr(0, cut));
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  if (cut < text.size() && text.find_first_not_of("\r\n", cut) != std::string::npos) head += "\n...";
  return head;
}

}  // namespace ddp::launcher
