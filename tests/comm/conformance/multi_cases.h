#pragma once
// The multi-buffer conformance matrix: all_reduce_multi, reduce_multi, broadcast_multi and
// all_gather_multi with K buffers per rank, checked against exact references. Buffer i of rank r
// is virtual rank v = r*K + i; the op must behave as the single-buffer op over world × K ranks.
// Inputs (exact in every dtype for up to 16 virtual ranks, found by search):
//   general(v, i) = ((7i + 3 + 2v) mod 5) + off[v], minus 2 for signed types, plus 6 for uint8,
//                   off = {2, -2, 5, 2, -1, 1, -6, -4, 0, 7, 6, 5, 1, -1, 3, 5}
//   so every partial sum stays within ±256 (bfloat16 is exact), every total fits int8/uint8,
//   and for every n in 2..16 no virtual rank's input equals the SUM or the AVG (float and
//   truncated integer): returning one buffer cannot pass. PRODUCT, MIN and MAX use reference.h's
//   patterns with v as the rank. AVG's reference is the exact mean rounded to the dtype (integers:
//   truncated), as the backends divide once by world × K.
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ddp::comm::conformance {

enum class MultiOp { kAllReduce, kReduce, kBroadcast, kAllGather };

struct MultiCase {
  MultiOp op = MultiOp::kAllReduce;
  DType dtype = DType::kFloat32;
  ReduceOp rop = ReduceOp::kSum;
  size_t count = 0;  // per buffer (all_gather: per input)
  int k = 1;         // buffers per rank
  int root = 0;
  int root_index = 0;
  std::string name() const;
};

double multi_input(DType dtype, ReduceOp op, int vrank, size_t index);
// The reduction over virtual ranks 0..n-1, as the dtype holds it.
double multi_reduced(DType dtype, ReduceOp op, int n, size_t index);

// Every op x dtype x count with k buffers per rank: all_reduce_multi with every valid reduce op,
// reduce_multi with one per dtype (rotating; it shares the local reduction), roots and root
// indices rotating.
std::vector<MultiCase> multi_matrix(int world, int k, const std::vector<size_t>& counts);

// Runs one case as pg.rank(); "" when every buffer matches the reference, else what differs.
std::string run_multi_case(ProcessGroup& pg, const MultiCase& c);
std::vector<std::string> run_multi_cases(ProcessGroup& pg, const std::vector<MultiCase>& cases,
                                         size_t max_failures = 20);

}  // namespace ddp::comm::conformance
