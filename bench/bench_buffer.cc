#include "bench/bench_buffer.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "common/settings.h"

#ifdef DDP_BENCH_CUDA
#include "comm/nccl/cuda_memory.h"
#endif

namespace ddp::bench {

#ifdef DDP_BENCH_CUDA
struct BenchBuffer::Device {
  comm::cuda::DeviceMemory memory;
};
bool cuda_built() { return true; }
int cuda_devices() { return comm::cuda::device_count(); }
int cuda_device_of_this_rank() {
  return comm::cuda::default_device(static_cast<int>(settings::int_or(settings::kRank, 0)));
}
#else
struct BenchBuffer::Device {};
bool cuda_built() { return false; }
int cuda_devices() { return 0; }
int cuda_device_of_this_rank() { return 0; }
#endif

BenchBuffer::BenchBuffer(size_t count, BufferOptions options) : count_(count), options_(std::move(options)) {
  if (options_.kind == MemoryKind::kHost) {
    host_.resize(count_);
    data_ = host_.data();
    return;
  }
  if (options_.kind == MemoryKind::kGroup) {
    DDP_CHECK(options_.group, "group memory without a group to allocate it");
    group_ = options_.group(std::max<size_t>(count_, 1) * sizeof(float));
    data_ = static_cast<float*>(group_->data());
    return;
  }
#ifdef DDP_BENCH_CUDA
  device_ = std::make_unique<Device>();
  device_->memory = comm::cuda::device_alloc(std::max<size_t>(count_, 1) * sizeof(float), options_.device);
  data_ = static_cast<float*>(device_->memory.get());
#else
  DDP_THROW(InvalidArgument, "device buffers: this ddp-bench was built without CUDA");
#endif
}

BenchBuffer::~BenchBuffer() = default;

void BenchBuffer::upload(const std::vector<float>& from) {
  DDP_CHECK(from.size() == count_, "upload of ", from.size(), " elements into a buffer of ", count_);
  if (options_.kind != MemoryKind::kCuda) {
    std::copy(from.begin(), from.end(), data_);
    return;
  }
#ifdef DDP_BENCH_CUDA
  comm::cuda::copy_to_device(data_, from.data(), count_ * sizeof(float), options_.device);
#endif
}

void BenchBuffer::download(std::vector<float>& to) const {
  to.resize(count_);
  if (options_.kind != MemoryKind::kCuda) {
    std::copy(data_, data_ + count_, to.begin());
    return;
  }
#ifdef DDP_BENCH_CUDA
  comm::cuda::copy_to_host(to.data(), data_, count_ * sizeof(float), options_.device);
#endif
}

}  // namespace ddp::bench
