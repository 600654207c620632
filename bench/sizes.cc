#include "bench/sizes.h"

#include "common/error.h"

namespace ddp::bench {
namespace {

// No buffer a bench can allocate comes near this; above it a double no longer holds every byte.
constexpr double kMaxBytes = 281474976710656.0;  // 2^48

}  // namespace

size_t parse_size(const std::string& text, const std::string& flag) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    DDP_THROW(InvalidArgument, flag, ": '", text, "' is not a size (e.g. 4, 1K, 16M, 1G)");
  }
  const std::string unit = text.substr(pos);
  double mult = 1;
  if (unit == "K" || unit == "KiB" || unit == "k")
    mult = 1024;
  else if (unit == "M" || unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    DDP_THROW(InvalidArgument, flag, ": unknown unit in '", text, "'");
  if (!(v >= 0)) DDP_THROW(InvalidArgument, flag, ": '", text, "' is not a size (negative or not a number)");
  const double bytes = v * mult;
  if (bytes > kMaxBytes) DDP_THROW(InvalidArgument, flag, ": '", text, "' is larger than 2^48 bytes");
  return static_cast<size_t>(bytes);
}

std::vector<size_t> parse_sizes(const std::string& list, const std::string& flag) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) out.push_back(parse_size(list.substr(start, comma - start), flag));
    start = comma + 1;
  }
  return out;
}

}  // namespace ddp::bench
