#pragma once
// What a training program registers with the engine: parameters (values + gradients) and
// buffers (e.g. batch-norm statistics). Views only: the program owns the memory and keeps it
// alive, at the same address, for the engine's lifetime (except gradients the engine owns with
// gradient_as_bucket_view, see engine.h).
#include <cstdint>
#include <string>
#include <vector>

#include "comm/types.h"

namespace ddp {

struct ParamSpec {
  std::string name;
  comm::Buffer data;           // the values; broadcast from rank 0 at construction
  comm::Buffer grad;           // the gradient, same count/dtype/device as data; leave data null
                               // with gradient_as_bucket_view (the engine hands out views)
  std::vector<int64_t> shape;  // empty means {data.count}; product must equal data.count
};

struct BufferSpec {
  std::string name;
  comm::Buffer data;
  std::vector<int64_t> shape;  // empty means {data.count}
};

// "[3, 4]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace ddp
