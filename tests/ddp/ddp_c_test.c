/* The C ABI driven from C (compiled as C, linked against libddp.so): real processes (fork),
 * a file:// rendezvous, every collective, the engine (overlap, no_sync, join, fp16 hook), and
 * the error codes. Usage: ddp_c_test <backend>. Exit 0 on success; failures print their line.
 * Every process arms alarm(): a bug can fail this test but never hang it. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/ddp_c.h"

#define WORLD 3
#define DEADLINE_S 120

static int failures = 0;
static int g_rank = -1; /* -1 in the parent */

#define EXPECT(cond)                                                                                       \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      fprintf(stderr, "rank %d: %s:%d: expected %s (last error: %s)\n", g_rank, __FILE__, __LINE__, #cond, \
              ddp_last_error());                                                                           \
      ++failures;                                                                                          \
    }                                                                                                      \
  } while (0)
#define OK(call) EXPECT((call) == DDP_OK)

/* Rank k's input at i for MIN and MAX: distinct over k < 11 at every i, and each k holds the
 * largest at one i and the smallest at another. */
static double spread(int k, int i) { return (double)((i + 3 * k) % 11); }

/* The maximum (is_max) or minimum over ranks 0..n-1 of spread(k, i). */
static double extreme(int n, int i, int is_max) {
  double acc = spread(0, i);
  for (int k = 1; k < n; ++k) acc = is_max ? fmax(acc, spread(k, i)) : fmin(acc, spread(k, i));
  return acc;
}

static void test_collectives(int rank) {
  int r = -1, n = -1;
  OK(ddp_get_rank(NULL, &r));
  OK(ddp_get_world_size(NULL, &n));
  EXPECT(r == rank && n == WORLD);

  float x[4] = {1.0f + rank, 2.0f, 3.0f, (float)rank};
  OK(ddp_all_reduce(NULL, x, 4, DDP_FLOAT32, DDP_SUM));
  EXPECT(x[0] == 1 + 2 + 3 && x[1] == 6 && x[3] == 0 + 1 + 2);

  /* Group memory: tcp reduces it in place (shared memory on this host); the others take it as
   * plain memory. Either way the all_reduce is exact and the memory frees once. */
  enum { kMemCount = 1 << 18 };
  float* m = NULL;
  OK(ddp_mem_alloc(NULL, kMemCount * sizeof(float), (void**)&m));
  EXPECT(m != NULL && (uintptr_t)m % 64 == 0 && m[100] == 0.0f);
  for (int i = 0; i < kMemCount; ++i) m[i] = (float)(rank + i % 7);
  OK(ddp_all_reduce(NULL, m, kMemCount, DDP_FLOAT32, DDP_SUM));
  int exact = 1;
  for (int i = 0; i < kMemCount; ++i) exact = exact && m[i] == (float)(0 + 1 + 2 + WORLD * (i % 7));
  EXPECT(exact);
  OK(ddp_mem_free(m));
  EXPECT(ddp_mem_free(m) == DDP_ERROR_INVALID_ARGUMENT);
  OK(ddp_mem_free(NULL));
  EXPECT(ddp_mem_alloc(NULL, 64, NULL) == DDP_ERROR_INVALID_ARGUMENT);

  int64_t b[2] = {rank == 1 ? 42 : 0, rank == 1 ? -7 : 0};
  OK(ddp_broadcast(NULL, b, 2, DDP_INT64, 1));
  EXPECT(b[0] == 42 && b[1] == -7);

  int32_t mine = rank * 10, all[WORLD] = {0};
  OK(ddp_all_gather(NULL, &mine, all, 1, DDP_INT32));
  EXPECT(all[0] == 0 && all[1] == 10 && all[2] == 20);

  /* MAX and MIN: rank k holds (i + 3k) mod 11, so every rank holds the answer somewhere and no
   * rank's buffer is the answer. */
  double d[11], e[11];
  for (int i = 0; i < 11; ++i) d[i] = e[i] = spread(rank, i);
  OK(ddp_reduce(NULL, d, 11, DDP_FLOAT64, DDP_MAX, 0));
  OK(ddp_all_reduce(NULL, e, 11, DDP_FLOAT64, DDP_MIN));
  for (int i = 0; i < 11; ++i) {
    if (rank == 0) EXPECT(d[i] == extreme(WORLD, i, 1));
    if (rank != 0) EXPECT(d[i] == spread(rank, i)); /* not the root: an input, untouched */
    EXPECT(e[i] == extreme(WORLD, i, 0));
  }

  int32_t g[WORLD] = {0};
  OK(ddp_gather(NULL, &mine, rank == 2 ? g : NULL, 1, DDP_INT32, 2));
  if (rank == 2) EXPECT(g[0] == 0 && g[1] == 10 && g[2] == 20);

  int32_t parts[WORLD] = {100, 101, 102}, part = -1;
  OK(ddp_scatter(NULL, rank == 0 ? parts : NULL, &part, 1, DDP_INT32, 0));
  EXPECT(part == 100 + rank);

  float rs_in[WORLD] = {1, 2, 3}, rs_out = 0;
  OK(ddp_reduce_scatter(NULL, rs_in, &rs_out, 1, DDP_FLOAT32, DDP_SUM));
  EXPECT(rs_out == (float)(WORLD * (rank + 1)));

  int32_t a2a_in[WORLD], a2a_out[WORLD];
  for (int i = 0; i < WORLD; ++i) a2a_in[i] = rank * 100 + i;
  OK(ddp_all_to_all(NULL, a2a_in, a2a_out, WORLD, DDP_INT32));
  for (int i = 0; i < WORLD; ++i) EXPECT(a2a_out[i] == i * 100 + rank);

  /* A ring of send/recv. */
  int32_t token = rank, got = -1;
  ddp_work_t* sw = NULL;
  OK(ddp_isend(NULL, &token, 1, DDP_INT32, (rank + 1) % WORLD, 5, &sw));
  OK(ddp_recv(NULL, &got, 1, DDP_INT32, (rank + WORLD - 1) % WORLD, 5));
  OK(ddp_work_wait(sw, 0));
  ddp_work_free(sw);
  EXPECT(got == (rank + WORLD - 1) % WORLD);

  float y = 1.0f;
  ddp_work_t* w = NULL;
  OK(ddp_iall_reduce(NULL, &y, 1, DDP_FLOAT32, DDP_SUM, &w));
  OK(ddp_work_wait(w, 60000));
  int done = 0;
  OK(ddp_work_is_completed(w, &done));
  EXPECT(done == 1 && y == WORLD);
  ddp_work_free(w);

  OK(ddp_barrier(NULL));

  /* Errors are local and named. */
  EXPECT(ddp_all_reduce(NULL, x, 4, 99, DDP_SUM) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ddp_last_error(), "dtype") != NULL);
  EXPECT(ddp_all_reduce(NULL, x, 4, DDP_FLOAT32, DDP_BAND) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(ddp_broadcast(NULL, x, 1, DDP_FLOAT32, WORLD) == DDP_ERROR_INVALID_ARGUMENT);
}

/* Multi-buffer collectives: two buffers per rank, buffer i of rank r acting as rank 2r + i. */
static void test_multi(int rank) {
  float a[2][3], *bufs[2] = {a[0], a[1]};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) a[i][j] = (float)(10 * (2 * rank + i) + j);
  }
  OK(ddp_all_reduce_multi(NULL, (void* const*)bufs, NULL, 2, 3, DDP_FLOAT32, DDP_SUM));
  /* sum over v < 6 of 10v + j = 150 + 6j, in both buffers */
  for (int i = 0; i < 2; ++i) EXPECT(a[i][0] == 150 && a[i][1] == 156 && a[i][2] == 162);

  int64_t b[2] = {rank == 2 ? 0 : -1, rank == 2 ? 77 : -1}, *bb[2] = {&b[0], &b[1]};
  OK(ddp_broadcast_multi(NULL, (void* const*)bb, NULL, 2, 1, DDP_INT64, 2, 1));
  EXPECT(b[0] == 77 && b[1] == 77);

  /* Virtual rank v = 2 rank + i holds (j + 3v) mod 11: each one holds the maximum somewhere. */
  int32_t r[2][11], *rb[2] = {r[0], r[1]};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 11; ++j) r[i][j] = (int32_t)spread(2 * rank + i, j);
  }
  OK(ddp_reduce_multi(NULL, (void* const*)rb, NULL, 2, 11, DDP_INT32, DDP_MAX, 1, 0));
  for (int j = 0; j < 11 && rank == 1; ++j) {
    EXPECT(r[0][j] == (int32_t)extreme(2 * WORLD, j, 1));
    EXPECT(r[1][j] == (int32_t)spread(3, j)); /* the other buffer is an input */
  }

  int32_t in[2] = {2 * rank, 2 * rank + 1}, out[2][2 * WORLD];
  const void* ins[2] = {&in[0], &in[1]};
  int32_t* outs[2] = {out[0], out[1]};
  OK(ddp_all_gather_multi(NULL, ins, (void* const*)outs, NULL, 2, 1, DDP_INT32));
  for (int i = 0; i < 2; ++i) {
    for (int v = 0; v < 2 * WORLD; ++v) EXPECT(out[i][v] == v);
  }

  /* Errors: local ones at once; a list length that differs on one rank, on every rank. */
  EXPECT(ddp_all_reduce_multi(NULL, (void* const*)bufs, NULL, 0, 3, DDP_FLOAT32, DDP_SUM) ==
         DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(ddp_broadcast_multi(NULL, (void* const*)bufs, NULL, 2, 3, DDP_FLOAT32, 0, 2) ==
         DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(ddp_all_reduce_multi(NULL, (void* const*)bufs, NULL, rank == 1 ? 1 : 2, 3, DDP_FLOAT32, DDP_SUM) ==
         DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ddp_last_error(), "rank 1 has list length 1") != NULL);
}

static void test_engine(int rank) {
  ddp_engine_options o;
  ddp_engine_options_init(&o);
  o.first_bucket_cap_mb = 16.0 / (1 << 20); /* one parameter per bucket: several launches */
  o.bucket_cap_mb = 16.0 / (1 << 20);
  ddp_engine_t* e = NULL;
  OK(ddp_engine_create(NULL, &o, &e));
  float w[4] = {(float)rank, 0, 0, 0}, gw[4], bias[4], gb[4], stats[1] = {(float)rank};
  int64_t shape[2] = {2, 2};
  size_t iw = 9, ib = 9, is = 9;
  ddp_tensor_options t;
  ddp_tensor_options_init(&t);
  EXPECT(t.struct_size == sizeof t && t.dtype == DDP_FLOAT32 && t.device == -1 && t.shape == NULL);
  t.name = "w";
  t.data = w;
  t.grad = gw;
  t.count = 4;
  t.shape = shape;
  t.ndim = 2;
  OK(ddp_engine_register_param(e, &t, &iw));
  t.name = "bad"; /* a shape of 2 elements for 4 */
  t.ndim = 1;
  EXPECT(ddp_engine_register_param(e, &t, NULL) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ddp_last_error(), "bad") != NULL);
  ddp_tensor_options_init(&t);
  t.name = "b";
  t.data = bias;
  t.grad = gb;
  t.count = 4;
  OK(ddp_engine_register_param(e, &t, &ib));
  t.struct_size = 0; /* not initialized: refused, naming the way out */
  EXPECT(ddp_engine_register_param(e, &t, NULL) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ddp_last_error(), "ddp_tensor_options_init") != NULL);
  ddp_tensor_options_init(&t);
  t.name = "stats";
  t.data = stats;
  t.count = 1;
  t.grad = gb; /* buffers have no gradient */
  EXPECT(ddp_engine_register_buffer(e, &t, NULL) == DDP_ERROR_INVALID_ARGUMENT);
  t.grad = NULL;
  OK(ddp_engine_register_buffer(e, &t, &is));
  EXPECT(iw == 0 && ib == 1 && is == 0);
  OK(ddp_engine_finalize(e));
  EXPECT(w[0] == 0.0f); /* broadcast from rank 0 */
  size_t nb = 0;
  OK(ddp_engine_num_buckets(e, &nb));
  EXPECT(nb == 2);

  /* One step with overlap: the bias (last registered) first, as backward produces it. */
  for (int i = 0; i < 4; ++i) {
    gw[i] = (float)(rank * 4 + i);
    gb[i] = 1.0f;
  }
  OK(ddp_engine_pre_forward(e));
  OK(ddp_engine_mark_ready(e, ib));
  OK(ddp_engine_mark_ready(e, iw));
  OK(ddp_engine_finish_backward(e));
  for (int i = 0; i < 4; ++i) EXPECT(fabsf(gw[i] - (4.0f + i)) < 1e-6f && gb[i] == 1.0f);

  /* no_sync: two local micro-steps accumulate, then one synchronized step reduces the sum. */
  memset(gw, 0, sizeof gw);
  memset(gb, 0, sizeof gb);
  OK(ddp_engine_no_sync_enter(e));
  EXPECT(ddp_engine_no_sync_enter(e) == DDP_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < 4; ++i) gw[i] += (float)rank;
  OK(ddp_engine_mark_ready(e, iw));
  OK(ddp_engine_finish_backward(e));
  EXPECT(gw[0] == (float)rank); /* untouched */
  OK(ddp_engine_no_sync_exit(e));
  for (int i = 0; i < 4; ++i) gw[i] += (float)rank;
  OK(ddp_engine_finish_backward(e));   /* fairseq mode: nothing marked */
  EXPECT(fabsf(gw[0] - 2.0f) < 1e-6f); /* mean of 2 * rank */

  /* Misuse: an unmarked parameter without find_unused_parameters names it. */
  OK(ddp_engine_mark_ready(e, iw));
  EXPECT(ddp_engine_finish_backward(e) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(ddp_last_error(), "'b'") != NULL);

  /* fp16 hook and join with uneven inputs: rank r runs r + 1 steps. */
  OK(ddp_engine_set_comm_hook(e, DDP_HOOK_FP16));
  OK(ddp_engine_join_begin(e, 0));
  float last = 0;
  for (int it = 0; it <= rank; ++it) {
    OK(ddp_engine_pre_forward(e));
    for (int i = 0; i < 4; ++i) {
      gw[i] = (float)(rank + 1);
      gb[i] = 0.5f;
    }
    OK(ddp_engine_mark_ready(e, iw));
    OK(ddp_engine_mark_ready(e, ib));
    OK(ddp_engine_finish_backward(e));
    last = gw[0];
    w[0] += gw[0];
  }
  OK(ddp_engine_join(e));
  if (rank == WORLD - 1) EXPECT(fabsf(last - (float)WORLD) < 1e-3f); /* alone at the end */
  float wmax = w[0], wmin = w[0];
  OK(ddp_all_reduce(NULL, &wmax, 1, DDP_FLOAT32, DDP_MAX));
  OK(ddp_all_reduce(NULL, &wmin, 1, DDP_FLOAT32, DDP_MIN));
  EXPECT(wmax == wmin); /* the model was synced from the last joiner */
  ddp_engine_destroy(e);
}

static int child(int rank, const char* backend, const char* url) {
  alarm(DEADLINE_S);
  g_rank = rank;
  int rc = ddp_init_process_group(backend, url, rank, WORLD, 60000);
  if (rc != DDP_OK) {
    fprintf(stderr, "rank %d: init failed (%s): %s\n", rank, ddp_status_name(rc), ddp_last_error());
    return 1;
  }
  EXPECT(ddp_is_initialized() == 1);
  test_collectives(rank);
  test_multi(rank);
  test_engine(rank);
  /* Last: monitored_barrier is send/recv through rank 0 (uneven per rank), which some
   * backends count into the collectives' sequence numbers. */
  OK(ddp_monitored_barrier(NULL, 60000));
  OK(ddp_finalize());
  EXPECT(ddp_is_initialized() == 0);
  if (failures) fprintf(stderr, "rank %d: %d failure(s)\n", rank, failures);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* backend = argc > 1 ? argv[1] : "tcp";
  alarm(DEADLINE_S + 10);

  /* Before init: a distinct status and a message, nothing else harmed. */
  float x = 1;
  EXPECT(ddp_all_reduce(NULL, &x, 1, DDP_FLOAT32, DDP_SUM) == DDP_ERROR_NOT_INITIALIZED);
  EXPECT(strlen(ddp_last_error()) > 0);
  EXPECT(strcmp(ddp_status_name(DDP_ERROR_TIMEOUT), "timeout") == 0);
  EXPECT(strcmp(ddp_version(), DDP_PROJECT_VERSION) == 0); /* CMake's project version */
  EXPECT(ddp_init_process_group("no-such-backend", "env://", 0, 1, 0) == DDP_ERROR_INVALID_ARGUMENT);
  EXPECT(ddp_is_initialized() == 0);
  ddp_engine_options o;
  ddp_engine_options_init(&o);
  EXPECT(o.struct_size == sizeof o && o.bucket_cap_mb == 25.0 && o.broadcast_buffers == 1);
  if (failures) return 1;

  char dir[] = "/tmp/ddp_c_test_XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char url[256];
  snprintf(url, sizeof url, "file://%s/store", dir);
  pid_t pids[WORLD];
  for (int r = 0; r < WORLD; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[r] == 0) _exit(child(r, backend, url));
  }
  int bad = 0;
  for (int r = 0; r < WORLD; ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
      bad = 1;
    }
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (!bad) printf("ddp_c_test (%s): all checks passed on %d ranks\n", backend, WORLD);
  return bad;
}
