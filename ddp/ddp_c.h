/* libddp's C ABI: process groups, collectives and the DDP engine for C, Python (ctypes) and any
 * language with a C FFI.
 *
 * Contract:
 * - Every function returns a ddp_status: 0 (DDP_OK) on success, a distinct code per error class
 *   otherwise; ddp_last_error() then gives the message (thread-local: the last failure on the
 *   calling thread; valid until that thread's next failing call). Out-parameters are written
 *   only on success. Functions never abort the process.
 * - Objects are opaque handles created and freed by the library (ddp_*_free / _destroy).
 * - A NULL ddp_group_t* means the default group of ddp_init_process_group.
 * - Buffers of collectives live where the group's do: host memory, or for an nccl group its
 *   GPU (device pointers). Engine parameters and buffers name their device (-1 host, >= 0 a
 *   CUDA ordinal; CUDA needs an nccl backend build). The caller keeps buffers alive and
 *   untouched until the op (or its ddp_work_t) completes.
 * - Collectives follow torch.distributed: every rank calls them in the same order; count is
 *   per rank for all_gather/gather/scatter/reduce_scatter (the large buffer holds
 *   world_size * count elements), and the total input count for all_to_all.
 * - Thread-safety: as the C++ API; handles may be used from any thread, not concurrently
 *   for the same engine (except ddp_engine_mark_ready).
 */
#ifndef DDP_DDP_C_H
#define DDP_DDP_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DDP_C_API __attribute__((visibility("default")))
#else
#define DDP_C_API
#endif

typedef enum ddp_status {
  DDP_OK = 0,
  DDP_ERROR_INVALID_ARGUMENT = 1, /* bad input or misuse; nothing was changed */
  DDP_ERROR_TIMEOUT = 2,          /* a deadline passed (the message names the op and ranks) */
  DDP_ERROR_NETWORK = 3,          /* a peer was lost: rebuild the group */
  DDP_ERROR_STORE = 4,            /* the rendezvous store failed */
  DDP_ERROR_BACKEND = 5,          /* Gloo, MPI, NCCL or CUDA reported a failure */
  DDP_ERROR_SYSTEM = 6,           /* a system call failed */
  DDP_ERROR_NOT_INITIALIZED = 7,  /* no default group: call ddp_init_process_group */
  DDP_ERROR_INTERNAL = 8          /* anything else (out of memory, a bug) */
} ddp_status;

/* Same order as ddp::comm::DType and ddp::comm::ReduceOp. */
typedef enum ddp_dtype {
  DDP_FLOAT32 = 0,
  DDP_FLOAT64 = 1,
  DDP_FLOAT16 = 2,
  DDP_BFLOAT16 = 3,
  DDP_INT8 = 4,
  DDP_UINT8 = 5,
  DDP_INT32 = 6,
  DDP_INT64 = 7
} ddp_dtype;

typedef enum ddp_reduce_op {
  DDP_SUM = 0,
  DDP_PRODUCT = 1,
  DDP_MIN = 2,
  DDP_MAX = 3,
  DDP_AVG = 4,
  DDP_BAND = 5,
  DDP_BOR = 6,
  DDP_BXOR = 7
} ddp_reduce_op;

typedef enum ddp_comm_hook {
  DDP_HOOK_ALLREDUCE = 0, /* average in the gradients' own precision (the default) */
  DDP_HOOK_FP16 = 1,      /* communicate in float16 */
  DDP_HOOK_BF16 = 2       /* communicate in bfloat16 */
} ddp_comm_hook;

typedef struct ddp_group ddp_group_t;
typedef struct ddp_work ddp_work_t;
typedef struct ddp_engine ddp_engine_t;

DDP_C_API const char* ddp_last_error(void);
DDP_C_API const char* ddp_status_name(int status);
DDP_C_API const char* ddp_version(void);

/* ---- process groups ---------------------------------------------------------------------- */
/* backend: "tcp", "gloo", "mpi", "nccl" (NULL: "tcp"); init_method: "env://" (NULL),
 * "tcp://host:port", "file:///path"; rank/world_size -1: from the init method or environment;
 * timeout_ms <= 0: DDP_TIMEOUT_MS or the default. */
DDP_C_API int ddp_init_process_group(const char* backend, const char* init_method, int rank, int world_size,
                                     int64_t timeout_ms);
/* Drops the default group (ddp_destroy_process_group in torch terms). A no-op when none. */
DDP_C_API int ddp_finalize(void);
DDP_C_API int ddp_is_initialized(void); /* 1 or 0; never fails */
DDP_C_API int ddp_get_rank(ddp_group_t* group, int* rank);
DDP_C_API int ddp_get_world_size(ddp_group_t* group, int* world_size);
/* A subgroup of the default group: every rank calls it; non-members get *group = NULL. */
DDP_C_API int ddp_new_group(const int* ranks, int n, ddp_group_t** group);
DDP_C_API void ddp_group_free(ddp_group_t* group);

/* Memory for a group's buffers (ProcessGroup::allocate), 64-byte aligned and zeroed. Collective:
 * every rank of the group calls it with the same bytes, in the same order. On tcp within a host it
 * is shared memory, and an all_reduce of a buffer in it (at the same offset on every rank) runs in
 * place; elsewhere plain memory. ddp_mem_free is local; NULL is a no-op, a pointer that
 * ddp_mem_alloc did not return an InvalidArgument. Memory outlives its group until freed. */
DDP_C_API int ddp_mem_alloc(ddp_group_t* g, size_t bytes, void** data);
DDP_C_API int ddp_mem_free(void* data);

/* ---- collectives: blocking ---------------------------------------------------------------- */
DDP_C_API int ddp_send(ddp_group_t* g, const void* buf, size_t count, int dtype, int dst, int tag);
DDP_C_API int ddp_recv(ddp_group_t* g, void* buf, size_t count, int dtype, int src, int tag);
DDP_C_API int ddp_broadcast(ddp_group_t* g, void* buf, size_t count, int dtype, int root);
DDP_C_API int ddp_all_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op);
DDP_C_API int ddp_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op, int root);
DDP_C_API int ddp_all_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype);
DDP_C_API int ddp_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int root);
DDP_C_API int ddp_scatter(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int root);
DDP_C_API int ddp_reduce_scatter(ddp_group_t* g, const void* in, void* out, size_t count, int dtype, int op);
DDP_C_API int ddp_all_to_all(ddp_group_t* g, const void* in, void* out, size_t count, int dtype);
DDP_C_API int ddp_barrier(ddp_group_t* g);
DDP_C_API int ddp_monitored_barrier(ddp_group_t* g, int64_t timeout_ms);

/* ---- multi-buffer collectives (the seed's *_multigpu; C++: ProcessGroup::*_multi) ----------
 * A process passes n buffers of count elements each (one per local GPU, or any n views); the op
 * runs over all world_size * n of them, buffer i of rank r acting as rank r*n + i. n, count,
 * dtype and root_index must agree on every rank (else DDP_ERROR_INVALID_ARGUMENT on every rank,
 * naming the rank and field that differ). devices: NULL (every buffer where the group's buffers
 * live) or n entries (-1 host, >= 0 a CUDA ordinal: one per buffer on an nccl group; a tcp group
 * stages them through the host). Blocking. AVG divides by world_size * n. all_gather_multi: each
 * of the n outputs holds world_size * n * count elements, input i of rank r at (r*n + i)*count. */
DDP_C_API int ddp_all_reduce_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count,
                                   int dtype, int op);
DDP_C_API int ddp_broadcast_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count,
                                  int dtype, int root, int root_index);
/* Only buffer root_index of rank root receives the result; every other buffer is an input. */
DDP_C_API int ddp_reduce_multi(ddp_group_t* g, void* const* bufs, const int* devices, int n, size_t count,
                               int dtype, int op, int root, int root_index);
DDP_C_API int ddp_all_gather_multi(ddp_group_t* g, const void* const* in, void* const* out,
                                   const int* devices, int n, size_t count, int dtype);

/* ---- collectives: asynchronous (the same arguments, plus the Work handle) ------------------ */
DDP_C_API int ddp_isend(ddp_group_t* g, const void* buf, size_t count, int dtype, int dst, int tag,
                        ddp_work_t** work);
DDP_C_API int ddp_irecv(ddp_group_t* g, void* buf, size_t count, int dtype, int src, int tag,
                        ddp_work_t** work);
DDP_C_API int ddp_ibroadcast(ddp_group_t* g, void* buf, size_t count, int dtype, int root, ddp_work_t** work);
DDP_C_API int ddp_iall_reduce(ddp_group_t* g, void* buf, size_t count, int dtype, int op, ddp_work_t** work);
DDP_C_API int ddp_iall_gather(ddp_group_t* g, const void* in, void* out, size_t count, int dtype,
                              ddp_work_t** work);
/* Waits (timeout_ms <= 0: the op's own deadline) and returns the op's status. */
DDP_C_API int ddp_work_wait(ddp_work_t* work, int64_t timeout_ms);
DDP_C_API int ddp_work_is_completed(ddp_work_t* work, int* completed);
/* Frees the handle; an op still running keeps running (its buffers must stay alive). */
DDP_C_API void ddp_work_free(ddp_work_t* work);

/* ---- the DDP engine ------------------------------------------------------------------------ */
typedef struct ddp_engine_options {
  uint32_t struct_size; /* sizeof(ddp_engine_options), set by ddp_engine_options_init */
  int broadcast_at_construction;
  int broadcast_buffers;
  double first_bucket_cap_mb;
  double bucket_cap_mb;
  int gradient_as_bucket_view;
  int find_unused_parameters;
  int static_graph;
  int rebuild_buckets;
  double gradient_predivide_factor;
} ddp_engine_options;

/* The defaults of ddp::EngineOptions. */
DDP_C_API void ddp_engine_options_init(ddp_engine_options* options);
/* options NULL: the defaults. */
DDP_C_API int ddp_engine_create(ddp_group_t* group, const ddp_engine_options* options, ddp_engine_t** engine);
DDP_C_API void ddp_engine_destroy(ddp_engine_t* engine);
/* A tensor the engine is to know: a parameter (with its gradient) or a buffer. */
typedef struct ddp_tensor_options {
  uint32_t struct_size; /* sizeof(ddp_tensor_options), set by ddp_tensor_options_init */
  const char* name;     /* required, unique per engine */
  void* data;
  void* grad;           /* parameters: NULL with gradient_as_bucket_view (then use
                         * ddp_engine_grad); buffers: must be NULL */
  size_t count;         /* elements of data (and of grad) */
  int dtype;            /* ddp_dtype; default DDP_FLOAT32 */
  int device;           /* -1 host (the default), >= 0 a CUDA ordinal */
  const int64_t* shape; /* NULL/0 (the default): a flat tensor of count elements */
  int ndim;
} ddp_tensor_options;

/* The defaults above: no name, no memory, float32 on the host, flat. */
DDP_C_API void ddp_tensor_options_init(ddp_tensor_options* options);
/* *id (when id is not NULL) names the parameter in ddp_engine_mark_ready / ddp_engine_grad. */
DDP_C_API int ddp_engine_register_param(ddp_engine_t* e, const ddp_tensor_options* param, size_t* id);
DDP_C_API int ddp_engine_register_buffer(ddp_engine_t* e, const ddp_tensor_options* buffer, size_t* id);
DDP_C_API int ddp_engine_set_comm_hook(ddp_engine_t* e, int hook);
DDP_C_API int ddp_engine_finalize(ddp_engine_t* e);
DDP_C_API int ddp_engine_pre_forward(ddp_engine_t* e);
DDP_C_API int ddp_engine_mark_ready(ddp_engine_t* e, size_t id);
DDP_C_API int ddp_engine_finish_backward(ddp_engine_t* e);
/* The gradient's current memory (moves once, at the rebuild in the first finish_backward). */
DDP_C_API int ddp_engine_grad(ddp_engine_t* e, size_t id, void** data);
DDP_C_API int ddp_engine_no_sync_enter(ddp_engine_t* e);
DDP_C_API int ddp_engine_no_sync_exit(ddp_engine_t* e);
/* Join for uneven inputs: join_begin before the loop (every rank), join when out of data
 * (shadows the others until all joined, then ends the Join). */
DDP_C_API int ddp_engine_join_begin(ddp_engine_t* e, int divide_by_initial_world_size);
DDP_C_API int ddp_engine_join(ddp_engine_t* e);
DDP_C_API int ddp_engine_num_buckets(ddp_engine_t* e, size_t* n);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DDP_DDP_C_H */
