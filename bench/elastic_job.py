#!/usr/bin/python3
"""The PyTorch job of bench/elastic.sh, run by ddp-launch and by torchrun alike: a small
DistributedDataParallel model over gloo (env://, as either launcher sets it up), trained until
the launcher stops it. Every rank prints one line at start and one per completed step:

    elastic_job start pid <pid> rank <r> world <w> restart <n> t <unix time, s>
    elastic_job step <s> rank <r> world <w> restart <n> t <unix time, s>

so the bench can tell when the first step of a new world completed. --step-sleep stands for a
step's compute (and leaves a shared CPU to others); --steps 0 trains until stopped.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--step-sleep", type=float, default=0.05)
    args = p.parse_args()
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"elastic_job start pid {os.getpid()} rank {rank} world {world} restart {restart} t {time.time():.6f}", flush=True)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    step = 0
    while args.steps == 0 or step < args.steps:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        step += 1
        print(f"elastic_job step {step} rank {rank} world {world} restart {restart} t {time.time():.6f}", flush=True)
        time.sleep(args.step_sleep)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
