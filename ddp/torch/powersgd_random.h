#pragma once
// PowerSGD's random Qs as PyTorch draws them: for a seed, torch.manual_seed(seed) and then
// torch.randn of each Q's size in turn, on the CPU generator (PyTorch 1.13's powerSGD_hook).
// With it, ddp::powersgd_hook starts from the same Qs as PyTorch's hook for the same
// random_seed and bucket layout:
//   ddp::PowerSGDOptions o;
//   o.random_normal = ddp::torch::torch_random_normal();
// Host float32/float64 Qs; uses a generator of its own (the global one is left untouched).
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/types.h"

namespace ddp::torch {

std::function<void(uint64_t seed, const std::vector<comm::Buffer>& qs)> torch_random_normal();

}  // namespace ddp::torch
