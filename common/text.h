#pragma once
// Small text helpers shared by modules that read system files, flags or outside input, or
// quote it in messages. None throws: a file that cannot be read is "", any byte is shown.
#include <cstddef>
#include <string>
#include <string_view>

namespace ddp {

// The first line of the file at `path` (without its newline); "" when it cannot be read
// (sysfs and /proc entries that a container or a kernel lacks).
std::string read_first_line(const std::string& path);

// `s` as a message may quote it: bytes outside printable ASCII become '.', and past `max`
// characters it is cut and ends in "...".
std::string printable_excerpt(std::string_view s, size_t max);

// `s` without the white space (std::isspace) at either end.
std::string trim(std::string_view s);

}  // namespace ddp
