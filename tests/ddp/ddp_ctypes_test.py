#!/usr/bin/env python3
"""The C ABI from Python through ctypes (no numpy): real processes (subprocess) meeting over a
file:// store, collectives, the engine (overlap, bucket views, no_sync, join) and error codes.

Usage: ddp_ctypes_test.py [backend]. Loads $DDP_LIB, else $DDP_BIN_DIR/../lib/libddp.so.
Every child has a deadline: a bug fails the test, never hangs it.
"""
import ctypes as C
import os
import subprocess
import sys
import tempfile
import threading

WORLD = 2
DEADLINE_S = 120
FLOAT32, INT32 = 0, 6
SUM, MAX = 0, 3
OK, INVALID_ARGUMENT, NOT_INITIALIZED = 0, 1, 7


def load():
    path = os.environ.get("DDP_LIB") or os.path.join(os.environ.get("DDP_BIN_DIR", "build/bin"), "..", "lib", "libddp.so")
    lib = C.CDLL(os.path.abspath(path))
    vp, sz, i32, i64 = C.c_void_p, C.c_size_t, C.c_int, C.c_int64
    sigs = {
        "ddp_last_error": ([], C.c_char_p),
        "ddp_status_name": ([i32], C.c_char_p),
        "ddp_init_process_group": ([C.c_char_p, C.c_char_p, i32, i32, i64], i32),
        "ddp_finalize": ([], i32),
        "ddp_is_initialized": ([], i32),
        "ddp_get_rank": ([vp, C.POINTER(i32)], i32),
        "ddp_all_reduce": ([vp, vp, sz, i32, i32], i32),
        "ddp_broadcast": ([vp, vp, sz, i32, i32], i32),
        "ddp_all_gather": ([vp, vp, vp, sz, i32], i32),
        "ddp_iall_reduce": ([vp, vp, sz, i32, i32, C.POINTER(vp)], i32),
        "ddp_work_wait": ([vp, i64], i32),
        "ddp_work_free": ([vp], None),
        "ddp_barrier": ([vp], i32),
        "ddp_mem_alloc": ([vp, sz, C.POINTER(vp)], i32),
        "ddp_mem_free": ([vp], i32),
        "ddp_engine_create": ([vp, vp, C.POINTER(vp)], i32),
        "ddp_engine_destroy": ([vp], None),
        "ddp_tensor_options_init": ([vp], None),
        "ddp_engine_register_param": ([vp, vp, C.POINTER(sz)], i32),
        "ddp_engine_finalize": ([vp], i32),
        "ddp_engine_pre_forward": ([vp], i32),
        "ddp_engine_mark_ready": ([vp, sz], i32),
        "ddp_engine_finish_backward": ([vp], i32),
        "ddp_engine_grad": ([vp, sz, C.POINTER(vp)], i32),
        "ddp_engine_no_sync_enter": ([vp], i32),
        "ddp_engine_no_sync_exit": ([vp], i32),
        "ddp_engine_join_begin": ([vp, i32], i32),
        "ddp_engine_join": ([vp], i32),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


class EngineOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("broadcast_at_construction", C.c_int), ("broadcast_buffers", C.c_int),
                ("first_bucket_cap_mb", C.c_double), ("bucket_cap_mb", C.c_double),
                ("gradient_as_bucket_view", C.c_int), ("find_unused_parameters", C.c_int),
                ("static_graph", C.c_int), ("rebuild_buckets", C.c_int), ("gradient_predivide_factor", C.c_double)]


class TensorOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("name", C.c_char_p), ("data", C.c_void_p), ("grad", C.c_void_p),
                ("count", C.c_size_t), ("dtype", C.c_int), ("device", C.c_int),
                ("shape", C.POINTER(C.c_int64)), ("ndim", C.c_int)]


def expect(condition, what=""):
    """An explicit check: a bare assert would vanish under python3 -O and pass everything."""
    if not condition:
        raise AssertionError(str(what) if what != "" else "check failed")


def check(lib, rc, what):
    if rc != OK:
        raise AssertionError(f"{what}: {lib.ddp_status_name(rc).decode()}: {lib.ddp_last_error().decode()}")


def floats(*values):
    return (C.c_float * len(values))(*values)


def engine_steps(lib, rank):
    opts = EngineOptions()
    lib.ddp_engine_options_init(C.byref(opts))
    expect(opts.struct_size == C.sizeof(EngineOptions), "the options struct layout differs from the header")
    opts.gradient_as_bucket_view = 1
    opts.first_bucket_cap_mb = opts.bucket_cap_mb = 8 / (1 << 20)  # one parameter per bucket
    eng = C.c_void_p()
    check(lib, lib.ddp_engine_create(None, C.byref(opts), C.byref(eng)), "engine_create")
    w, b = floats(rank, rank), floats(5, 5)
    ids = []
    for name, data in (("w", w), ("b", b)):
        i = C.c_size_t()
        t = TensorOptions()
        lib.ddp_tensor_options_init(C.byref(t))
        expect(t.struct_size == C.sizeof(TensorOptions), "the tensor options layout differs from the header")
        t.name, t.data, t.count = name.encode(), C.cast(data, C.c_void_p), 2
        check(lib, lib.ddp_engine_register_param(eng, C.byref(t), C.byref(i)), "register")
        ids.append(i.value)
    check(lib, lib.ddp_engine_finalize(eng), "finalize")
    expect(list(w) == [0.0, 0.0], f"parameters not broadcast from rank 0: {list(w)}")

    def grad(i):
        p = C.c_void_p()
        check(lib, lib.ddp_engine_grad(eng, i, C.byref(p)), "grad")
        return C.cast(p, C.POINTER(C.c_float * 2)).contents

    # Step 1, overlapped, gradients written straight into bucket memory.
    check(lib, lib.ddp_engine_pre_forward(eng), "pre_forward")
    for i in reversed(ids):
        g = grad(i)
        g[0], g[1] = float(rank + 1), float(10 * i)
        check(lib, lib.ddp_engine_mark_ready(eng, i), "mark_ready")
    check(lib, lib.ddp_engine_finish_backward(eng), "finish_backward")
    expect(list(grad(ids[0])) == [1.5, 0.0] and list(grad(ids[1])) == [1.5, 10.0], (list(grad(0)), list(grad(1))))

    # no_sync accumulation, then a synchronized step in the fairseq mode.
    for i in ids:
        g = grad(i)
        g[0] = g[1] = 0.0
    check(lib, lib.ddp_engine_no_sync_enter(eng), "no_sync_enter")
    grad(ids[0])[0] += rank
    check(lib, lib.ddp_engine_finish_backward(eng), "finish (no_sync)")
    check(lib, lib.ddp_engine_no_sync_exit(eng), "no_sync_exit")
    grad(ids[0])[0] += rank
    check(lib, lib.ddp_engine_finish_backward(eng), "finish")
    expect(grad(ids[0])[0] == 1.0, grad(ids[0])[0])  # mean of 2 * rank over ranks 0, 1

    # Join: rank 0 has one batch, rank 1 two.
    check(lib, lib.ddp_engine_join_begin(eng, 0), "join_begin")
    for _ in range(rank + 1):
        check(lib, lib.ddp_engine_pre_forward(eng), "pre_forward")
        for i in ids:
            g = grad(i)
            g[0], g[1] = float(rank + 1), 1.0
            check(lib, lib.ddp_engine_mark_ready(eng, i), "mark_ready")
        check(lib, lib.ddp_engine_finish_backward(eng), "finish")
        w[0] += grad(ids[0])[0]
    check(lib, lib.ddp_engine_join(eng), "join")
    top = floats(w[0])
    check(lib, lib.ddp_all_reduce(None, top, 1, FLOAT32, MAX), "all_reduce max")
    expect(w[0] == top[0] == 1.5 + 2.0, (w[0], top[0]))  # synced from the last joiner
    lib.ddp_engine_destroy(eng)


def worker(rank, backend, url):
    lib = load()
    check(lib, lib.ddp_init_process_group(backend.encode(), url.encode(), rank, WORLD, 60000), "init")
    r = C.c_int(-1)
    check(lib, lib.ddp_get_rank(None, C.byref(r)), "get_rank")
    expect(r.value == rank)

    x = floats(1.0 + rank, 2.0)
    check(lib, lib.ddp_all_reduce(None, x, 2, FLOAT32, SUM), "all_reduce")
    expect(list(x) == [3.0, 4.0], list(x))
    mine, every = (C.c_int32 * 1)(rank * 7), (C.c_int32 * WORLD)()
    check(lib, lib.ddp_all_gather(None, mine, every, 1, INT32), "all_gather")
    expect(list(every) == [0, 7], list(every))
    # Group memory from Python: tcp reduces it in place (shared memory on this host).
    n = 1 << 16
    ptr = C.c_void_p()
    check(lib, lib.ddp_mem_alloc(None, n * 4, C.byref(ptr)), "mem_alloc")
    z = (C.c_float * n).from_address(ptr.value)
    for i in range(n):
        z[i] = float(rank + i % 5)
    check(lib, lib.ddp_all_reduce(None, ptr, n, FLOAT32, SUM), "all_reduce in group memory")
    expect(all(z[i] == float(1 + 2 * (i % 5)) for i in range(n)), z[0])
    check(lib, lib.ddp_mem_free(ptr), "mem_free")
    expect(lib.ddp_mem_free(ptr) == INVALID_ARGUMENT)

    y = floats(2.0)
    work = C.c_void_p()
    check(lib, lib.ddp_iall_reduce(None, y, 1, FLOAT32, SUM, C.byref(work)), "iall_reduce")
    check(lib, lib.ddp_work_wait(work, 60000), "work_wait")
    lib.ddp_work_free(work)
    expect(y[0] == 4.0)

    # An error on another thread does not touch this thread's last error (thread-local).
    expect(lib.ddp_broadcast(None, x, 1, 99, 0) == INVALID_ARGUMENT)
    mine_msg = lib.ddp_last_error()
    other = []
    t = threading.Thread(target=lambda: other.append((lib.ddp_broadcast(None, x, 1, FLOAT32, 5), lib.ddp_last_error())))
    t.start()
    t.join()
    expect(other[0][0] == INVALID_ARGUMENT and other[0][1] != mine_msg and lib.ddp_last_error() == mine_msg)

    engine_steps(lib, rank)
    check(lib, lib.ddp_barrier(None), "barrier")
    check(lib, lib.ddp_finalize(), "finalize")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--rank":
        worker(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return 0
    backend = sys.argv[1] if len(sys.argv) > 1 else "tcp"
    lib = load()
    x = floats(1.0)
    expect(lib.ddp_all_reduce(None, x, 1, FLOAT32, SUM) == NOT_INITIALIZED)
    expect(b"init_process_group" in lib.ddp_last_error())
    with tempfile.TemporaryDirectory(prefix="ddp_ctypes_") as d:
        url = "file://" + os.path.join(d, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), backend, url]) for r in range(WORLD)]
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=DEADLINE_S))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                codes.append("timeout")
    if any(c != 0 for c in codes):
        print(f"ddp_ctypes_test ({backend}): ranks exited with {codes}", file=sys.stderr)
        return 1
    print(f"ddp_ctypes_test ({backend}): all checks passed on {WORLD} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
