#include "comm/nccl/cuda_staging.h"

#include <functional>
#include <map>
#include <mutex>

#include "comm/nccl/cuda_memory.h"
#include "common/error.h"

namespace ddp::comm {
namespace {

// Pinned host buffers by size; cudaMallocHost is far too slow to call per op. Shared by the
// group and the buffers it handed out, so a buffer may outlive the group.
class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;

  std::shared_ptr<void> get(size_t bytes) {
    cuda::PinnedMemory mem;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= 2 * bytes + 4096) {
        cached_ -= it->first;
        mem = std::move(it->second);
        bytes = it->first;
        free_.erase(it);
      }
    }
    if (!mem) mem = cuda::pinned_alloc(bytes);
    void* raw = mem.release();
    return std::shared_ptr<void>(raw, [pool = shared_from_this(), bytes](void* p) { pool->put(p, bytes); });
  }

 private:
  void put(void* p, size_t bytes) noexcept {
    cuda::PinnedMemory back(p);
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + bytes > kMaxCachedBytes) return;  // freed
    cached_ += bytes;
    free_.emplace(bytes, std::move(back));
  }

  std::mutex mu_;
  std::multimap<size_t, cuda::PinnedMemory> free_;
  size_t cached_ = 0;
};

// One staged view: the host copy of a CUDA buffer (or the buffer itself when on the host).
struct Staged {
  Buffer user;
  Buffer host;
  std::shared_ptr<void> pinned;
};

class CudaStagingGroup final : public ProcessGroup {
 public:
  explicit CudaStagingGroup(ProcessGroupPtr inner)
      : ProcessGroup(inner->rank(), inner->size(), Options{inner->timeout()}), inner_(std::move(inner)) {}

  std::string backend_name() const override { return inner_->backend_name(); }
  std::string choices() const override { return inner_->choices(); }
  std::shared_ptr<GroupMemory> allocate(size_t bytes) override { return inner_->allocate(bytes); }

 protected:
  // Host buffers pass through; CUDA buffers (on any device) are staged through pinned memory.
  void check_device(const char*, const Buffer&) const override {}

  WorkPtr do_send(Buffer buf, int dst, SendOptions opts) override {
    auto in = stage(buf, true);
    return after(inner_->send(in.host, dst, opts), {}, {in});
  }
  WorkPtr do_recv(Buffer buf, int src, RecvOptions opts) override {
    auto out = stage(buf, false);
    return after(inner_->recv(out.host, src, opts), {out}, {});
  }
  WorkPtr do_recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts) override {
    auto out = stage(buf, false);
    return after(inner_->recv_any(out.host, std::move(source), opts), {out}, {});
  }
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions opts) override {
    auto io = stage(buf, true);
    return after(inner_->broadcast(io.host, opts), {io}, {});
  }
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions opts) override {
    if (!buf.device.is_cuda()) return inner_->all_reduce(buf, opts);  // the common case: no staging
    auto io = stage(buf, true);
    return after(inner_->all_reduce(io.host, opts), {io}, {});
  }
  WorkPtr do_reduce(Buffer buf, ReduceOptions opts) override {
    auto io = stage(buf, true);
    const bool root = rank() == opts.root;
    return after(inner_->reduce(io.host, opts), root ? std::vector<Staged>{io} : std::vector<Staged>{},
                 root ? std::vector<Staged>{} : std::vector<Staged>{io});
  }
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) override {
    return in_to_out(&ProcessGroup::all_gather, input, output, opts);
  }
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions opts) override {
    return in_to_out(&ProcessGroup::gather, input, output, opts);
  }
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions opts) override {
    return in_to_out(&ProcessGroup::scatter, input, output, opts);
  }
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) override {
    return in_to_out(&ProcessGroup::reduce_scatter, input, output, opts);
  }
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) override {
    return in_to_out(&ProcessGroup::all_to_all, input, output, opts);
  }
  WorkPtr do_barrier(BarrierOptions opts) override { return inner_->barrier(opts); }
  void do_abort(const std::string& reason) override { inner_->abort(reason); }

  // Multi-buffer ops: every buffer staged, the inner group's multi op on the host copies.
  WorkPtr do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) override {
    auto io = stage_all(buffers, true);
    return after(inner_->all_reduce_multi(hosts(io), opts), io, {});
  }
  WorkPtr do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) override {
    auto io = stage_all(buffers, rank() == opts.root);
    return after(inner_->broadcast_multi(hosts(io), opts), io, {});
  }
  WorkPtr do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) override {
    auto in = stage_all(buffers, true);
    std::vector<Staged> out;
    if (rank() == opts.root) {  // only the root buffer comes back
      out.push_back(in[static_cast<size_t>(opts.root_index)]);
      in.erase(in.begin() + opts.root_index);
    }
    auto host = hosts(in);
    if (!out.empty()) host.insert(host.begin() + opts.root_index, out[0].host);
    return after(inner_->reduce_multi(host, opts), std::move(out), std::move(in));
  }
  WorkPtr do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                              AllGatherOptions opts) override {
    auto in = stage_all(inputs, true);
    auto out = stage_all(outputs, false);
    return after(inner_->all_gather_multi(hosts(in), hosts(out), opts), out, in);
  }

 private:
  std::vector<Staged> stage_all(std::span<const Buffer> list, bool read) {
    std::vector<Staged> staged;
    for (const Buffer& b : list) staged.push_back(stage(b, read));
    return staged;
  }
  static std::vector<Buffer> hosts(const std::vector<Staged>& staged) {
    std::vector<Buffer> out;
    out.reserve(staged.size());
    for (const auto& s : staged) out.push_back(s.host);
    return out;
  }

  // An op from `input` into `output` on the inner group: both staged, the output copied back.
  template <typename Options>
  WorkPtr in_to_out(WorkPtr (ProcessGroup::*op)(Buffer, Buffer, Options), const Buffer& input,
                    const Buffer& output, Options opts) {
    auto in = stage(input, true);
    auto out = stage(output, false);
    return after(std::invoke(op, *inner_, in.host, out.host, opts), {out}, {in});
  }

  // A host view for `b`: b itself on the host; else pinned memory, filled from the device
  // when the op reads it.
  Staged stage(const Buffer& b, bool read) {
    Staged s{b, b, nullptr};
    if (!b.device.is_cuda() || b.count == 0) return s;
    if (b.data == nullptr) DDP_THROW(InvalidArgument, "cuda staging: null CUDA buffer with count ", b.count);
    s.pinned = pool_->get(b.bytes());
    s.host = Buffer{s.pinned.get(), b.count, b.dtype, Device{}};
    if (read) cuda::copy_to_host(s.host.data, b.data, b.bytes(), b.device.index);
    return s;
  }

  // The Work the caller sees: done when the inner op is done and outputs are back on the device.
  WorkPtr after(const WorkPtr& inner, std::vector<Staged> outputs, std::vector<Staged> inputs) {
    bool staged = false;
    for (auto& s : outputs) staged |= s.pinned != nullptr;
    for (auto& s : inputs) staged |= s.pinned != nullptr;
    if (!staged) return inner;
    auto outer = std::make_shared<Work>(inner->description() + " (CUDA staged)");
    inner->then([outer, outputs = std::move(outputs), inputs = std::move(inputs)](Work& w) {
      std::exception_ptr error = w.exception();
      if (!error) {
        try {
          for (const auto& s : outputs) {
            if (s.pinned) cuda::copy_to_device(s.user.data, s.host.data, s.user.bytes(), s.user.device.index);
          }
        } catch (...) {
          error = std::current_exception();
        }
      }
      outer->finish(error);  // the pinned buffers return to the pool when this lambda is destroyed
    });
    return outer;
  }

  ProcessGroupPtr inner_;
  std::shared_ptr<PinnedPool> pool_ = std::make_shared<PinnedPool>();
};

}  // namespace

ProcessGroupPtr wrap_cuda_staging(ProcessGroupPtr inner) {
  DDP_CHECK(inner != nullptr, "wrap_cuda_staging: no group to wrap");
  return std::make_shared<CudaStagingGroup>(std::move(inner));
}

}  // namespace ddp::comm
