#!/usr/bin/env python3
"""An unmodified-style torch.nn.parallel.DistributedDataParallel training run on the "ddp"
backend gives the same parameters as the same run on PyTorch's "gloo".

Two processes (torch.multiprocessing), each trains the same seeded MLP on its own shard for a
few steps, once per backend: plain DDP, then with a comm hook (fp16 compression, which needs
Work futures), then with uneven inputs under DDP's join(). Every run must leave identical
parameters on both ranks, and the ddp run must match the gloo run (tolerance 1e-5: both sum the
same two float32 values per element, so they are in fact bitwise equal on 2 ranks). A negative
control (a comm hook that scales the average by 1.5) must be caught by the same comparison.

Exit 0 ok, 1 a mismatch (named); an import that fails is a failure (the module was built).
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
import ddp_torch  # noqa: F401  (registers the backend)

WORLD = 2
STEPS = 6


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(steps)]


def wrong_scale_hook(state, bucket):
    fut = default_hooks.allreduce_hook(state, bucket)
    return fut.then(lambda f: f.value() * 1.5)


def train(rank, variant):
    net = DDP(model())
    if variant == "fp16_hook":
        net.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif variant == "wrong_scale":  # the negative control: a hook that scales the average wrongly
        net.register_comm_hook(dist.group.WORLD, wrong_scale_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    steps = STEPS + (2 * rank if variant == "join" else 0)  # uneven inputs: rank 1 has more
    loss_fn = torch.nn.CrossEntropyLoss()

    def run():
        for x, y in batches(rank, steps):
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()

    if variant == "join":
        with net.join():
            run()
    else:
        run()
    return torch.cat([p.detach().reshape(-1) for p in net.module.parameters()])


def worker(rank, backend, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    variants = ("plain", "fp16_hook", "join") + (("wrong_scale",) if backend == "ddp" else ())
    for variant in variants:
        params = train(rank, variant)
        gathered = [torch.zeros_like(params) for _ in range(WORLD)]
        dist.all_gather(gathered, params)
        if not all(torch.equal(g, gathered[0]) for g in gathered):
            print(f"FAIL {backend} {variant}: parameters differ across ranks", flush=True)
            os._exit(1)
        if rank == 0:
            torch.save(params, os.path.join(out_dir, f"{backend}_{variant}.pt"))
    dist.destroy_process_group()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("gloo", "ddp"):
            init_file = os.path.join(tmp, f"init_{backend}")
            mp.spawn(worker, args=(backend, init_file, tmp), nprocs=WORLD)
        failed = False
        for variant in ("plain", "fp16_hook", "join"):
            a = torch.load(os.path.join(tmp, f"gloo_{variant}.pt"))
            b = torch.load(os.path.join(tmp, f"ddp_{variant}.pt"))
            diff = (a - b).abs().max().item()
            ok = torch.allclose(a, b, rtol=1e-5, atol=1e-6)
            print(f"{variant}: max |gloo - ddp| = {diff:.3g} over {a.numel()} parameters: {'ok' if ok else 'MISMATCH'}")
            failed |= not ok
        # The negative control: the comparison must see a wrongly scaled average.
        a = torch.load(os.path.join(tmp, "gloo_plain.pt"))
        b = torch.load(os.path.join(tmp, "ddp_wrong_scale.pt"))
        caught = not torch.allclose(a, b, rtol=1e-5, atol=1e-6)
        print(f"negative control (average scaled by 1.5): {'caught' if caught else 'NOT CAUGHT'}")
        failed |= not caught
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
