#include "bench/collective_runners.h"

#include <cstring>
#include <vector>

#include "comm/init.h"
#include "comm/init_store.h"
#include "common/error.h"
#include "common/settings.h"

#ifdef DDP_WITH_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#endif
#ifdef DDP_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings need their own library
#include <mpi.h>
#endif

namespace ddp::bench {
namespace {

class OursRunner final : public CollectiveRunner {
 public:
  OursRunner(const OursRunner&) = delete;
  OursRunner& operator=(const OursRunner&) = delete;
  explicit OursRunner(const RunnerOptions& options) : memory_(options.memory), extra_(options.buffers - 1) {
    InitOptions o;
    o.backend = options.backend;
    pg_ = init_process_group(o);
    if (memory_.kind == MemoryKind::kCuda) {
      device_ = comm::Device{comm::DeviceType::kCuda, memory_.device};
      scratch_ = std::make_unique<BenchBuffer>(kScratch, memory_);
    }
  }
  ~OursRunner() override { destroy_process_group(); }
  int rank() const override { return pg_->rank(); }
  int size() const override { return pg_->size(); }
  void barrier() override { pg_->barrier()->wait(); }
  std::shared_ptr<comm::GroupMemory> allocate(size_t bytes) override { return pg_->allocate(bytes); }
  std::string choices() const override { return pg_->choices(); }
  void run(CollOp op, float* in, float* out, size_t count) override {
    const size_t n = static_cast<size_t>(size());
    if (!extra_.empty()) return run_multi(op, in, count);
    switch (op) {
      case CollOp::kAllReduce: pg_->all_reduce(buf(in, count))->wait(); break;
      case CollOp::kBroadcast: pg_->broadcast(buf(in, count))->wait(); break;
      case CollOp::kReduce: pg_->reduce(buf(in, count))->wait(); break;
      case CollOp::kAllGather: pg_->all_gather(buf(in, count), buf(out, count * n))->wait(); break;
      case CollOp::kGather: pg_->gather(buf(in, count), buf(out, count * n))->wait(); break;
      case CollOp::kScatter: pg_->scatter(buf(in, count * n), buf(out, count))->wait(); break;
      case CollOp::kReduceScatter: pg_->reduce_scatter(buf(in, count * n), buf(out, count))->wait(); break;
      case CollOp::kAllToAll: pg_->all_to_all(buf(in, count * n), buf(out, count * n))->wait(); break;
    }
  }
  void max_over_ranks(double* v, size_t n) override {
    DDP_CHECK(n <= kScratch / 2, "max_over_ranks of ", n, " values");
    if (!scratch_) {
      pg_->all_reduce(comm::view(v, n), {comm::ReduceOp::kMax})->wait();
      return;
    }
    // nccl reduces device memory only: the doubles go through a device scratch buffer.
    std::vector<float> words(kScratch);
    std::memcpy(words.data(), v, n * sizeof(double));
    scratch_->upload(words);
    pg_->all_reduce(comm::Buffer{scratch_->data(), n, comm::DType::kFloat64, device_}, {comm::ReduceOp::kMax})
        ->wait();
    scratch_->download(words);
    std::memcpy(v, words.data(), n * sizeof(double));
  }

 private:
  static constexpr size_t kScratch = 16;  // floats: room for 8 doubles
  comm::Buffer buf(float* p, size_t count) const {
    return comm::Buffer{p, count, comm::DType::kFloat32, device_};
  }
  // K buffers per process: `in` first, then the runner's own (host memory).
  void run_multi(CollOp op, float* in, size_t count) {
    std::vector<comm::Buffer> list{buf(in, count)};
    for (auto& e : extra_) {
      if (e.size() < count) e.resize(count);
      if (op == CollOp::kAllReduce) std::memset(e.data(), 0, count * sizeof(float));
      list.push_back(comm::view(e.data(), count));
    }
    switch (op) {
      case CollOp::kAllReduce: pg_->all_reduce_multi(list)->wait(); break;
      case CollOp::kBroadcast: pg_->broadcast_multi(list)->wait(); break;
      default: DDP_THROW(InvalidArgument, "--buffers: all_reduce and broadcast only, not ", to_string(op));
    }
  }
  BufferOptions memory_;
  std::vector<std::vector<float>> extra_;
  comm::Device device_{};
  std::unique_ptr<BenchBuffer> scratch_;
  comm::ProcessGroupPtr pg_;
};

#ifdef DDP_WITH_GLOO
// Our store seen as a Gloo rendezvous store, so gloo-direct meets where everything else does.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(std::shared_ptr<rdzv::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, rdzv::Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto b = store_->get(key);
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<rdzv::Store> store_;
};

class GlooDirectRunner final : public CollectiveRunner {
 public:
  GlooDirectRunner() {
    comm::StoreRequest request;
    request.backend = "gloo-direct";
    comm::StoreHandle h = comm::open_init_store(request);
    store_ = h.store;
    GlooStoreAdapter adapter(store_);
    gloo::rendezvous::PrefixStore prefixed("gloo-direct/" + settings::get_or(settings::kRunId, "bench"),
                                           adapter);
    gloo::transport::tcp::attr attr(
        settings::get_or(settings::kBenchGlooHost, std::string(settings::kBenchGlooHost.fallback)).c_str());
    device_ = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(h.rank, h.world_size);
    ctx->setTimeout(std::chrono::milliseconds(600'000));
    ctx->connectFullMesh(prefixed, device_);
    context_ = ctx;
  }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  void barrier() override {
    auto o = next<gloo::BarrierOptions>();
    gloo::barrier(o);
  }
  void max_over_ranks(double* v, size_t n) override {
    auto o = next<gloo::AllreduceOptions>();
    o.setOutput(v, n);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
    gloo::allreduce(o);
  }
  void run(CollOp op, float* in, float* out, size_t count) override {
    const size_t n = static_cast<size_t>(size());
    switch (op) {
      case CollOp::kAllReduce: sum(in, in, count); break;
      case CollOp::kBroadcast: {
        auto o = next<gloo::BroadcastOptions>();
        o.setOutput(in, count);
        o.setRoot(0);
        gloo::broadcast(o);
        break;
      }
      case CollOp::kReduce: {
        auto o = next<gloo::ReduceOptions>();
        o.setOutput(in, count);
        o.setRoot(0);
        o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
        gloo::reduce(o);
        break;
      }
      case CollOp::kAllGather: {
        auto o = next<gloo::AllgatherOptions>();
        o.setInput(in, count);
        o.setOutput(out, count * n);
        gloo::allgather(o);
        break;
      }
      case CollOp::kGather: {
        auto o = next<gloo::GatherOptions>();
        o.setInput(in, count);
        o.setOutput(out, count * n);
        o.setRoot(0);
        gloo::gather(o);
        break;
      }
      case CollOp::kScatter: scatter(in, out, count); break;
      case CollOp::kReduceScatter: reduce_scatter(in, out, count); break;
      case CollOp::kAllToAll: {
        auto o = next<gloo::AlltoallOptions>();
        o.setInput(in, count * n);
        o.setOutput(out, count * n);
        gloo::alltoall(o);
        break;
      }
    }
  }

 private:
  using ReduceFn = void (*)(void*, const void*, const void*, size_t);
  // Options for the next op: each takes a tag of its own.
  template <typename Options>
  Options next() {
    Options o(context_);
    o.setTag(tag_++);
    return o;
  }
  // all_reduce: the sum of `in` over ranks into `out` (in place where they are one buffer).
  void sum(float* in, float* out, size_t count) {
    auto o = next<gloo::AllreduceOptions>();
    if (in != out) o.setInput(in, count);
    o.setOutput(out, count);
    o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    gloo::allreduce(o);
  }
  // The root's input is one buffer per rank (Gloo's API): the blocks of `in`.
  void scatter(float* in, float* out, size_t count) {
    auto o = next<gloo::ScatterOptions>();
    if (rank() == 0) {
      std::vector<float*> blocks(static_cast<size_t>(size()));
      for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = in + b * count;
      o.setInputs(blocks, count);
    }
    o.setOutput(out, count);
    o.setRoot(0);
    gloo::scatter(o);
  }
  void reduce_scatter(float* in, float* out, size_t count) {
    // Gloo's options API has no reduce_scatter, and its ReduceScatterHalvingDoubling class
    // hangs in waitRecv in this harness (4 ranks: 21 runs in 25; Debian's gloo 20220518).
    // What a Gloo user can rely on is what our gloo backend does: all_reduce the whole
    // input into scratch, keep this rank's block.
    const size_t total = count * static_cast<size_t>(size());
    if (rs_scratch_.size() < total) rs_scratch_.resize(total);
    sum(in, rs_scratch_.data(), total);
    std::memcpy(out, rs_scratch_.data() + static_cast<size_t>(rank()) * count, count * sizeof(float));
  }

  std::shared_ptr<rdzv::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 1;
  std::vector<float> rs_scratch_;
};
#endif

#ifdef DDP_WITH_MPI
class MpiDirectRunner final : public CollectiveRunner {
 public:
  MpiDirectRunner(const MpiDirectRunner&) = delete;
  MpiDirectRunner& operator=(const MpiDirectRunner&) = delete;
  MpiDirectRunner() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      owns_mpi_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiDirectRunner() override {
    if (owns_mpi_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void max_over_ranks(double* v, size_t n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void run(CollOp op, float* in, float* out, size_t count) override {
    const int c = static_cast<int>(count);
    switch (op) {
      case CollOp::kAllReduce:
        check(MPI_Allreduce(MPI_IN_PLACE, in, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
      case CollOp::kBroadcast: check(MPI_Bcast(in, c, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast"); break;
      case CollOp::kReduce:
        // In place at the root; a non-root's receive buffer is not significant.
        check(MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : in, rank_ == 0 ? in : nullptr, c, MPI_FLOAT, MPI_SUM, 0,
                         MPI_COMM_WORLD),
              "MPI_Reduce");
        break;
      case CollOp::kAllGather:
        check(MPI_Allgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
        break;
      case CollOp::kGather:
        check(MPI_Gather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Gather");
        break;
      case CollOp::kScatter:
        check(MPI_Scatter(in, c, MPI_FLOAT, out, c, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Scatter");
        break;
      case CollOp::kReduceScatter:
        check(MPI_Reduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Reduce_scatter_block");
        break;
      case CollOp::kAllToAll:
        check(MPI_Alltoall(in, c, MPI_FLOAT, out, c, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Alltoall");
        break;
    }
  }

 private:
  static void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) DDP_THROW(BackendError, what, " failed with MPI error ", rc);
  }
  int rank_ = 0, size_ = 1;
  bool owns_mpi_ = false;
};
#endif

}  // namespace

CollOp parse_coll_op(const std::string& name) {
  if (name == "all_reduce" || name == "allreduce") return CollOp::kAllReduce;
  if (name == "broadcast") return CollOp::kBroadcast;
  if (name == "reduce") return CollOp::kReduce;
  if (name == "all_gather" || name == "allgather") return CollOp::kAllGather;
  if (name == "gather") return CollOp::kGather;
  if (name == "scatter") return CollOp::kScatter;
  if (name == "reduce_scatter") return CollOp::kReduceScatter;
  if (name == "all_to_all" || name == "alltoall") return CollOp::kAllToAll;
  DDP_THROW(InvalidArgument, "unknown op '", name, "' (", kCollOpNames, ")");
}

const char* to_string(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return "all_reduce";
    case CollOp::kBroadcast: return "broadcast";
    case CollOp::kReduce: return "reduce";
    case CollOp::kAllGather: return "all_gather";
    case CollOp::kGather: return "gather";
    case CollOp::kScatter: return "scatter";
    case CollOp::kReduceScatter: return "reduce_scatter";
    case CollOp::kAllToAll: return "all_to_all";
  }
  return "?";
}

std::unique_ptr<CollectiveRunner> make_runner(const RunnerOptions& options) {
  const std::string& backend = options.backend;
  const bool direct = backend == "gloo-direct" || backend == "mpi-direct";
  // Group memory is host memory: the peers take it (from their runner's allocate: plain).
  if (direct && options.memory.kind == MemoryKind::kCuda) {
    DDP_THROW(InvalidArgument, backend, " measures host buffers only (--device cpu)");
  }
  if (options.buffers > 1 && (direct || options.memory.kind != MemoryKind::kHost)) {
    DDP_THROW(InvalidArgument, "--buffers: ours on host buffers only (not ", backend,
              ", not --device cuda, not --memory group)");
  }
  if (backend == "gloo-direct") {
#ifdef DDP_WITH_GLOO
    return std::make_unique<GlooDirectRunner>();
#else
    DDP_THROW(InvalidArgument, "gloo-direct: this ddp-bench was built without Gloo");
#endif
  }
  if (backend == "mpi-direct") {
#ifdef DDP_WITH_MPI
    return std::make_unique<MpiDirectRunner>();
#else
    DDP_THROW(InvalidArgument, "mpi-direct: this ddp-bench was built without MPI");
#endif
  }
  return std::make_unique<OursRunner>(options);
}

}  // namespace ddp::bench
