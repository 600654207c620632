#pragma once
// IDX files (the MNIST family's format): a big-endian header — two zero bytes, a type code
// (0x08 = unsigned byte), the number of dimensions — then the dimensions as big-endian uint32s
// and the data. Read plain or gzip-compressed (as Debian's dataset packages ship them).
// Errors (a missing file, a truncated or foreign one) are ddp::InvalidArgument naming the path.
#include <ATen/core/Tensor.h>

#include <string>

namespace demo {

// The whole file as a uint8 tensor of its dimensions. Only unsigned-byte files are accepted.
at::Tensor read_idx(const std::string& path);

}  // namespace demo
