#pragma once
// The conformance suite's ground truth: deterministic inputs and the results every backend must
// produce, computed locally. The inputs are the reduction tests' shared ones
// (tests/comm/reduction_inputs.h): small integers, exact in every dtype (bfloat16 included), with
// an exact AVG, chosen so that at every world 2..8, count and offset no rank's buffer is the MIN
// or the MAX (from 2 elements), SUM, PRODUCT and AVG are no rank's value at any element, and no
// op's result is another op's. Every reduction case runs the self-check (oracle_failure) first.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/group_memory.h"
#include "comm/types.h"

namespace ddp::comm::conformance {

// A typed host array that reads and writes through doubles (all values here are exact).
// Where Arrays made on this thread live while it is set: memory a group handed out
// (ProcessGroup::allocate), taken in order from its start, so ranks that run the same cases get
// the same offsets. Arrays that no longer fit use their own memory. reset() between cases.
class ArrayArena {
 public:
  explicit ArrayArena(std::shared_ptr<GroupMemory> memory);  // current on this thread until destroyed
  ~ArrayArena();
  ArrayArena(const ArrayArena&) = delete;
  ArrayArena& operator=(const ArrayArena&) = delete;
  static void reset();                       // the next Array starts at the memory's start again
  static unsigned char* take(size_t bytes);  // null: no arena, or it is full

 private:
  std::shared_ptr<GroupMemory> memory_;
  size_t used_ = 0;
};

class Array {
 public:
  Array(DType dtype, size_t count);
  Buffer buffer() { return Buffer{data_, count_, dtype_, Device{}}; }
  double get(size_t i) const;
  void set(size_t i, double v);
  size_t count() const { return count_; }
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  size_t count_;
  std::vector<unsigned char> own_;  // unless the arena had room
  unsigned char* data_;
};

double input_value(DType dtype, ReduceOp op, int rank, size_t index);
// Fills `a` with input_value(rank, first + i).
void fill_input(Array& a, ReduceOp op, int rank, size_t first = 0);
void fill_constant(Array& a, double v);
// The reduction over ranks 0..world-1 of input_value(.., index).
double reduced_value(DType dtype, ReduceOp op, int world, size_t index);
// The self-check of op's inputs over elements [first, first + count) at `world`
// (test::reduction_oracle_failure; worlds outside 2..8 and the bitwise ops: ""): "" or what fails.
std::string oracle_failure(DType dtype, ReduceOp op, int world, size_t first, size_t count);

// Compares a[i] with expected(i) for i in [0, count); returns "" or a message naming the
// first few mismatching indices with both values.
template <typename F>
std::string compare(const Array& a, size_t first, size_t count, F&& expected, const std::string& what);

}  // namespace ddp::comm::conformance

#include "reference_inl.h"
