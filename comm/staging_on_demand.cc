#include "comm/staging_on_demand.h"

#include <mutex>

namespace ddp::comm {
namespace {

class StagingOnDemand final : public ProcessGroup {
 public:
  StagingOnDemand(ProcessGroupPtr inner, StagingLoader load)
      : ProcessGroup(inner->rank(), inner->size(), Options{inner->timeout()}),
        inner_(std::move(inner)),
        load_(load) {}

  std::string backend_name() const override { return inner_->backend_name(); }
  Device buffer_device() const override { return inner_->buffer_device(); }
  std::string choices() const override { return inner_->choices(); }
  std::shared_ptr<GroupMemory> allocate(size_t bytes) override { return inner_->allocate(bytes); }

 protected:
  // Checked by whichever group takes the op (the tcp group, or the staging decorator).
  void check_device(const char*, const Buffer&) const override {}

  WorkPtr do_send(Buffer b, int dst, SendOptions o) override { return to(b)->send(b, dst, o); }
  WorkPtr do_recv(Buffer b, int src, RecvOptions o) override { return to(b)->recv(b, src, o); }
  WorkPtr do_recv_any(Buffer b, std::shared_ptr<int> s, RecvOptions o) override {
    return to(b)->recv_any(b, std::move(s), o);
  }
  WorkPtr do_broadcast(Buffer b, BroadcastOptions o) override { return to(b)->broadcast(b, o); }
  WorkPtr do_all_reduce(Buffer b, AllReduceOptions o) override { return to(b)->all_reduce(b, o); }
  WorkPtr do_reduce(Buffer b, ReduceOptions o) override { return to(b)->reduce(b, o); }
  WorkPtr do_all_gather(Buffer i, Buffer o, AllGatherOptions opt) override {
    return to(i, o)->all_gather(i, o, opt);
  }
  WorkPtr do_gather(Buffer i, Buffer o, GatherOptions opt) override { return to(i, o)->gather(i, o, opt); }
  WorkPtr do_scatter(Buffer i, Buffer o, ScatterOptions opt) override { return to(i, o)->scatter(i, o, opt); }
  WorkPtr do_reduce_scatter(Buffer i, Buffer o, ReduceScatterOptions opt) override {
    return to(i, o)->reduce_scatter(i, o, opt);
  }
  WorkPtr do_all_to_all(Buffer i, Buffer o, AllToAllOptions opt) override {
    return to(i, o)->all_to_all(i, o, opt);
  }
  WorkPtr do_barrier(BarrierOptions o) override { return inner_->barrier(o); }
  // The staging decorator, when made, wraps inner_: aborting inner_ fails its ops too.
  void do_abort(const std::string& reason) override { inner_->abort(reason); }
  WorkPtr do_all_reduce_multi(std::span<const Buffer> l, AllReduceOptions o) override {
    return to(l)->all_reduce_multi(l, o);
  }
  WorkPtr do_broadcast_multi(std::span<const Buffer> l, BroadcastMultiOptions o) override {
    return to(l)->broadcast_multi(l, o);
  }
  WorkPtr do_reduce_multi(std::span<const Buffer> l, ReduceMultiOptions o) override {
    return to(l)->reduce_multi(l, o);
  }
  WorkPtr do_all_gather_multi(std::span<const Buffer> i, std::span<const Buffer> o,
                              AllGatherOptions opt) override {
    return to(i, o)->all_gather_multi(i, o, opt);
  }

 private:
  ProcessGroup* to(std::span<const Buffer> a, std::span<const Buffer> b = {}) {
    bool cuda = false;
    for (const Buffer& x : a) cuda |= x.device.is_cuda();
    for (const Buffer& x : b) cuda |= x.device.is_cuda();
    return cuda ? staged() : inner_.get();
  }
  ProcessGroup* to(const Buffer& a, const Buffer& b = {}) {
    if (!a.device.is_cuda() && !b.device.is_cuda()) return inner_.get();
    return staged();
  }
  ProcessGroup* staged() {
    std::call_once(once_, [this] { staged_ = load_()(inner_); });
    return staged_.get();
  }

  ProcessGroupPtr inner_;
  StagingLoader load_;
  std::once_flag once_;
  ProcessGroupPtr staged_;
};

}  // namespace

ProcessGroupPtr stage_on_demand(ProcessGroupPtr inner, StagingLoader load_staging) {
  return std::make_shared<StagingOnDemand>(std::move(inner), load_staging);
}

}  // namespace ddp::comm
