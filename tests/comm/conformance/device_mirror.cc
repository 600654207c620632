#include "device_mirror.h"

#include "comm/nccl/cuda_memory.h"

namespace ddp::comm::conformance {
namespace {

// A device copy of one host view; `back()` copies it to the host view again.
class Mirrored {
 public:
  Mirrored(const Buffer& host, int device, bool copy_in) : host_(host), device_(device) {
    if (host.count == 0) {
      view_ = cuda::device_view(nullptr, 0, host.dtype, device);
      return;
    }
    mem_ = cuda::device_alloc(host.bytes(), device);
    view_ = cuda::device_view(mem_.get(), host.count, host.dtype, device);
    if (copy_in) cuda::copy_to_device(mem_.get(), host.data, host.bytes(), device);
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
    Mirrored in(buf, device_, true);
    return finish(inner_->send(in.view(), dst, o), {});
  }
  WorkPtr do_recv(Buffer buf, int src, RecvOptions o) override {
    Mirrored out(buf, device_, false);
    return finish(inner_->recv(out.view(), src, o), {&out});
  }
  WorkPtr do_broadcast(Buffer buf, BroadcastOptions o) override {
    Mirrored io(buf, device_, true);
    return finish(inner_->broadcast(io.view(), o), {&io});
  }
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions o) override {
    Mirrored io(buf, device_, true);
    return finish(inner_->all_reduce(io.view(), o), {&io});
  }
  WorkPtr do_reduce(Buffer buf, ReduceOptions o) override {
    Mirrored io(buf, device_, true);
    return finish(inner_->reduce(io.view(), o), {&io});
  }
  WorkPtr do_all_gather(Buffer input, Buffer output, AllGatherOptions o) override {
    Mirrored in(input, device_, true), out(output, device_, false);
    return finish(inner_->all_gather(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_gather(Buffer input, Buffer output, GatherOptions o) override {
    Mirrored in(input, device_, true), out(output, device_, false);
    return finish(inner_->gather(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_scatter(Buffer input, Buffer output, ScatterOptions o) override {
    Mirrored in(input, device_, true), out(output, device_, false);
    return finish(inner_->scatter(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions o) override {
    Mirrored in(input, device_, true), out(output, device_, false);
    return finish(inner_->reduce_scatter(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_all_to_all(Buffer input, Buffer output, AllToAllOptions o) override {
    Mirrored in(input, device_, true), out(output, device_, false);
    return finish(inner_->all_to_all(in.view(), out.view(), o), {&out});
  }
  WorkPtr do_barrier(BarrierOptions o) override { return inner_->barrier(o); }

 private:
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

}  // namespace ddp::comm::conformance
