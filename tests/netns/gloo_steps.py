# An unmodified PyTorch program (env://, gloo) for the restart path of elastic tests: joins the
# group the launcher's environment describes, all_reduces a tensor of ones STEPS times (PAUSE
# seconds apart), checks each sum equals the world size, and prints
#   group pid=P rank=R world=W round=N        once the group is formed
#   first step pid=P rank=R world=W t=SECS    after its first all_reduce (wall clock, for timings)
#   done pid=P rank=R world=W steps=STEPS     at the end
# A lost peer fails its all_reduce (an exception, exit 1): the launcher starts the next round.
# usage: python3 gloo_steps.py STEPS PAUSE
import os
import sys
import time

import torch
import torch.distributed as dist

steps, pause = int(sys.argv[1]), float(sys.argv[2])
dist.init_process_group("gloo")
rank, world, pid = dist.get_rank(), dist.get_world_size(), os.getpid()
print(f"group pid={pid} rank={rank} world={world} round={os.environ.get('DDP_ELASTIC_ROUND')}", flush=True)
for i in range(steps):
    t = torch.ones(4)
    dist.all_reduce(t)
    if t[0].item() != world:
        sys.exit(f"step {i}: all_reduce gave {t[0].item()}, not {world}")
    if i == 0:
        print(f"first step pid={pid} rank={rank} world={world} t={time.time():.3f}", flush=True)
    time.sleep(pause)
print(f"done pid={pid} rank={rank} world={world} steps={steps}", flush=True)
dist.destroy_process_group()
