#include "device_mirror.h"

#include <vector>

#include "comm/nccl/cuda_memory.h"
#include "harness.h"

namespace ddp::comm::conformance {
namespace {

// A device copy of one host view; `back()` copies it to the host view again. Outputs are copied
// in too: the sentinel a case put there is what an element the op never wrote holds (fresh device
// memory holds whatever an earlier case left, often the right answer).
class Mirrored {
 public:
  Mirrored(const Buffer& host, int device) : host_(host), device_(device) {
    if (host.count == 0) {
      view_ = cuda::device_view(nullptr, 0, host.dtype, device);
      return;
    }
    mem_ = cuda::device_alloc(host.bytes(), device);
    view_ = cuda::device_view(mem_.get(), host.count, host.dtype, device);
    cuda::copy_to_device(mem_.get(), host.data, host.bytes(), device);
  }
  const Buffer& view() const { return view_; }
  void back() const {
    if (host_.count != 0) cuda::copy_to_host(host_.data, mem_.get(), host_.bytes(), device_);
  }

 private:
  Buffer host_;
  int device_;
  cuda::DeviceMemory mem_;
  Buffer view_;
};

class DeviceMirror final : public ProcessGroup {
 public:
  DeviceMirror(ProcessGroupPtr inner, int device)
      : ProcessGroup(inner->rank(), inner->size(), Options{inner->timeout()}),
        inner_(std::move(inner)),
        device_(device) {}

  std::string backend_name() const override { return inner_->backend_name(); }

 protected:
  WorkPtr do_send(Buffer buf, int dst, SendOptions o) override {
    Mirrored in(buf, device_);
    return finish(inner_->send(in.view(), dst, o), {});
  }
  WorkPtr do_recv(Buffer buf, int src, RecvOptions o) override {
    Mirrored out(buf, device_);
    return finish(inner_->recv(out.view(), src, o), {&out});
  }
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions o) override {
    Mirrored io(buf, device_);
    return finish(inner_->broadcast(io.view(), o), {&io});
  }
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions o) override {
    Mirrored io(buf, device_);
    return finish(inner_->all_reduce(io.view(), o), {&io});
  }
  WorkPtr do_reduce(Buffer buf, ReduceOptions o) override {
    Mirrored io(buf, device_);
    return finish(inner_->reduce(io.view(), o), {&io});
  }
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions o) override {
    Mirrored in(input, device_), out(output, device_);
    return finish(inner_->all_gather(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions o) override {
    Mirrored in(input, device_), out(output, device_);
    return finish(inner_->gather(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions o) override {
    Mirrored in(input, device_), out(output, device_);
    return finish(inner_->scatter(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions o) override {
    Mirrored in(input, device_), out(output, device_);
    return finish(inner_->reduce_scatter(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions o) override {
    Mirrored in(input, device_), out(output, device_);
    return finish(inner_->all_to_all(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_barrier(BarrierOptions o) override { return inner_->barrier(o); }
  void do_abort(const std::string& reason) override { inner_->abort(reason); }
  WorkPtr do_all_reduce_multi(std::span<const Buffer> list, AllReduceOptions o) override {
    auto io = mirror_list(list);
    return finish(inner_->all_reduce_multi(views(io), o), io);
  }
  WorkPtr do_broadcast_multi(std::span<const Buffer> list, BroadcastMultiOptions o) override {
    auto io = mirror_list(list);
    return finish(inner_->broadcast_multi(views(io), o), io);
  }
  WorkPtr do_reduce_multi(std::span<const Buffer> list, ReduceMultiOptions o) override {
    auto io = mirror_list(list);
    return finish(inner_->reduce_multi(views(io), o), io);
  }
  WorkPtr do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                              AllGatherOptions o) override {
    auto in = mirror_list(inputs), out = mirror_list(outputs);
    return finish(inner_->all_gather_multi(views(in), views(out), o), out);
  }

 private:
  // A list of one on the group's device; of K > 1, buffer i on device rank × K + i, so every
  // virtual rank has a device of its own (nccl's rule: world × K GPUs).
  std::vector<Mirrored> mirror_list(std::span<const Buffer> list) const {
    std::vector<Mirrored> out;
    out.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const int k = static_cast<int>(list.size());
      out.emplace_back(list[i], k == 1 ? device_ : rank() * k + static_cast<int>(i));
    }
    return out;
  }
  static std::vector<Buffer> views(const std::vector<Mirrored>& list) {
    std::vector<Buffer> out;
    out.reserve(list.size());
    for (const Mirrored& m : list) out.push_back(m.view());
    return out;
  }
  static WorkPtr finish(const WorkPtr& w, const std::vector<Mirrored>& outputs) {
    w->wait();
    for (const Mirrored& m : outputs) m.back();
    return Work::completed(w->description() + " (device mirror)");
  }

  // Waits for the inner op (rethrowing its error), then brings the outputs home.
  static WorkPtr finish(const WorkPtr& w, std::initializer_list<const Mirrored*> outputs) {
    w->wait();
    for (const Mirrored* m : outputs) m->back();
    return Work::completed(w->description() + " (device mirror)");
  }

  ProcessGroupPtr inner_;
  int device_;
};

}  // namespace

ProcessGroupPtr mirror_on_device(ProcessGroupPtr inner, int device) {
  return std::make_shared<DeviceMirror>(std::move(inner), device);
}

bool nccl_runnable() { return backend_under_test() == "nccl" && cuda::device_count() > 0; }

bool nccl_multi_gpu() { return nccl_runnable() && cuda::device_count() >= 2; }

}  // namespace ddp::comm::conformance
