#!/usr/bin/env python3
"""torch.distributed.all_reduce through the "ddp" plugin (ddp_torch, our tcp backend underneath
unless DDP_TORCH_BACKEND says otherwise) side by side with PyTorch's own gloo, in one run.

  PYTHONPATH=build/python /usr/bin/python3 bench/torch_plugin_bench.py [--sizes 1K,1M,64M]
      [--ranks 2] [--ddp-step]

Two processes (torch.multiprocessing, one thread each). Per size: a gloo group and a ddp group
take turns, every op timed between barriers, the slowest rank's time counts; the table gives
medians and the ratio gloo / ddp (> 1: the plugin is faster). Every result is checked (each
rank contributes rank + 1, so every element must be the sum of 1..ranks). --ddp-step adds
DistributedDataParallel step time on 6 x Linear(2048, 2048), batch 32, on each backend.
Figures, never asserts: timings belong in notes, not tests.
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ddp_torch  # noqa: F401  (registers backend "ddp")

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper().rstrip("B").rstrip("I")
    unit = text[-1] if text[-1] in UNITS else ""
    return int(text[: len(text) - len(unit)]) * UNITS[unit]


def label(nbytes):
    for unit in ("G", "M", "K"):
        if nbytes >= UNITS[unit] and nbytes % UNITS[unit] == 0:
            return f"{nbytes // UNITS[unit]} {unit}iB"
    return f"{nbytes} B"


def reps_for(nbytes):
    return max(9, min(200, (256 << 20) // max(nbytes, 1) // 4))


def timed_all_reduce(t, group, rank, world):
    t.fill_(rank + 1)
    dist.barrier(group=group)
    start = time.perf_counter()
    dist.all_reduce(t, group=group)
    took = time.perf_counter() - start
    want = world * (world + 1) / 2
    if t.min().item() != want or t.max().item() != want:
        raise RuntimeError(f"all_reduce on {dist.get_backend(group)} gave a wrong result")
    return took


def slowest(times, group):
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def bench_all_reduce(rank, world, sizes, groups):
    rows = []
    for nbytes in sizes:
        t = torch.empty(nbytes // 4, dtype=torch.float32)
        reps = reps_for(nbytes)
        times = {name: [] for name in groups}
        for name, g in groups.items():  # warm up: connections, shared memory, caches
            for _ in range(2):
                timed_all_reduce(t, g, rank, world)
        for _ in range(reps):
            for name, g in groups.items():
                times[name].append(timed_all_reduce(t, g, rank, world))
        medians = {name: statistics.median(slowest(ts, groups["gloo"])) for name, ts in times.items()}
        rows.append((nbytes, reps, medians))
    return rows


def bench_ddp_step(rank, groups, steps=8, warmup=2):
    from torch.nn.parallel import DistributedDataParallel as DDP
    out = {}
    for name, g in groups.items():
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])
        net = DDP(model, process_group=g)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        x = torch.randn(32, 2048)
        times = []
        for i in range(warmup + steps):
            dist.barrier(group=g)
            start = time.perf_counter()
            opt.zero_grad()
            net(x).square().mean().backward()
            opt.step()
            if i >= warmup:
                times.append(time.perf_counter() - start)
        out[name] = statistics.median(slowest(times, groups["gloo"]))
        del net, model, opt
    return out


def worker(rank, world, port, sizes, ddp_step):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    groups = {"gloo": dist.group.WORLD, "ddp": dist.new_group(backend="ddp")}
    rows = bench_all_reduce(rank, world, sizes, groups)
    step = bench_ddp_step(rank, groups) if ddp_step else None
    if rank == 0:
        print(f"all_reduce float32 SUM, {world} ranks, medians of the slowest rank "
              f"(ddp plugin on {ddp_torch.backend()}):")
        print(f"{'size':>10} {'reps':>5} {'gloo ms':>10} {'ddp ms':>10} {'gloo/ddp':>9}")
        for nbytes, reps, m in rows:
            print(f"{label(nbytes):>10} {reps:>5} {m['gloo'] * 1e3:>10.3f} {m['ddp'] * 1e3:>10.3f} "
                  f"{m['gloo'] / m['ddp']:>8.2f}x")
        if step:
            print(f"DDP step 6 x Linear(2048, 2048), batch 32: gloo {step['gloo'] * 1e3:.1f} ms, "
                  f"ddp {step['ddp'] * 1e3:.1f} ms ({step['gloo'] / step['ddp']:.2f}x)")
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1K,1M,64M", help="comma-separated byte sizes (K, M, G suffixes)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--ddp-step", action="store_true", help="also time a DDP training step")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if any(s % 4 for s in sizes):
        ap.error("sizes must be multiples of 4 bytes (float32)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(worker, args=(args.ranks, port, sizes, args.ddp_step), nprocs=args.ranks)


if __name__ == "__main__":
    main()
