#!/usr/bin/env python3
"""The "ddp" backend's error cases, two processes over tcp://: bad input is a clear Python
error at the call (never a crash or a silent wrong result), a collective that a peer never
joins times out naming the op, a monitored barrier names the rank that did not come, a group
destroyed with an op in flight returns, and a killed peer is named within seconds instead of a
hang.

Exit 0 ok, 1 a case failed (named); an import that fails is a failure (the module was built).
"""
import datetime
import faulthandler
import os
import sys
import time
from ports import free_port

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import ddp_torch  # noqa: F401

WORLD = 2


def raises(name, fn, *needles):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        missing = [n for n in needles if n not in text]
        if missing:
            raise AssertionError(f"{name}: error does not mention {missing}: {text}")
        return text
    raise AssertionError(f"{name}: no error raised")


def bad_input(rank):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    raises("non-contiguous", lambda: dist.all_reduce(t.t()), "not contiguous")
    raises("int16 dtype", lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16)), "dtype")
    raises("bool dtype", lambda: dist.broadcast(torch.zeros(3, dtype=torch.bool), 0), "dtype")
    raises("all_to_all splits that do not pair up",
           lambda: dist.all_to_all_single(torch.zeros(3), torch.zeros(3), [2, 1], [1, 2]), "which expects")
    raises("gather list of the wrong length",
           lambda: dist.all_gather([torch.zeros(2)], torch.zeros(2)), "list holds 1 tensors")
    raises("mismatched list element",
           lambda: dist.all_gather([torch.zeros(2), torch.zeros(3)], torch.zeros(2)), "does not match")
    raises("send to self", lambda: dist.send(torch.zeros(1), rank), "")
    # The group still works after every refusal above: nothing was sent.
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), 2.0)), t


def timeout(rank):
    # A group with a short timeout; rank 1 never joins the collective.
    short = dist.new_group([0, 1], backend="ddp", timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        text = raises("timeout", lambda: dist.all_reduce(torch.ones(8), group=short), "all_reduce")
        took = time.monotonic() - start
        if took > 20:
            raise AssertionError(f"timeout took {took:.1f} s for a 2 s timeout")
        print(f"rank 0: timeout after {took:.1f} s: {text.splitlines()[0]}", flush=True)
    dist.barrier()


def monitored_barrier_names_the_late_rank(rank):
    # dist.monitored_barrier on a ddp group (PyTorch's own refuses all but gloo): rank 1 does not
    # come, and rank 0 names it, in Gloo's words. A group of its own: the late rank's recv stays
    # behind in it.
    g = dist.new_group([0, 1], backend="ddp")
    if rank == 0:
        raises("monitored_barrier", lambda: dist.monitored_barrier(g, datetime.timedelta(seconds=1)),
               "Rank 1 failed to pass monitoredBarrier")
    dist.barrier()


def pending_at_destroy(rank):
    # Destroying a group with an op still in flight whose tensor Python no longer holds: the
    # group's threads fail the op and drop that tensor, which takes the GIL, while
    # destroy_process_group holds it. The destroy must return (it used to deadlock now and then).
    for i in range(20):
        g = dist.new_group([0, 1], backend="ddp")
        if rank == 0:
            dist.irecv(torch.ones(1 << 10), src=1, group=g)  # never sent; work and tensor dropped
        dist.destroy_process_group(g)
    if rank == 0:
        print("rank 0: 20 groups destroyed with a receive in flight", flush=True)
    dist.barrier()


def dead_peer(rank):
    dist.barrier()
    if rank == 1:
        os._exit(0)  # dies without a word
    time.sleep(0.5)
    start = time.monotonic()
    text = raises("dead peer", lambda: dist.all_reduce(torch.ones(1 << 16)), "1")
    took = time.monotonic() - start
    if "rank 1" not in text and "peer 1" not in text:
        raise AssertionError(f"dead peer: error does not name rank 1: {text}")
    if took > 30:
        raise AssertionError(f"dead peer took {took:.1f} s to detect")
    print(f"rank 0: lost peer after {took:.1f} s: {text.splitlines()[0]}", flush=True)


def worker(rank, port):
    # A worker still here after 150 s (ctest's limit is 180 s) prints its stacks and exits.
    faulthandler.dump_traceback_later(150, exit=True)
    torch.set_num_threads(1)
    try:
        dist.init_process_group("ddp", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                                timeout=datetime.timedelta(seconds=60))
        bad_input(rank)
        timeout(rank)
        monitored_barrier_names_the_late_rank(rank)
        pending_at_destroy(rank)
        dead_peer(rank)
    except Exception as e:
        print(f"FAIL rank {rank}: {e}", flush=True)
        os._exit(1)
    os._exit(0)  # the world group lost a peer: skip its teardown


def bad_backend_name():
    text = raises("unknown backend", lambda: ddp_torch.set_backend("carrier-pigeon"), "carrier-pigeon", "tcp")
    print(f"set_backend refused: {text.splitlines()[0]}", flush=True)


if __name__ == "__main__":
    bad_backend_name()
    mp.spawn(worker, args=(free_port(),), nprocs=WORLD)
    print("ok: every error case raised a clear error")
