#!/usr/bin/python3
"""PyTorch's DDP on the demo job, for the note's side-by-side: the same CNN, data, batch,
optimizer and per-epoch line as examples/train_fashion_mnist.cc, over gloo.

  bench/fashion_mnist_torch.py --world 2 --epochs 1     # starts its own ranks, 1 thread each
Compare with: ddp-launch --standalone --nproc-per-node 2 build/bin/ddp-train-fashion-mnist --threads 1
"""
import argparse
import gzip
import os
import socket
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims).copy())


def load(d, prefix):
    images = read_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte.gz")).float().div(255).sub(MEAN).div(STD)
    labels = read_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte.gz")).long()
    return images.unsqueeze(1), labels


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.norm1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.norm1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.flatten(1)))), dim=1)


def rank_main(args):
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), args.world
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    x, y = load(args.data_dir, "train")
    tx, ty = load(args.data_dir, "t10k")
    torch.manual_seed(1 + rank)
    model = nn.parallel.DistributedDataParallel(Cnn())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sampler = torch.utils.data.DistributedSampler(torch.utils.data.TensorDataset(x, y), world, rank)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=args.batch, sampler=sampler)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        start = time.perf_counter()
        totals = torch.zeros(2, dtype=torch.float64)
        for bx, by in loader:
            opt.zero_grad()
            loss = F.nll_loss(model(bx), by)
            loss.backward()
            opt.step()
            totals += torch.tensor([loss.item() * len(bx), len(bx)], dtype=torch.float64)
        secs = time.perf_counter() - start
        model.eval()
        with torch.no_grad():
            shard = slice(rank * len(tx) // world, (rank + 1) * len(tx) // world)
            out = model.module(tx[shard])
            correct = torch.tensor([float((out.argmax(1) == ty[shard]).sum()), float(len(out))], dtype=torch.float64)
        dist.all_reduce(totals)
        dist.all_reduce(correct)
        if rank == 0:
            print(f"pytorch epoch {epoch}/{args.epochs}  loss {totals[0] / totals[1]:.4f}  "
                  f"test-acc {100 * correct[0] / correct[1]:.1f}%  samples/s {totals[1] / secs:.0f}  ({secs:.1f} s)",
                  flush=True)
    del model, opt  # before the group: see bench/torch_ddp_bench.py (a PyTorch 1.13 deadlock at teardown)
    dist.destroy_process_group()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    if "RANK" in os.environ:
        return rank_main(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + ["--port", str(port)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r))) for r in range(args.world)]
    return max(proc.wait() for proc in procs)


if __name__ == "__main__":
    sys.exit(main())
