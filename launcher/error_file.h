#pragma once
// Reading a worker's TORCHELASTIC_ERROR_FILE after it failed. Understands PyTorch's @record
// format, {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp":
// "..."}}}, the plain {"message": "...", "timestamp": ...} form, and falls back to the raw text
// of a file that is not JSON. Never throws: a missing or unreadable file is "no error file".
// The file is the worker's, so it is input: only a regular file is read (a FIFO would block,
// a symlink could point anywhere), at most 1 MiB of it, JSON nested at most 32 deep; values of
// the wrong type are shown as JSON text; error_head makes what it returns printable.
#include <optional>
#include <string>

namespace ddp::launcher {

struct ErrorFileContent {
  std::string message;    // message.message (or message when it is a string)
  std::string traceback;  // extraInfo.py_callstack when present
  long timestamp = 0;     // seconds since the epoch as the worker wrote it, 0 when absent
};

std::optional<ErrorFileContent> read_error_file(const std::string& path);

// What a failure summary shows: the traceback if any, else the message, cut to at most
// max_lines lines (the head: where the Python traceback starts) and max_bytes bytes; invalid
// UTF-8 becomes U+FFFD and control characters other than newline, tab and CR '?'.
std::string error_head(const ErrorFileContent& content, int max_lines = 40, size_t max_bytes = 8192);

}  // namespace ddp::launcher
