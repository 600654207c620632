#include "comm/process_group.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;

namespace {

// A group that records what it was asked and never talks to anyone: enough for the checks and
// the monitored_barrier logic that the base class owns.
class FakeGroup final : public ProcessGroup {
 public:
  FakeGroup(int rank, int size, Device device, Options options = {})
      : ProcessGroup(rank, size, options), device_(device) {}
  std::string backend_name() const override { return "fake"; }
  Device buffer_device() const override { return device_; }
  int calls = 0;
  Millis last_timeout{0};  // as the backend saw it

 protected:
  WorkPtr do_send(Buffer, int, SendOptions o) override { return count(o.timeout); }
  WorkPtr do_recv(Buffer, int, RecvOptions o) override { return count(o.timeout); }
  WorkPtr do_broadcast(Buffer, BroadcastOptions o) override { return count(o.timeout); }
  WorkPtr do_all_reduce(Buffer, AllReduceOptions o) override { return count(o.timeout); }
  WorkPtr do_reduce(Buffer, ReduceOptions o) override { return count(o.timeout); }
  WorkPtr do_all_gather(Buffer, Buffer, AllGatherOptions o) override { return count(o.timeout); }
  WorkPtr do_gather(Buffer, Buffer, GatherOptions o) override { return count(o.timeout); }
  WorkPtr do_scatter(Buffer, Buffer, ScatterOptions o) override { return count(o.timeout); }
  WorkPtr do_reduce_scatter(Buffer, Buffer, ReduceScatterOptions o) override { return count(o.timeout); }
  WorkPtr do_all_to_all(Buffer, Buffer, AllToAllOptions o) override { return count(o.timeout); }
  WorkPtr do_barrier(BarrierOptions o) override { return count(o.timeout); }
  void do_abort(const std::string& reason) override {
    ++aborts;
    abort_reason = reason;
  }

 public:
  int aborts = 0;
  std::string abort_reason;

 private:
  WorkPtr count(Millis timeout) {
    ++calls;
    last_timeout = timeout;
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

TEST_CASE(
    "monitored_barrier: a world of one returns at once; rank 0 hears from every peer, then answers each") {
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

// ---- the argument checks every backend shares (ProcessGroup's public ops) ----

namespace {
const Device kGpu0{DeviceType::kCuda, 0};
}  // namespace

TEST_CASE("ops: valid calls reach the backend once each") {
  FakeGroup pg(1, 4, {});
  std::vector<float> one(2), four(8);
  pg.send(view(one.data(), 2), 0);
  pg.recv(view(one.data(), 2), 3);
  pg.broadcast(view(one.data(), 2), {.root = 3});
  pg.all_reduce(view(one.data(), 2));
  pg.reduce(view(one.data(), 2), {.root = 0, .op = ReduceOp::kMax});
  pg.all_gather(view(one.data(), 2), view(four.data(), 8));
  pg.gather(view(one.data(), 2), {}, {.root = 0});   // a non-root passes no output
  pg.scatter({}, view(one.data(), 2), {.root = 0});  // a non-root passes no input
  pg.reduce_scatter(view(four.data(), 8), view(one.data(), 2));
  pg.all_to_all(view(four.data(), 8), view(four.data(), 8));
  pg.barrier();
  CHECK(pg.calls == 11);
}

TEST_CASE("ops: a peer or root outside the group, or this rank for send/recv, is refused early") {
  FakeGroup pg(1, 4, {});
  std::vector<float> v(4);
  Buffer b = view(v.data(), 4);
  CHECK_THROWS_WITH_AS(pg.send(b, 4), doctest::Contains("rank 4 is outside the group [0, 4)"),
                       InvalidArgument);
  CHECK_THROWS_AS(pg.recv(b, -1), InvalidArgument);
  CHECK_THROWS_WITH_AS(pg.send(b, 1), doctest::Contains("send: rank 1 is this rank"), InvalidArgument);
  CHECK_THROWS_WITH_AS(pg.recv(b, 1), doctest::Contains("recv: rank 1 is this rank"), InvalidArgument);
  CHECK_THROWS_AS(pg.broadcast(b, {.root = 4}), InvalidArgument);
  CHECK_THROWS_AS(pg.reduce(b, {.root = -1}), InvalidArgument);
  CHECK_THROWS_AS(pg.gather(b, {}, {.root = 7}), InvalidArgument);
  CHECK_THROWS_AS(pg.scatter({}, b, {.root = 7}), InvalidArgument);
  CHECK(pg.calls == 0);
}

TEST_CASE("ops: buffers on another device than the backend takes are refused, naming both") {
  FakeGroup host(0, 2, {});
  std::vector<float> v(4);
  Buffer on_gpu{v.data(), 4, DType::kFloat32, kGpu0};
  CHECK_THROWS_WITH_AS(host.all_reduce(on_gpu), doctest::Contains("fake all_reduce: buffer is on cuda:0"),
                       InvalidArgument);
  CHECK_THROWS_AS(host.all_gather(view(v.data(), 2), Buffer{v.data(), 4, DType::kFloat32, kGpu0}),
                  InvalidArgument);
  FakeGroup gpu(0, 2, kGpu0);
  CHECK_THROWS_WITH_AS(gpu.broadcast(view(v.data(), 4)), doctest::Contains("takes buffers on cuda:0"),
                       InvalidArgument);
  CHECK_THROWS_AS(gpu.all_reduce(Buffer{v.data(), 4, DType::kFloat32, Device{DeviceType::kCuda, 1}}),
                  InvalidArgument);
  gpu.all_reduce(on_gpu);
  CHECK(host.calls == 0);
  CHECK(gpu.calls == 1);
}

TEST_CASE("ops: a null buffer with a count is refused; an empty one is a valid no-op for the backend") {
  FakeGroup pg(0, 2, {});
  CHECK_THROWS_WITH_AS(pg.all_reduce(Buffer{nullptr, 3, DType::kFloat32, {}}),
                       doctest::Contains("all_reduce: null buffer with count 3"), InvalidArgument);
  CHECK_THROWS_AS(pg.send(Buffer{nullptr, 1, DType::kInt8, {}}, 1), InvalidArgument);
  CHECK(pg.calls == 0);
  pg.all_reduce(Buffer{nullptr, 0, DType::kFloat32, {}});
  CHECK(pg.calls == 1);
}

TEST_CASE("ops: bitwise reductions need an integer dtype") {
  FakeGroup pg(0, 2, {});
  std::vector<float> f(4);
  std::vector<int32_t> i(4);
  for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
    CHECK_THROWS_WITH_AS(pg.all_reduce(view(f.data(), 4), {.op = op}),
                         doctest::Contains("needs an integer dtype"), InvalidArgument);
    CHECK_THROWS_AS(pg.reduce(view(f.data(), 4), {.op = op}), InvalidArgument);
    CHECK_THROWS_AS(pg.reduce_scatter(view(f.data(), 4), view(f.data(), 2), {.op = op}), InvalidArgument);
    pg.all_reduce(view(i.data(), 4), {.op = op});
  }
  CHECK(pg.calls == 3);
}

TEST_CASE("ops: world-sized buffers must hold world_size x the per-rank count, of the same dtype") {
  FakeGroup root(0, 2, {});
  std::vector<float> f(5);
  std::vector<int32_t> i(4);
  CHECK_THROWS_WITH_AS(root.all_gather(view(f.data(), 2), view(f.data(), 5)),
                       doctest::Contains("must hold world_size (2) x 2 elements, got 5"), InvalidArgument);
  CHECK_THROWS_WITH_AS(root.all_gather(view(f.data(), 2), view(i.data(), 4)),
                       doctest::Contains("dtypes differ"), InvalidArgument);
  CHECK_THROWS_AS(root.gather(view(f.data(), 2), view(f.data(), 3)), InvalidArgument);
  CHECK_THROWS_AS(root.scatter(view(f.data(), 3), view(f.data(), 2)), InvalidArgument);
  CHECK_THROWS_AS(root.reduce_scatter(view(f.data(), 3), view(f.data(), 2)), InvalidArgument);
  CHECK(root.calls == 0);
  FakeGroup leaf(1, 2, {});  // the root's buffer is not the leaf's business
  leaf.gather(view(f.data(), 2), view(f.data(), 3));
  leaf.scatter(view(f.data(), 3), view(f.data(), 2));
  CHECK(leaf.calls == 2);
}

TEST_CASE("ops: all_to_all needs equal buffers that split evenly over the ranks") {
  FakeGroup pg(0, 3, {});
  std::vector<float> f(6);
  CHECK_THROWS_WITH_AS(pg.all_to_all(view(f.data(), 6), view(f.data(), 3)),
                       doctest::Contains("input and output differ"), InvalidArgument);
  CHECK_THROWS_WITH_AS(pg.all_to_all(view(f.data(), 4), view(f.data(), 4)),
                       doctest::Contains("4 elements do not split evenly over 3 ranks"), InvalidArgument);
  CHECK(pg.calls == 0);
}

TEST_CASE("ops: an unset timeout reaches the backend as the group's; a set one as given") {
  FakeGroup pg(0, 2, {}, {.timeout = Millis(1234)});
  std::vector<float> f(2);
  pg.all_reduce(view(f.data(), 2));
  CHECK(pg.last_timeout == Millis(1234));
  pg.barrier({.timeout = Millis(7)});
  CHECK(pg.last_timeout == Millis(7));
  pg.send(view(f.data(), 2), 1);
  CHECK(pg.last_timeout == Millis(1234));
}

// ---- multi-buffer ops: the local checks (the cross-rank agreement is in comm/multi_buffer) ----

TEST_CASE("multi-buffer ops: an empty list, buffers that differ or overlap, and bad roots are refused") {
  FakeGroup g(0, 2, {});
  std::vector<float> a(16);
  std::vector<double> d(4);
  const std::vector<Buffer> none;
  const std::vector<Buffer> differ_count{view(a.data(), 4), view(a.data() + 4, 3)};
  const std::vector<Buffer> differ_dtype{view(a.data(), 4), view(d.data(), 4)};
  const std::vector<Buffer> overlapping{view(a.data(), 4), view(a.data() + 3, 4)};
  const std::vector<Buffer> ok{view(a.data(), 4), view(a.data() + 4, 4)};
  CHECK_THROWS_WITH_AS(g.all_reduce_multi(none), doctest::Contains("empty"), InvalidArgument);
  CHECK_THROWS_WITH_AS(g.all_reduce_multi(differ_count), doctest::Contains("buffer 1 holds 3"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(g.broadcast_multi(differ_dtype), doctest::Contains("float64"), InvalidArgument);
  CHECK_THROWS_WITH_AS(g.reduce_multi(overlapping), doctest::Contains("buffers 0 and 1 overlap"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(g.broadcast_multi(ok, {.root = 0, .root_index = 2}), doctest::Contains("root index 2"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(g.reduce_multi(ok, {.root = 2}), doctest::Contains("outside the group"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(g.all_reduce_multi(ok, {ReduceOp::kBxor}), doctest::Contains("integer dtype"),
                       InvalidArgument);
  CHECK(g.calls == 0);
}

TEST_CASE("all_gather_multi: one output per input, each world x K x count, none overlapping an input") {
  FakeGroup g(0, 2, {});
  std::vector<float> in(8), out(64);
  const std::vector<Buffer> inputs{view(in.data(), 4), view(in.data() + 4, 4)};
  const std::vector<Buffer> one_output{view(out.data(), 16)};
  const std::vector<Buffer> small{view(out.data(), 8), view(out.data() + 8, 8)};
  const std::vector<Buffer> onto_input{view(out.data(), 16), Buffer{in.data(), 16, DType::kFloat32, {}}};
  CHECK_THROWS_WITH_AS(g.all_gather_multi(inputs, one_output), doctest::Contains("one output per input"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(g.all_gather_multi(inputs, small), doctest::Contains("world_size"), InvalidArgument);
  CHECK_THROWS_AS(g.all_gather_multi(inputs, onto_input), InvalidArgument);
  CHECK(g.calls == 0);
}

TEST_CASE("multi-buffer ops reach the backend with the timeout resolved (agreement, then one collective)") {
  FakeGroup g(0, 2, {}, {Millis(4321)});
  std::vector<float> a(8);
  const std::vector<Buffer> ok{view(a.data(), 4), view(a.data() + 4, 4)};
  // The fake's all_gather leaves the agreement table as it was (every row alike): it agrees.
  g.all_reduce_multi(ok)->wait();
  CHECK(g.calls == 2);
  CHECK(g.last_timeout <= Millis(4321));  // what the agreement left of the timeout
  CHECK(g.last_timeout > Millis(1000));
  FakeGroup one(0, 1, {}, {Millis(1234)});  // a world of one needs no agreement
  a.assign(8, 2.0f);
  one.all_reduce_multi(ok, {ReduceOp::kAvg})->wait();
  CHECK(one.calls == 1);
  CHECK(one.last_timeout <= Millis(1234));
  CHECK(one.last_timeout > Millis(1000));
}

TEST_CASE("allocate: a backend without memory of its own gives plain host memory") {
  FakeGroup g(0, 2, Device{});
  auto m = g.allocate(4096);
  CHECK(m->bytes() == 4096);
  CHECK_FALSE(m->shared());
  g.all_reduce(m->view(1024, DType::kFloat32));
  CHECK(g.calls == 1);
}

TEST_CASE("abort: the backend's do_abort runs once, with the first reason, from any thread") {
  FakeGroup g(0, 2, Device{});
  CHECK_FALSE(g.aborted());
  std::thread other([&] { g.abort("first"); });
  other.join();
  g.abort("second");
  CHECK(g.aborted());
  CHECK(g.aborts == 1);
  CHECK(g.abort_reason == "first");
}
