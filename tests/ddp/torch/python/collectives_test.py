#!/usr/bin/env python3
"""Every torch.distributed op on the "ddp" backend against exact expected values, for several
dtypes, as one worker of a job started by ddp-launch (env://) or by itself with
--spawn N INIT_METHOD (torch.multiprocessing; tcp://auto and file://auto pick a free
port or a fresh file).

Exit status: 0 all checks passed; 1 a check failed (the message names op, dtype and rank);
Not Skipped when PyTorch or ddp_torch fails to import: this test exists only where the module
was built, so a module that does not load is a failure.
Env: DDP_TORCH_TEST_BACKEND picks ours underneath (tcp default, gloo, mpi).
"""
import datetime
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import ddp_torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64, torch.int8, torch.uint8]
N = 5  # small values: every result is exact in every dtype, even int8 and bfloat16


def expect(name, got, want):
    if not torch.equal(got, want.to(got.dtype)):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: got {got.tolist()}, want {want.tolist()}")


def base(rank, dtype, shape=(N,)):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.int64) + rank).reshape(shape).to(dtype)


def spread(rank, dtype):
    # Every rank wins MIN and MAX somewhere (for 2 and 3 ranks), so "one rank's input" is wrong.
    return ((torch.arange(N) * 7 + rank * 3) % 11).to(dtype)


def fold(values, fn):
    out = values[0].clone()
    for v in values[1:]:
        out = fn(out, v)
    return out


OFFSETS = [0, 1, 5, 6]  # the AVG of ranks' inputs is no rank's input, and exact in every dtype


def check_all_reduce(rank, world, dtype):
    t = base(rank, dtype)
    dist.all_reduce(t)
    expect(f"all_reduce SUM {dtype}", t, world * torch.arange(N) + world * (world - 1) // 2)
    for op, fn in [(dist.ReduceOp.MIN, torch.minimum), (dist.ReduceOp.MAX, torch.maximum)]:
        t = spread(rank, dtype)
        dist.all_reduce(t, op=op)
        expect(f"all_reduce {op.op if hasattr(op, 'op') else op} {dtype}", t,
               fold([spread(r, torch.int64) for r in range(world)], fn))
    t = torch.full((N,), rank + 2).to(dtype)  # 2 * 3 (* 4): no rank's input
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    prod = 1
    for r in range(world):
        prod *= r + 2
    expect(f"all_reduce PRODUCT {dtype}", t, torch.full((N,), prod))
    if dtype in FLOATS:
        t = (torch.arange(N) * 2 + OFFSETS[rank]).to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        want = torch.arange(N, dtype=torch.float64) * 2 + sum(OFFSETS[:world]) / world
        expect(f"all_reduce AVG {dtype}", t, want)
    else:
        for op, bit in [(dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
                        (dist.ReduceOp.BXOR, torch.bitwise_xor)]:
            vals = [torch.tensor([1 | (1 << r), 3, 1 << r, 0, 7]) for r in range(world)]
            t = vals[rank].to(dtype).clone()
            dist.all_reduce(t, op=op)
            expect(f"all_reduce bitwise {dtype}", t, fold(vals, bit))


def check_rooted(rank, world, dtype):
    for root in range(world):
        t = base(rank, dtype) if rank == root else torch.zeros(N, dtype=dtype)
        dist.broadcast(t, src=root)
        expect(f"broadcast root {root} {dtype}", t, base(root, dtype))
    root = world - 1
    t = base(rank, dtype)
    dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
    if rank == root:
        expect(f"reduce {dtype}", t, world * torch.arange(N) + world * (world - 1) // 2)
    mine = base(rank, dtype, (2, 3))
    outs = [torch.zeros(2, 3, dtype=dtype) for _ in range(world)] if rank == root else None
    dist.gather(mine, gather_list=outs, dst=root)
    if rank == root:
        for r in range(world):
            expect(f"gather [{r}] {dtype}", outs[r], base(r, dtype, (2, 3)))
    out = torch.zeros(2, 3, dtype=dtype)
    ins = [base(10 * r, dtype, (2, 3)) for r in range(world)] if rank == 0 else None
    dist.scatter(out, scatter_list=ins, src=0)
    expect(f"scatter {dtype}", out, base(10 * rank, dtype, (2, 3)))


def check_gathers(rank, world, dtype):
    mine = base(rank, dtype, (2, 2))
    outs = [torch.zeros(2, 2, dtype=dtype) for _ in range(world)]
    dist.all_gather(outs, mine)
    for r in range(world):
        expect(f"all_gather [{r}] {dtype}", outs[r], base(r, dtype, (2, 2)))
    flat = torch.zeros(world * 4, dtype=dtype)
    dist._all_gather_base(flat, mine)
    expect(f"_all_gather_base {dtype}", flat, torch.cat([base(r, dtype, (4,)) for r in range(world)]))
    ins = [base(rank + r, dtype) for r in range(world)]
    out = torch.zeros(N, dtype=dtype)
    dist.reduce_scatter(out, ins)
    expect(f"reduce_scatter {dtype}", out, sum(torch.arange(N) + r + rank for r in range(world)))
    flat_in = torch.cat(ins)
    out = torch.zeros(N, dtype=dtype)
    dist._reduce_scatter_base(out, flat_in)
    expect(f"_reduce_scatter_base {dtype}", out, sum(torch.arange(N) + r + rank for r in range(world)))


def check_all_to_all(rank, world, dtype):
    # Rank r sends block j = [10*r + j] * 2 to rank j.
    inp = torch.cat([torch.full((2,), 10 * rank + j) for j in range(world)]).to(dtype)
    out = torch.zeros(2 * world, dtype=dtype)
    dist.all_to_all_single(out, inp)
    expect(f"all_to_all_single {dtype}", out, torch.cat([torch.full((2,), 10 * r + rank) for r in range(world)]))
    # Unequal splits: rank r sends r + j + 1 rows of two elements, all 10 r + j, to rank j.
    inp = torch.cat([torch.full((rank + j + 1, 2), 10 * rank + j) for j in range(world)]).to(dtype)
    want = torch.cat([torch.full((j + rank + 1, 2), 10 * j + rank) for j in range(world)])
    out = torch.zeros(want.shape, dtype=dtype)
    splits = [rank + j + 1 for j in range(world)]
    dist.all_to_all_single(out, inp, output_split_sizes=splits, input_split_sizes=splits)
    expect(f"all_to_all_single unequal splits {dtype}", out, want)
    outs = [torch.zeros(3, dtype=dtype) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((3,), 10 * rank + j).to(dtype) for j in range(world)])
    for r in range(world):
        expect(f"all_to_all [{r}] {dtype}", outs[r], torch.full((3,), 10 * r + rank))


def check_point_to_point(rank, world, dtype):
    right, left = (rank + 1) % world, (rank - 1) % world
    send = base(rank, dtype)
    recv = torch.zeros(N, dtype=dtype)
    reqs = [dist.isend(send, right, tag=7), dist.irecv(recv, left, tag=7)]
    for r in reqs:
        r.wait()
    expect(f"isend/irecv ring {dtype}", recv, base(left, dtype))
    if rank == 0:
        dist.send(base(42, dtype), 1)
    elif rank == 1:
        t = torch.zeros(N, dtype=dtype)
        dist.recv(t, 0)
        expect(f"send/recv {dtype}", t, base(42, dtype))


def check_async_and_futures(rank, world):
    t = torch.ones(1000) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed(), "async all_reduce did not complete"
    expect("async all_reduce", t, torch.ones(1000) * (world * (world + 1) // 2))
    t = torch.ones(3) * rank
    fut = dist.all_reduce(t, async_op=True).get_future()
    (result,) = fut.wait()
    expect("future all_reduce", result, torch.ones(3) * (world * (world - 1) // 2))
    chained = fut.then(lambda f: f.value()[0] * 2).wait()
    expect("future then", chained, torch.ones(3) * world * (world - 1))
    ts = [torch.ones(4) * rank, torch.ones(2) * (rank + 1)]
    dist.all_reduce_coalesced(ts)
    expect("all_reduce_coalesced [0]", ts[0], torch.ones(4) * (world * (world - 1) // 2))
    expect("all_reduce_coalesced [1]", ts[1], torch.ones(2) * (world * (world + 1) // 2))
    empty = torch.zeros(0)
    dist.all_reduce(empty)
    dist.barrier()


def check_coalesced_any_source_sparse(rank, world):
    ins = [base(rank, torch.float32, (2, 3)), base(10 * rank, torch.float32, (4,))]
    outs = [[torch.zeros(2, 3), torch.zeros(4)] for _ in range(world)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(world):
        expect(f"all_gather_coalesced [{r}][0]", outs[r][0], base(r, torch.float32, (2, 3)))
        expect(f"all_gather_coalesced [{r}][1]", outs[r][1], base(10 * r, torch.float32, (4,)))
    # Rank 0 receives from any source once per other rank; each message names its sender. mpi
    # underneath refuses it, clearly.
    if ddp_torch.backend() == "mpi":
        if rank == 0:
            try:
                dist.recv(torch.zeros(N))
            except RuntimeError as e:
                assert "no receive from any source" in str(e), e
            else:
                raise AssertionError("recv from any source on mpi: no error")
    elif rank == 0:
        senders = []
        for i in range(world - 1):
            t = torch.zeros(N)
            if i % 2 == 0:
                src = dist.recv(t)
            else:
                work = dist.irecv(t)
                work.wait()
                src = work._source_rank()
            expect(f"recv from any source (rank {src})", t, base(100 + src, torch.float32))
            senders.append(src)
        assert sorted(senders) == list(range(1, world)), senders
    else:
        dist.send(base(100 + rank, torch.float32), 0)
    # Sparse SUM: rank r holds 1 at index r and r + 1 at index world.
    sparse = torch.sparse_coo_tensor(torch.tensor([[rank, world]]), torch.tensor([1.0, rank + 1.0]), (world + 1,))
    dist.all_reduce(sparse)
    expect("sparse all_reduce", sparse.to_dense(), torch.tensor([1.0] * world + [world * (world + 1) / 2]))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)


def check_subgroup(rank, world):
    if world < 3:
        return
    evens = dist.new_group([0, 2], backend="ddp")
    t = torch.ones(2) * rank
    if rank in (0, 2):
        dist.all_reduce(t, group=evens)
        expect("subgroup [0, 2] all_reduce", t, torch.ones(2) * 2)
    dist.barrier()


def worker(rank, world, init_method):
    # A worker still here after 180 s (ctest's limit is 240 s) prints every thread's stack and
    # exits non-zero: a hang shows where it is instead of ending as a bare timeout.
    faulthandler.dump_traceback_later(180, exit=True)
    if os.environ.get("DDP_TORCH_TEST_BACKEND"):
        ddp_torch.set_backend(os.environ["DDP_TORCH_TEST_BACKEND"])
    if init_method == "env://":
        dist.init_process_group("ddp")
    else:
        dist.init_process_group("ddp", init_method=init_method, rank=rank, world_size=world)
    assert dist.get_backend() == "ddp", dist.get_backend()
    rank, world = dist.get_rank(), dist.get_world_size()
    for dtype in FLOATS + INTS:
        check_all_reduce(rank, world, dtype)
        check_rooted(rank, world, dtype)
        check_gathers(rank, world, dtype)
        check_all_to_all(rank, world, dtype)
        check_point_to_point(rank, world, dtype)
    check_async_and_futures(rank, world)
    check_coalesced_any_source_sparse(rank, world)
    check_subgroup(rank, world)
    dist.destroy_process_group()
    print(f"rank {rank}/{world}: every op matched on {ddp_torch.backend()} ({init_method})", flush=True)


def spawned(rank, world, init_method):
    try:
        worker(rank, world, init_method)
    except Exception as e:  # one line per failure, then a non-zero exit for mp.spawn
        print(f"FAIL rank {rank}: {e}", flush=True)
        os._exit(1)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--spawn":
        world, init_method = int(sys.argv[2]), sys.argv[3]
        if init_method == "tcp://auto":
            from ports import free_port
            init_method = f"tcp://127.0.0.1:{free_port()}"
        elif init_method == "file://auto":
            import tempfile
            init_method = f"file://{tempfile.mkdtemp()}/rendezvous"
        import torch.multiprocessing as mp
        mp.spawn(spawned, args=(world, init_method), nprocs=world)
        return 0
    for ours, theirs in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if ours not in os.environ and theirs in os.environ:  # under mpirun (PyTorch's env:// wants RANK)
            os.environ[ours] = os.environ[theirs]
    try:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
    except Exception as e:
        print(f"FAIL rank {os.environ.get('RANK')}: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
