#pragma once
// The conformance suite's ground truth: deterministic inputs and the results every backend must
// produce, computed locally. Inputs are small integers chosen so that every result is exact in
// every dtype (bfloat16 included) for world sizes up to 8:
//   general(r, i) = ((7i + 3) mod 11) + c_r, minus 9 for signed types  -> |sum| < 128
//                   with c = 0, 2, 10, 0, 8, 10, 12, 14 (rank 0..7)
//   product(r, i) = 2 when (i + r) mod 3 == 0, else 1                  -> product <= 2^8 / 2
//   minmax(r, i)  = (i + 3r) mod 11, minus 5 for signed types           (MIN and MAX)
// AVG is exact because sum_{r<n} c_r is a multiple of n for every n in 1..8.
// No rank's input is the answer for n >= 2 (collectives_test.cc checks this oracle): the mean
// of the c_r is none of them, the product's 2s move with the rank, and for MIN and MAX every
// rank wins at some index (distinct values per index for n <= 11; rank r holds the maximum
// where i = 10 - 3r mod 11), so returning one rank's buffer (an end one, the middle one, its
// own) fails.
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

// Compares a[i] with expected(i) for i in [0, count); returns "" or a message naming the
// first few mismatching indices with both values.
template <typename F>
std::string compare(const Array& a, size_t first, size_t count, F&& expected, const std::string& what);

}  // namespace ddp::comm::conformance

#include "reference_inl.h"
