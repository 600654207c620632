#!/usr/bin/python3
"""PyTorch's side of `ddp-bench torch`: the same model, batch and timing protocol as our
LibTorch adapter, in torch.nn.parallel.DistributedDataParallel over gloo.

Run as: torch_ddp_bench.py --world 2 --layers 6 --hidden 2048 --batch 32 --steps 5 --warmup 2
It starts `--world` processes itself (rank 0 is this one), 1 thread each, and rank 0 prints one
JSON row: {"system": "pytorch", "params", "local_ms", "ddp_ms", "overhead", "identical"}.
Per step: barrier, time one optimizer step, then the maximum over ranks; the row holds medians.
"identical" is true when every rank ends with the same weights (checked, not assumed).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def make_model(layers, hidden, seed):
    torch.manual_seed(seed)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*mods)


def timed_steps(model, args, steps):
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.hidden)
    y = torch.randn(args.batch, args.hidden)
    times = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return slowest.tolist()


def rank_main(args):
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.world)
    local = make_model(args.layers, args.hidden, seed=rank)
    wrapped = nn.parallel.DistributedDataParallel(make_model(args.layers, args.hidden, seed=rank))
    timed_steps(local, args, args.warmup)
    local_times = timed_steps(local, args, args.steps)
    timed_steps(wrapped, args, args.warmup)
    ddp_times = timed_steps(wrapped, args, args.steps)
    flat = torch.cat([p.detach().reshape(-1) for p in wrapped.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    identical = bool(torch.equal(lo, hi))
    # PyTorch 1.13: if the DDP module outlives destroy_process_group, its Reducer holds the last
    # reference to ProcessGroupGloo and destroys it with the GIL held, while Gloo's worker thread
    # waits for the GIL to free a tensor: the join never returns (bench_torch_tcp timed out in CI;
    # here 2 hangs in 60 runs under load, none in 65 after).
    # Freed first, the group's last reference goes through PyTorch's GIL-releasing holder.
    del wrapped
    if rank == 0:
        local_ms = statistics.median(local_times) * 1e3
        ddp_ms = statistics.median(ddp_times) * 1e3
        params = sum(p.numel() for p in local.parameters())
        print(json.dumps({"system": "pytorch", "params": params, "local_ms": round(local_ms, 2),
                          "ddp_ms": round(ddp_ms, 2), "overhead": round(ddp_ms / local_ms, 4),
                          "identical": identical}), flush=True)
    dist.destroy_process_group()
    return 0 if identical else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    if "RANK" in os.environ:
        return rank_main(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        args.port = s.getsockname()[1]
    argv = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + ["--port", str(args.port)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r))) for r in range(args.world)]
    return max(proc.wait() for proc in procs)


if __name__ == "__main__":
    sys.exit(main())
