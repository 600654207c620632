#!/usr/bin/python3
"""A PyTorch script as torchrun users write it, for hosts_torch_checkpoint_test.sh: env://, gloo,
DistributedDataParallel over a small float64 MLP, SGD with momentum, and a checkpoint (step,
model, optimizer) written atomically by rank 0 every CKPT_EVERY steps; started again, it resumes
from the newest one. Nothing in it knows ddp-launch.

Deterministic: rank r trains on its own full batch D_r (seeded by r), so a step at world W
applies the mean of the gradients over D_0..D_{W-1}. The final state is therefore a function of
the world each step was taken at, and `--reference` computes it in one process, without
torch.distributed, for a schedule such as 3x20,2x15,3x25 (20 steps at world 3, then 15 at 2...).

Lines printed (each flushed):
    start pid=P rank=R world=W from=STEP      group formed, checkpoint (if any) loaded
    step S rank=R world=W t=UNIX              after step S (and its checkpoint, if due)
    done pid=P rank=R world=W steps=N loss=L norm=X digest=D    at the end: L is the mean loss
        over the world's ranks at the final parameters, X the sum of their absolute values, D a
        hash of their bytes (equal on every rank when the replicas agree)
    reference loss=L norm=X                   with --reference (the world of the last step)

--hold STEP FILE (repeatable) is the test's pacing, not the training's: before taking step STEP
every rank waits until FILE exists ("{host}" in FILE: this host's name, so a test can hold one
host only), so the test kills or adds a node at a known step. The numbers do not depend on it.
usage: torch_checkpoint_job.py STEPS CKPT_DIR CKPT_EVERY [--hold STEP FILE]...
       torch_checkpoint_job.py --reference SCHEDULE
"""
import argparse
import hashlib
import os
import socket
import sys
import time

import torch
import torch.nn as nn

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)
LR, MOMENTUM, SAMPLES, FEATURES = 0.05, 0.9, 16, 4


def model_and_optimizer():
    """The same initial model on every rank and in the reference (seeded)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, 1))
    return model, lambda params: torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def data(rank):
    """Rank r's full batch: its own inputs and its own target function, so ranks disagree."""
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    return x, torch.sin(x @ w) + 0.5 * rank


def loss_of(model, rank):
    x, y = data(rank)
    return nn.functional.mse_loss(model(x), y)


def summary(model, world):
    """(mean loss over ranks 0..world-1, sum of |parameters|, hash of the parameters' bytes)."""
    with torch.no_grad():
        loss = sum(loss_of(model, r).item() for r in range(world)) / world
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return loss, flat.abs().sum().item(), hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def reference(schedule):
    """One process, no torch.distributed: each step's gradient is the mean over that step's world."""
    model, make_opt = model_and_optimizer()
    opt = make_opt(model.parameters())
    worlds = [int(w) for part in schedule.split(",") for w in [part.split("x")[0]] * int(part.split("x")[1])]
    for world in worlds:
        opt.zero_grad()
        (sum(loss_of(model, r) for r in range(world)) / world).backward()
        opt.step()
    loss, norm, _ = summary(model, worlds[-1])
    print(f"reference loss={loss:.17g} norm={norm:.17g}")


def newest_checkpoint(directory):
    names = sorted(n for n in os.listdir(directory) if n.startswith("step-") and n.endswith(".pt"))
    return os.path.join(directory, names[-1]) if names else None


def train(args):
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world, pid = dist.get_rank(), dist.get_world_size(), os.getpid()
    model, make_opt = model_and_optimizer()
    step, path = 0, newest_checkpoint(args.ckpt_dir)
    ckpt = torch.load(path) if path else None
    if ckpt:
        model.load_state_dict(ckpt["model"])
        step = ckpt["step"]
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = make_opt(ddp.parameters())
    if ckpt:
        opt.load_state_dict(ckpt["optimizer"])
    print(f"start pid={pid} rank={rank} world={world} from={step}", flush=True)
    holds = {int(s): f.replace("{host}", socket.gethostname()) for s, f in args.hold}
    while step < args.steps:
        while step + 1 in holds and not os.path.exists(holds[step + 1]):
            time.sleep(0.05)
        opt.zero_grad()
        x, y = data(rank)
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        step += 1
        if rank == 0 and step % args.ckpt_every == 0:
            tmp = os.path.join(args.ckpt_dir, f".step-{step:06d}.tmp")
            torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
            os.replace(tmp, os.path.join(args.ckpt_dir, f"step-{step:06d}.pt"))
        print(f"step {step} rank={rank} world={world} t={time.time():.6f}", flush=True)
    loss, norm, digest = summary(model, world)
    print(f"done pid={pid} rank={rank} world={world} steps={step} loss={loss:.17g} norm={norm:.17g} digest={digest}",
          flush=True)
    dist.destroy_process_group()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--reference":
        return reference(sys.argv[2])
    p = argparse.ArgumentParser()
    p.add_argument("steps", type=int)
    p.add_argument("ckpt_dir")
    p.add_argument("ckpt_every", type=int)
    p.add_argument("--hold", nargs=2, action="append", default=[], metavar=("STEP", "FILE"))
    train(p.parse_args())


if __name__ == "__main__":
    main()
