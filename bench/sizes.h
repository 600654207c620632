#pragma once
// Byte sizes on ddp-bench command lines (--sizes), one rule for every subcommand: a number with
// an optional unit, B, K/KiB/k, M/MiB or G/GiB (powers of 1024); a list is comma-separated.
// A fraction of a byte is dropped (1.1K is 1126). Anything else (no number, an unknown unit, a
// negative size, a size past 2^48 bytes) is an InvalidArgument naming the flag and the item.
#include <cstddef>
#include <string>
#include <vector>

namespace ddp::bench {

size_t parse_size(const std::string& text, const std::string& flag = "--sizes");
std::vector<size_t> parse_sizes(const std::string& list, const std::string& flag = "--sizes");

}  // namespace ddp::bench
