#include "launcher/error_file.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

constexpr size_t kMaxErrorFileBytes = 1 << 20;  // a worker cannot make the launcher load GBs

long as_long(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<long>();
  if (v.is_number()) return static_cast<long>(v.get<double>());
  if (v.is_string()) {
    try {
      return std::stol(v.get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

std::string as_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::optional<ErrorFileContent> read_error_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  text.resize(kMaxErrorFileBytes);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.empty()) return std::nullopt;

  ErrorFileContent out;
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    out.message = text;  // not PyTorch's format: show what the worker wrote
    return out;
  }
  const auto& message = doc["message"];
  if (message.is_object()) {
    if (message.contains("message")) out.message = as_text(message["message"]);
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const auto& extra = message["extraInfo"];
      if (extra.contains("py_callstack")) out.traceback = as_text(extra["py_callstack"]);
      if (extra.contains("timestamp")) out.timestamp = as_long(extra["timestamp"]);
    }
  } else {
    out.message = as_text(message);
    if (doc.contains("timestamp")) out.timestamp = as_long(doc["timestamp"]);
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
  std::string head = text.substr(0, std::min(end, max_bytes));
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  if (head.size() < text.size() && text.find_first_not_of("\r\n", head.size()) != std::string::npos) {
    head += "\n...";
  }
  return head;
}

}  // namespace ddp::launcher
