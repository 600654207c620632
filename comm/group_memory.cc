#include "comm/group_memory.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"

namespace ddp::comm {
namespace {

class HostMemory final : public GroupMemory {
 public:
  HostMemory(void* data, size_t bytes) : GroupMemory(data, bytes, false) {}
  ~HostMemory() override { std::free(data()); }
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
};

}  // namespace

Buffer GroupMemory::view(size_t count, DType dtype, size_t offset) const {
  const size_t need = count * dtype_size(dtype);
  if (offset > bytes_ || need > bytes_ - offset) {
    DDP_THROW(InvalidArgument, "group memory: ", count, " x ", to_string(dtype), " at byte ", offset,
              " does not fit in its ", bytes_, " bytes");
  }
  return Buffer{static_cast<char*>(data_) + offset, count, dtype, Device{}};
}

std::shared_ptr<GroupMemory> host_memory(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::make_shared<HostMemory>(p, bytes);
}

}  // namespace ddp::comm
