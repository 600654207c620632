// The C ABI of the DDP engine: thin wrappers over ddp::Engine and ddp::Join.
#include <vector>

#include "common/error.h"
#include "ddp/comm_hook.h"
#include "ddp/ddp_c.h"
#include "ddp/ddp_c_internal.h"

using namespace ddp;
using namespace ddp::capi;

namespace {

Engine& engine_of(ddp_engine_t* e) {
  if (!e || !e->engine) DDP_THROW(InvalidArgument, "NULL engine handle");
  return *e->engine;
}

std::vector<int64_t> shape_of(const int64_t* shape, int ndim) {
  if (ndim < 0 || (ndim > 0 && !shape)) DDP_THROW(InvalidArgument, "bad shape (ndim ", ndim, ")");
  return std::vector<int64_t>(shape, shape + ndim);
}

EngineOptions options_of(const ddp_engine_options* o) {
  EngineOptions out;
  if (!o) return out;
  if (o->struct_size != sizeof(ddp_engine_options)) {
    DDP_THROW(InvalidArgument, "ddp_engine_options.struct_size is ", o->struct_size, ", expected ",
              sizeof(ddp_engine_options), ": call ddp_engine_options_init first");
  }
  out.broadcast_at_construction = o->broadcast_at_construction != 0;
  out.broadcast_buffers = o->broadcast_buffers != 0;
  out.first_bucket_cap_mb = o->first_bucket_cap_mb;
  out.bucket_cap_mb = o->bucket_cap_mb;
  out.gradient_as_bucket_view = o->gradient_as_bucket_view != 0;
  out.find_unused_parameters = o->find_unused_parameters != 0;
  out.static_graph = o->static_graph != 0;
  out.rebuild_buckets = o->rebuild_buckets != 0;
  out.gradient_predivide_factor = o->gradient_predivide_factor;
  return out;
}

// A registration's options, checked: initialized (struct_size) and named.
const ddp_tensor_options& tensor_options_of(const char* op, const ddp_tensor_options* t) {
  DDP_CHECK(t != nullptr, op, ": NULL options");
  if (t->struct_size != sizeof(ddp_tensor_options)) {
    DDP_THROW(InvalidArgument, op, ": ddp_tensor_options.struct_size is ", t->struct_size, ", expected ",
              sizeof(ddp_tensor_options), ": call ddp_tensor_options_init first");
  }
  DDP_CHECK(t->name != nullptr, op, ": NULL name");
  return *t;
}

}  // namespace

extern "C" {

void ddp_engine_options_init(ddp_engine_options* o) {
  if (!o) return;
  EngineOptions d;
  o->struct_size = sizeof(ddp_engine_options);
  o->broadcast_at_construction = d.broadcast_at_construction;
  o->broadcast_buffers = d.broadcast_buffers;
  o->first_bucket_cap_mb = d.first_bucket_cap_mb;
  o->bucket_cap_mb = d.bucket_cap_mb;
  o->gradient_as_bucket_view = d.gradient_as_bucket_view;
  o->find_unused_parameters = d.find_unused_parameters;
  o->static_graph = d.static_graph;
  o->rebuild_buckets = d.rebuild_buckets;
  o->gradient_predivide_factor = d.gradient_predivide_factor;
}

int ddp_engine_create(ddp_group_t* group, const ddp_engine_options* options, ddp_engine_t** engine) {
  return guard([&] {
    DDP_CHECK(engine != nullptr, "ddp_engine_create: NULL output");
    auto e = std::make_unique<ddp_engine>();
    e->engine = std::make_unique<Engine>(group_of(group), options_of(options));
    *engine = e.release();
  });
}

void ddp_engine_destroy(ddp_engine_t* engine) { delete engine; }

void ddp_tensor_options_init(ddp_tensor_options* options) {
  if (!options) return;
  *options = ddp_tensor_options{};
  options->struct_size = sizeof(ddp_tensor_options);
  options->dtype = DDP_FLOAT32;
  options->device = -1;
}

int ddp_engine_register_param(ddp_engine_t* e, const ddp_tensor_options* param, size_t* id) {
  return guard([&] {
    const ddp_tensor_options& t = tensor_options_of("ddp_engine_register_param", param);
    ParamSpec spec{t.name, buffer_of(t.data, t.count, t.dtype, t.device), {}, shape_of(t.shape, t.ndim)};
    if (t.grad) spec.grad = buffer_of(t.grad, t.count, t.dtype, t.device);
    size_t index = engine_of(e).register_param(std::move(spec));
    if (id) *id = index;
  });
}

int ddp_engine_register_buffer(ddp_engine_t* e, const ddp_tensor_options* buffer, size_t* id) {
  return guard([&] {
    const ddp_tensor_options& t = tensor_options_of("ddp_engine_register_buffer", buffer);
    DDP_CHECK(t.grad == nullptr, "ddp_engine_register_buffer: buffer '", t.name,
              "' has a grad (buffers have none)");
    BufferSpec spec{t.name, buffer_of(t.data, t.count, t.dtype, t.device), shape_of(t.shape, t.ndim)};
    size_t index = engine_of(e).register_buffer(std::move(spec));
    if (id) *id = index;
  });
}

int ddp_engine_set_comm_hook(ddp_engine_t* e, int hook) {
  return guard([&] {
    switch (hook) {
      case DDP_HOOK_ALLREDUCE: return engine_of(e).register_comm_hook(allreduce_hook());
      case DDP_HOOK_FP16: return engine_of(e).register_comm_hook(fp16_compress_hook());
      case DDP_HOOK_BF16: return engine_of(e).register_comm_hook(bf16_compress_hook());
      default: DDP_THROW(InvalidArgument, "unknown ddp_comm_hook ", hook);
    }
  });
}

int ddp_engine_finalize(ddp_engine_t* e) {
  return guard([&] { engine_of(e).finalize(); });
}
int ddp_engine_pre_forward(ddp_engine_t* e) {
  return guard([&] { engine_of(e).pre_forward(); });
}
int ddp_engine_mark_ready(ddp_engine_t* e, size_t id) {
  return guard([&] { engine_of(e).mark_ready(id); });
}
int ddp_engine_finish_backward(ddp_engine_t* e) {
  return guard([&] { engine_of(e).finish_backward(); });
}

int ddp_engine_grad(ddp_engine_t* e, size_t id, void** data) {
  return guard([&] {
    DDP_CHECK(data != nullptr, "ddp_engine_grad: NULL output");
    *data = engine_of(e).grad(id).data;
  });
}

int ddp_engine_no_sync_enter(ddp_engine_t* e) {
  return guard([&] {
    DDP_CHECK(!engine_of(e).in_no_sync(), "ddp_engine_no_sync_enter: already inside no_sync");
    engine_of(e).set_no_sync(true);
  });
}

int ddp_engine_no_sync_exit(ddp_engine_t* e) {
  return guard([&] {
    DDP_CHECK(engine_of(e).in_no_sync(), "ddp_engine_no_sync_exit: not inside no_sync");
    engine_of(e).set_no_sync(false);
  });
}

int ddp_engine_join_begin(ddp_engine_t* e, int divide_by_initial_world_size) {
  return guard([&] {
    Engine& engine = engine_of(e);
    DDP_CHECK(!e->join, "ddp_engine_join_begin: a join is already active");
    e->join = std::make_unique<Join>(engine, JoinOptions{divide_by_initial_world_size != 0});
  });
}

int ddp_engine_join(ddp_engine_t* e) {
  return guard([&] {
    engine_of(e);
    DDP_CHECK(e->join != nullptr, "ddp_engine_join: call ddp_engine_join_begin first");
    std::unique_ptr<Join> join = std::move(e->join);  // ends the Join whatever happens
    join->join();
  });
}

int ddp_engine_num_buckets(ddp_engine_t* e, size_t* n) {
  return guard([&] {
    DDP_CHECK(n != nullptr, "ddp_engine_num_buckets: NULL output");
    *n = engine_of(e).buckets().size();
  });
}

}  // extern "C"
