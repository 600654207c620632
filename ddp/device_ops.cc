#include "ddp/device_ops.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "comm/half_float.h"
#include "comm/reduce_kernels.h"
#include "common/error.h"
#include "ddp/cuda_ops.h"

namespace ddp {
namespace {

constexpr size_t kAlignment = 64;  // a cache line: vectorized loops and no false sharing

void check_host(const char* op, const comm::Buffer& b) {
  if (b.device.is_cuda() && !cuda_supported()) {
    DDP_THROW(InvalidArgument, op, ": buffer on ", b.device.str(), " but libddp was built without CUDA");
  }
}

double load(const comm::Buffer& b, size_t i) {
  switch (b.dtype) {
    case comm::DType::kFloat32: return static_cast<const float*>(b.data)[i];
    case comm::DType::kFloat64: return static_cast<const double*>(b.data)[i];
    case comm::DType::kFloat16: return comm::half_to_float(static_cast<const uint16_t*>(b.data)[i]);
    case comm::DType::kBFloat16: return comm::bfloat16_to_float(static_cast<const uint16_t*>(b.data)[i]);
    default: DDP_THROW(InvalidArgument, "convert: unsupported dtype ", comm::to_string(b.dtype));
  }
}

void store(const comm::Buffer& b, size_t i, double v) {
  switch (b.dtype) {
    case comm::DType::kFloat32: static_cast<float*>(b.data)[i] = static_cast<float>(v); return;
    case comm::DType::kFloat64: static_cast<double*>(b.data)[i] = v; return;
    case comm::DType::kFloat16:
      static_cast<uint16_t*>(b.data)[i] = comm::float_to_half(static_cast<float>(v));
      return;
    case comm::DType::kBFloat16:
      static_cast<uint16_t*>(b.data)[i] = comm::float_to_bfloat16(static_cast<float>(v));
      return;
    default: DDP_THROW(InvalidArgument, "convert: unsupported dtype ", comm::to_string(b.dtype));
  }
}

void scale_host(const comm::Buffer& buf, double factor) {
  comm::scale(buf.data, buf.count, buf.dtype, factor);
}

bool is_16bit_float(comm::DType d) { return d == comm::DType::kFloat16 || d == comm::DType::kBFloat16; }

// float32 -> float16/bfloat16 times `factor` (multiplied in float, as the tensor's own
// arithmetic would), a block at a time through the bulk conversions (F16C where the CPU has
// it): the compression hooks' cast of a bucket onto the wire.
void narrow_host(const comm::Buffer& dst, const comm::Buffer& src, double factor) {
  constexpr size_t kBlock = 1024;
  float block[kBlock];
  const float* s = static_cast<const float*>(src.data);
  uint16_t* d = static_cast<uint16_t*>(dst.data);
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < src.count; i += kBlock) {
    const size_t m = std::min(kBlock, src.count - i);
    for (size_t k = 0; k < m; ++k) block[k] = s[i + k] * f;
    if (dst.dtype == comm::DType::kFloat16) {
      comm::half_float::f32_to_f16_n(d + i, block, m);
    } else {
      comm::half_float::f32_to_bf16_n(d + i, block, m);
    }
  }
}

// float16/bfloat16 -> float32 (exact): the cast back into the bucket.
void widen_host(const comm::Buffer& dst, const comm::Buffer& src) {
  const uint16_t* s = static_cast<const uint16_t*>(src.data);
  float* d = static_cast<float*>(dst.data);
  if (src.dtype == comm::DType::kFloat16) return comm::half_float::f16_to_f32_n(d, s, src.count);
  comm::half_float::bf16_to_f32_n(d, s, src.count);
}

}  // namespace

DeviceMemory::DeviceMemory(size_t bytes, comm::Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cuda()) {
    check_host("allocate", comm::Buffer{nullptr, 0, comm::DType::kUInt8, device});
    data_ = cuda::allocate(bytes, device.index);
    return;
  }
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (!data_)
    throw SystemError(detail::str("allocate ", bytes, " bytes of bucket memory"), ENOMEM, __FILE__, __LINE__);
  std::memset(data_, 0, rounded);
}

DeviceMemory::~DeviceMemory() noexcept { release(); }

DeviceMemory::DeviceMemory(DeviceMemory&& o) noexcept : data_(o.data_), bytes_(o.bytes_), device_(o.device_) {
  o.data_ = nullptr;
  o.bytes_ = 0;
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceMemory::release() noexcept {
  if (!data_) return;
  if (device_.is_cuda()) {
    cuda::release(data_, device_.index);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

comm::Buffer DeviceMemory::view(size_t count, comm::DType dtype) const {
  DDP_CHECK_LE(count * comm::dtype_size(dtype), bytes_, "view larger than its memory");
  return comm::Buffer{data_, count, dtype, device_};
}

void copy_buffer(const comm::Buffer& dst, const comm::Buffer& src) {
  DDP_CHECK(dst.count == src.count && dst.dtype == src.dtype, "copy: ", dst.count, " x ",
            comm::to_string(dst.dtype), " <- ", src.count, " x ", comm::to_string(src.dtype));
  if (dst.count == 0 || dst.data == src.data) return;
  if (dst.device.is_cuda() || src.device.is_cuda()) {
    check_host("copy", dst.device.is_cuda() ? dst : src);
    cuda::copy(dst.data, dst.device.index, src.data, src.device.index, dst.bytes());
    return;
  }
  std::memcpy(dst.data, src.data, dst.bytes());
}

void zero_buffer(const comm::Buffer& buf) {
  if (buf.count == 0) return;
  if (buf.device.is_cuda()) {
    check_host("zero", buf);
    cuda::zero(buf.data, buf.device.index, buf.bytes());
    return;
  }
  std::memset(buf.data, 0, buf.bytes());
}

void scale_buffer(const comm::Buffer& buf, double factor) {
  if (buf.count == 0 || factor == 1.0) return;
  if (!buf.device.is_cuda()) return scale_host(buf, factor);
  // CUDA: staged through the host. Correct, not fast; the nccl backend averages on the device
  // (ReduceOp::kAvg / premul-sum) when the engine's divisor allows it.
  check_host("scale", buf);
  std::vector<std::byte> host(buf.bytes());
  comm::Buffer h{host.data(), buf.count, buf.dtype, {}};
  copy_buffer(h, buf);
  scale_host(h, factor);
  copy_buffer(buf, h);
}

void convert_buffer(const comm::Buffer& dst, const comm::Buffer& src, double factor) {
  DDP_CHECK_EQ(dst.count, src.count, "convert: counts differ");
  if (dst.device.is_cuda() || src.device.is_cuda()) {
    check_host("convert", dst.device.is_cuda() ? dst : src);
    std::vector<std::byte> hs(src.bytes()), hd(dst.bytes());
    comm::Buffer s{hs.data(), src.count, src.dtype, {}}, d{hd.data(), dst.count, dst.dtype, {}};
    copy_buffer(s, src);
    convert_buffer(d, s, factor);
    copy_buffer(dst, d);
    return;
  }
  if (is_16bit_float(dst.dtype) && src.dtype == comm::DType::kFloat32) return narrow_host(dst, src, factor);
  if (dst.dtype == comm::DType::kFloat32 && is_16bit_float(src.dtype) && factor == 1.0)
    return widen_host(dst, src);
  for (size_t i = 0; i < src.count; ++i) store(dst, i, load(src, i) * factor);
}

}  // namespace ddp
