#pragma once
// The conformance matrix: which (op, dtype, reduce op, count, root) every rank runs, in the same
// order, and how one case is run and checked against reference.h.
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ddp::comm::conformance {

enum class Op {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kBarrier
};
const char* to_string(Op op);

struct Case {
  Op op = Op::kAllReduce;
  DType dtype = DType::kFloat32;
  ReduceOp rop = ReduceOp::kSum;
  size_t count = 0;  // per rank: input of all_gather/gather, output of scatter/reduce_scatter,
                     // per destination of all_to_all
  int root = 0;
  std::string name() const;
};

// Every op x dtype x valid reduce op x count, for one world size (roots rotate).
std::vector<Case> full_matrix(int world, const std::vector<size_t>& counts);
// The reduced set for large sizes: float32 sum and int64 max all_reduce, float32 broadcast,
// all_gather and reduce_scatter.
std::vector<Case> large_matrix(int world, size_t count);

// Runs one case as pg.rank(); "" when the result matches the reference, else what differs.
// Backend errors propagate.
std::string run_case(ProcessGroup& pg, const Case& c, int tag);

// Runs the cases in order; collects at most `max_failures` messages. Stops early after an error
// that leaves the group unusable (NetworkError, TimeoutError).
std::vector<std::string> run_cases(ProcessGroup& pg, const std::vector<Case>& cases,
                                   size_t max_failures = 20);

}  // namespace ddp::comm::conformance
