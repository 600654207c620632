#pragma once
// A float32 buffer for `ddp-bench collective`: host memory, the group's memory
// (ProcessGroup::allocate: tcp's shared memory on one host), or CUDA device memory when the
// bench was built with CUDA (DDP_BENCH_CUDA) and asked for it. Owns its memory (RAII); copies
// to and from a host vector are synchronous. Without CUDA, asking for a device buffer is an
// InvalidArgument that says so.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/group_memory.h"

namespace ddp::bench {

enum class MemoryKind { kHost, kCuda, kGroup };

struct BufferOptions {
  MemoryKind kind = MemoryKind::kHost;
  int device = 0;  // CUDA device index (kCuda)
  // kGroup: where it comes from (a collective call: every rank makes its buffers in step).
  std::function<std::shared_ptr<comm::GroupMemory>(size_t bytes)> group;
};

class BenchBuffer {
 public:
  BenchBuffer(size_t count, BufferOptions options);
  ~BenchBuffer();
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;

  float* data() { return data_; }
  size_t count() const { return count_; }
  void upload(const std::vector<float>& from);  // from.size() == count()
  void download(std::vector<float>& to) const;  // resized to count()

 private:
  struct Device;
  size_t count_;
  BufferOptions options_;
  std::vector<float> host_;
  std::shared_ptr<comm::GroupMemory> group_;
  std::unique_ptr<Device> device_;
  float* data_ = nullptr;
};

// True when this ddp-bench can measure device buffers (built with CUDA).
bool cuda_built();
// CUDA devices visible (0 without CUDA support or without a device).
int cuda_devices();
// The device this process uses: LOCAL_RANK (else RANK) modulo the visible devices.
int cuda_device_of_this_rank();

}  // namespace ddp::bench
