#include "ddp/torch/powersgd_random.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>

#include <cstring>

#include "common/error.h"

namespace ddp::torch {

std::function<void(uint64_t seed, const std::vector<comm::Buffer>& qs)> torch_random_normal() {
  return [](uint64_t seed, const std::vector<comm::Buffer>& qs) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const auto& q : qs) {
      if (q.device.is_cuda() || (q.dtype != comm::DType::kFloat32 && q.dtype != comm::DType::kFloat64)) {
        DDP_THROW(InvalidArgument, "torch_random_normal: a Q of ", comm::to_string(q.dtype), " on ",
                  q.device.str(), "; host float32 or float64 only");
      }
      const auto dtype = q.dtype == comm::DType::kFloat32 ? at::kFloat : at::kDouble;
      at::Tensor values = at::randn({static_cast<int64_t>(q.count)}, gen, at::TensorOptions().dtype(dtype));
      std::memcpy(q.data, values.data_ptr(), q.bytes());
    }
  };
}

}  // namespace ddp::torch
