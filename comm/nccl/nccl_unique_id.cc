#include "comm/nccl/nccl_unique_id.h"

#include <cstring>

#include "common/error.h"

namespace ddp::comm::nccl_backend {

ncclUniqueId exchange_unique_id(rdzv::Store& store, const UniqueIdExchange& how) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (how.create) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) DDP_THROW(BackendError, how.what, ": ncclGetUniqueId: ", ncclGetErrorString(rc));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store.set(how.key, rdzv::Bytes(p, p + sizeof(id)));
    return id;
  }
  rdzv::Bytes bytes = store.get(how.key, how.timeout);
  if (bytes.size() != sizeof(id)) {
    DDP_THROW(BackendError, how.what, ": the store holds a ", bytes.size(), "-byte unique id under '",
              how.key, "', expected ", sizeof(id));
  }
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

}  // namespace ddp::comm::nccl_backend
