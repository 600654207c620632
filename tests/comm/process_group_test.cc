#include "comm/process_group.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;

namespace {

// A group that records what it was asked and never talks to anyone: enough for the checks and
// the monitored_barrier logic that the base class owns.
class FakeGroup final : public ProcessGroup {
 public:
  FakeGroup(int rank, int size, Device device) : ProcessGroup(rank, size, {}), device_(device) {}
  std::string backend_name() const override { return "fake"; }
  Device buffer_device() const override { return device_; }
  WorkPtr send(Buffer, int, SendOptions) override { return count(); }
  WorkPtr recv(Buffer, int, RecvOptions) override { return count(); }
  WorkPtr broadcast(Buffer, BroadcastOptions) override { return count(); }
  WorkPtr all_reduce(Buffer, AllReduceOptions) override { return count(); }
  WorkPtr reduce(Buffer, ReduceOptions) override { return count(); }
  WorkPtr all_gather(Buffer, Buffer, AllGatherOptions) override { return count(); }
  WorkPtr gather(Buffer, Buffer, GatherOptions) override { return count(); }
  WorkPtr scatter(Buffer, Buffer, ScatterOptions) override { return count(); }
  WorkPtr reduce_scatter(Buffer, Buffer, ReduceScatterOptions) override { return count(); }
  WorkPtr all_to_all(Buffer, Buffer, AllToAllOptions) override { return count(); }
  WorkPtr barrier(BarrierOptions) override { return count(); }
  int calls = 0;

 private:
  WorkPtr count() {
    ++calls;
    return Work::completed();
  }
  Device device_;
};

}  // namespace

TEST_CASE("rank and size are checked at construction") {
  CHECK_THROWS_AS(FakeGroup(0, 0, {}), InvalidArgument);
  CHECK_THROWS_AS(FakeGroup(2, 2, {}), InvalidArgument);
  CHECK_THROWS_AS(FakeGroup(-1, 2, {}), InvalidArgument);
}

TEST_CASE("monitored_barrier: a world of one returns at once; rank 0 hears from every peer, then answers each") {
  FakeGroup one(0, 1, {});
  one.monitored_barrier();
  CHECK(one.calls == 0);
  FakeGroup root(0, 4, {});
  root.monitored_barrier();
  CHECK(root.calls == 6);  // 3 receives, 3 acknowledgements
  FakeGroup leaf(2, 4, {});
  leaf.monitored_barrier();
  CHECK(leaf.calls == 2);  // its token, then rank 0's answer
}

TEST_CASE("monitored_barrier on a group whose buffers live on a GPU is refused, naming a way out") {
  FakeGroup gpu(0, 2, Device{DeviceType::kCuda, 0});
  CHECK_THROWS_WITH_AS(gpu.monitored_barrier(), doctest::Contains("new_group(ranks"), InvalidArgument);
  CHECK(gpu.calls == 0);
}
