#!/usr/bin/env python3
"""PyTorch 1.13's own PowerSGD and post-local SGD, as references for the ddp::torch suites.

Usage: companions_reference.py DIR. The C++ test writes to DIR:
  config.json  a list of runs (one Python start for all), each {"mode": "powersgd" | "localsgd", "world", "steps", "per_rank", "lr", "momentum",
                "layers": [[in, out], ...] (Linear layers, ReLU between), "buckets": [[param
                index, ...], ...] (the engine's layout, launch order), "powersgd": {...},
                "localsgd": {...}}
  init.bin     the initial parameters, float32, parameters() order, concatenated
  x.bin, y.bin the global batches: float32 [steps, world * per_rank, in], int64 [steps, rows]
and reads back run<i>_rank<r>.bin: rank r's parameters after run i's steps (float32, same order).

Each rank is a thread that trains the model on its shard with SGD and, after backward, hands
its gradients bucket by bucket to PyTorch's hook (powerSGD_hook, or post_localSGD_hook with a
PeriodicModelAverager inside a PostLocalSGDOptimizer), as DistributedDataParallel would. The
hooks' all_reduce goes to an in-process group: the exact sum over ranks in rank order.
"""
import contextlib
import json
import os
import sys
import threading

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as plsgd
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.distributed.algorithms.model_averaging import averagers
from torch.distributed.optim import PostLocalSGDOptimizer


class Shared:
    def __init__(self, world):
        self.world = world
        self.barrier = threading.Barrier(world)
        self.slots = [None] * world


class DoneWork:
    def __init__(self, tensor):
        self.fut = torch.futures.Future()
        self.fut.set_result([tensor])

    def get_future(self):
        return self.fut

    def wait(self):
        return True


class ThreadGroup:
    """What dist.all_reduce(group=...) needs of a process group, for ranks that are threads."""

    def __init__(self, shared, rank):
        self.shared, self.my_rank = shared, rank

    def size(self):
        return self.shared.world

    def rank(self):
        return self.my_rank

    def allreduce(self, tensors, opts):
        assert opts.reduceOp == dist.ReduceOp.SUM
        (t,) = tensors
        s = self.shared
        s.slots[self.my_rank] = t.clone()
        s.barrier.wait()
        total = s.slots[0].clone()
        for r in range(1, s.world):
            total += s.slots[r]
        s.barrier.wait()
        t.copy_(total)
        return DoneWork(t)


class Bucket:
    """dist.GradBucket's interface, over a flat copy of some parameters' gradients."""

    def __init__(self, index, last, params):
        self.idx, self.last = index, last
        self.flat = torch.cat([p.grad.reshape(-1) for p in params])
        self.views, offset = [], 0
        for p in params:
            self.views.append(self.flat[offset : offset + p.numel()].view(p.shape))
            offset += p.numel()

    def buffer(self):
        return self.flat

    def index(self):
        return self.idx

    def is_last(self):
        return self.last

    def gradients(self):
        return self.views


# torch.manual_seed + randn inside powerSGD_hook use the global generator: one rank at a time.
_rng_lock = threading.Lock()


class _LockedRandom:
    def __getattr__(self, name):
        return getattr(torch.random, name)

    @contextlib.contextmanager
    def fork_rng(self, *args, **kwargs):
        with _rng_lock, torch.random.fork_rng(*args, **kwargs):
            yield


class _TorchForHook:
    random = _LockedRandom()

    def __getattr__(self, name):
        return getattr(torch, name)


psgd.torch = _TorchForHook()


def build_model(layers, init):
    mods = []
    for i, (n_in, n_out) in enumerate(layers):
        if i:
            mods.append(torch.nn.ReLU())
        mods.append(torch.nn.Linear(n_in, n_out))
    model = torch.nn.Sequential(*mods)
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(init[offset : offset + p.numel()]).view_as(p))
            offset += p.numel()
    return model


def train(cfg, rank, group, init, x, y, results):
    torch.set_num_threads(1)
    model = build_model(cfg["layers"], init)
    params = list(model.parameters())
    sgd = torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"])
    if cfg["mode"] == "powersgd":
        o = cfg["powersgd"]
        state = psgd.PowerSGDState(process_group=group, matrix_approximation_rank=o["rank"],
                                   start_powerSGD_iter=o["start_iter"], min_compression_rate=o["min_compression_rate"],
                                   use_error_feedback=o["error_feedback"], warm_start=o["warm_start"],
                                   random_seed=o["seed"])
        hook, opt = psgd.powerSGD_hook, sgd
    else:
        o = cfg["localsgd"]
        state = plsgd.PostLocalSGDState(process_group=group, subgroup=None, start_localSGD_iter=o["start_iter"],
                                        post_local_gradient_allreduce=False)
        hook = plsgd.post_localSGD_hook
        opt = PostLocalSGDOptimizer(sgd, averagers.PeriodicModelAverager(period=o["period"],
                                                                          warmup_steps=o["warmup"],
                                                                          process_group=group))
    per = cfg["per_rank"]
    for s in range(cfg["steps"]):
        opt.zero_grad()
        rows = slice(rank * per, (rank + 1) * per)
        F.cross_entropy(model(x[s, rows]), y[s, rows]).backward()
        for b, indices in enumerate(cfg["buckets"]):
            bucket_params = [params[i] for i in indices]
            bucket = Bucket(b, b + 1 == len(cfg["buckets"]), bucket_params)
            reduced = hook(state, bucket).wait()
            offset = 0
            for p in bucket_params:
                p.grad.copy_(reduced[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
        opt.step()
    results[rank] = torch.cat([p.detach().reshape(-1) for p in params]).numpy()


def reference(out, index, cfg):
    world, steps, rows = cfg["world"], cfg["steps"], cfg["world"] * cfg["per_rank"]
    init = np.fromfile(os.path.join(out, "init.bin"), dtype=np.float32)
    x = torch.from_numpy(np.fromfile(os.path.join(out, "x.bin"), dtype=np.float32)).view(steps, rows, -1)
    y = torch.from_numpy(np.fromfile(os.path.join(out, "y.bin"), dtype=np.int64)).view(steps, rows)
    shared, results, errors = Shared(world), [None] * world, []

    def run(rank):
        try:
            train(cfg, rank, ThreadGroup(shared, rank), init, x, y, results)
        except BaseException as e:  # noqa: B902 - reported below, the barrier released
            errors.append(repr(e))
            shared.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("companions_reference.py: " + "; ".join(errors))
    for r in range(world):
        results[r].astype(np.float32).tofile(os.path.join(out, f"run{index}_rank{r}.bin"))


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "config.json")) as f:
        runs = json.load(f)
    for index, cfg in enumerate(runs):
        reference(out, index, cfg)


if __name__ == "__main__":
    main()
