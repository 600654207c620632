// The machinery of NcclProcessGroup's multi-buffer ops (nccl_multi.cc has the ops): the device
// rule for lists, the shape agreement, the clique cache, and the issue path that runs buffer i's
// call on communicator i inside one ncclGroupStart/End (see nccl_process_group.h).
#include "comm/nccl/nccl_process_group.h"
#include "comm/nccl/nccl_unique_id.h"
#include "common/error.h"

namespace ddp::comm::nccl_backend {
namespace {

// The five shape fields, then whether this rank lacks the clique for its device list.
constexpr size_t kRow = 6;

std::vector<int> devices_of(std::span<const Buffer> list) {
  std::vector<int> devices;
  for (const Buffer& b : list) devices.push_back(b.device.index);
  return devices;
}

}  // namespace

void NcclProcessGroup::check_list_devices(const char* op, std::span<const Buffer> list) const {
  if (list.size() == 1) return check_device(op, list[0]);  // the group's own communicator
  const int visible = cuda::device_count();
  for (size_t i = 0; i < list.size(); ++i) {
    const Device& d = list[i].device;
    if (!d.is_cuda() || d.index < 0 || d.index >= visible) {
      DDP_THROW(InvalidArgument, "nccl ", op, ": buffer ", i, " is on ", d.str(), "; with ", list.size(),
                " buffers per rank, each must be a CUDA buffer on a visible device of its own (", visible,
                " visible)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (list[j].device == d) {
        DDP_THROW(InvalidArgument, "nccl ", op, ": buffers ", j, " and ", i, " are both on ", d.str(),
                  " (one buffer per device: NCCL takes each device once per communicator)");
      }
    }
  }
}

bool NcclProcessGroup::agree_multi(const char* op, const multi::ListShape& shape, bool lacking,
                                   Millis timeout) {
  if (size() == 1) return lacking;
  const size_t n = static_cast<size_t>(size());
  const std::vector<int64_t> mine{shape.length,     shape.count, shape.dtype,
                                  shape.root_index, shape.op,    lacking};
  if (!agree_scratch_) agree_scratch_ = cuda::device_alloc(kRow * (n + 1) * sizeof(int64_t), device_);
  auto* scratch = static_cast<int64_t*>(agree_scratch_.get());
  cuda::copy_to_device(scratch, mine.data(), kRow * sizeof(int64_t), device_);
  all_gather(cuda::device_view(scratch, kRow, DType::kInt64, device_),
             cuda::device_view(scratch + kRow, kRow * n, DType::kInt64, device_), {timeout})
      ->wait();
  std::vector<int64_t> all(kRow * n);
  cuda::copy_to_host(all.data(), scratch + kRow, all.size() * sizeof(int64_t), device_);
  std::vector<multi::ListShape> rows(n);
  bool any_lacking = false;
  for (size_t r = 0; r < n; ++r) {
    const int64_t* v = all.data() + r * kRow;
    rows[r] = multi::ListShape{v[0], v[1], v[2], v[3], v[4]};
    any_lacking = any_lacking || v[5] != 0;
  }
  const std::string mismatch = multi::find_mismatch(rows);
  if (!mismatch.empty()) DDP_THROW(InvalidArgument, op, ": ", mismatch);
  return any_lacking;
}

NcclClique& NcclProcessGroup::clique_for(const std::vector<int>& devices, bool create,
                                         const Deadline& deadline) {
  if (!create) return *clique_by_devices_.at(devices);
  // Every rank gets here for the same op (the agreement said some rank lacks its clique), so
  // the generation, and with it the store key, is the same on every rank.
  const int k = static_cast<int>(devices.size());
  const int generation = cliques_made_++;
  const std::string what = detail::str("nccl group '", name_, "' (rank ", rank(), "/", size(), "): clique ",
                                       generation, " (", size(), " x ", k, " devices)");
  const ncclUniqueId id = exchange_unique_id(
      *store_, {detail::str("nccl/multi/k", k, "/", generation), rank() == 0, deadline.remaining(), what});
  auto clique = std::make_unique<NcclClique>(CliqueOptions{devices, device_, timeout(), what});
  settle(what + ": ncclCommInitRankConfig", clique->init(id, size() * k, rank() * k), deadline,
         clique->comms());
  clique->mark_ready();
  NcclClique* made = clique.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) {
      clique->abort();
      std::rethrow_exception(broken_);
    }
    cliques_.push_back(std::move(clique));
  }
  clique_by_devices_[devices] = made;  // an older clique for these devices lives on in cliques_
  return *made;
}

WorkPtr NcclProcessGroup::submit_multi(const MultiOp& op) {
  std::lock_guard<std::mutex> serial(multi_mu_);
  const Deadline deadline(op.timeout);
  const size_t k = op.list.size();
  const std::vector<int> devices = devices_of(op.list);
  const bool empty = op.shape.count == 0;
  const bool lacking = k > 1 && !empty && clique_by_devices_.count(devices) == 0;
  const bool create = agree_multi(op.name, op.shape, lacking, deadline.remaining());
  const std::string what = detail::str(op.name, " (", op.call, " on ", k, " device(s))");
  const std::string detail = detail::str(", ", k, " buffer(s) per rank");
  if (k == 1) {
    return submit(
        op.name, deadline.remaining(), empty,
        [&, this](cudaStream_t s, const Deadline& d) { settle(what, op.per_buffer(comm_, s, 0), d); },
        detail);
  }
  return submit(
      op.name, deadline.remaining(), empty,
      [&, this](cudaStream_t s, const Deadline& d) {
        NcclClique& clique = clique_for(devices, create, d);
        clique.wait_for(s);
        ncclResult_t rc = ncclGroupStart();
        if (rc == ncclSuccess) {
          for (size_t i = 0; i < k; ++i) {
            const ncclResult_t call = op.per_buffer(clique.comm(i), clique.stream(i), i);
            if (call != ncclSuccess && call != ncclInProgress && rc == ncclSuccess) rc = call;
          }
          const ncclResult_t end = ncclGroupEnd();
          if (rc == ncclSuccess) rc = end;
        }
        settle(what, rc, d, clique.comms());
        clique.join_into(s);
      },
      detail);
}

}  // namespace ddp::comm::nccl_backend
