#include "reference.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "tests/comm/reduction_inputs.h"

namespace ddp::comm::conformance {
namespace {

template <typename T>
T load(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void save(unsigned char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

namespace {
thread_local ArrayArena* current_arena = nullptr;
}

ArrayArena::ArrayArena(std::shared_ptr<GroupMemory> memory) : memory_(std::move(memory)) {
  current_arena = this;
}

ArrayArena::~ArrayArena() { current_arena = nullptr; }

void ArrayArena::reset() {
  if (current_arena) current_arena->used_ = 0;
}

unsigned char* ArrayArena::take(size_t bytes) {
  ArrayArena* a = current_arena;
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (a == nullptr || rounded > a->memory_->bytes() - a->used_) return nullptr;
  unsigned char* p = static_cast<unsigned char*>(a->memory_->data()) + a->used_;
  a->used_ += rounded;
  return p;
}

Array::Array(DType dtype, size_t count) : dtype_(dtype), count_(count) {
  const size_t bytes = count * dtype_size(dtype);
  data_ = ArrayArena::take(bytes);
  if (data_ == nullptr) {
    own_.resize(bytes);
    data_ = own_.data();
  }
}

double Array::get(size_t i) const {
  const unsigned char* p = data_;
  switch (dtype_) {
    case DType::kFloat32: return load<float>(p, i);
    case DType::kFloat64: return load<double>(p, i);
    case DType::kFloat16: return half_to_float(load<uint16_t>(p, i));
    case DType::kBFloat16: return bfloat16_to_float(load<uint16_t>(p, i));
    case DType::kInt8: return load<int8_t>(p, i);
    case DType::kUInt8: return load<uint8_t>(p, i);
    case DType::kInt32: return load<int32_t>(p, i);
    case DType::kInt64: return static_cast<double>(load<int64_t>(p, i));
  }
  return 0;
}

void Array::set(size_t i, double v) {
  unsigned char* p = data_;
  switch (dtype_) {
    case DType::kFloat32: return save<float>(p, i, static_cast<float>(v));
    case DType::kFloat64: return save<double>(p, i, v);
    case DType::kFloat16: return save<uint16_t>(p, i, float_to_half(static_cast<float>(v)));
    case DType::kBFloat16: return save<uint16_t>(p, i, float_to_bfloat16(static_cast<float>(v)));
    case DType::kInt8: return save<int8_t>(p, i, static_cast<int8_t>(v));
    case DType::kUInt8: return save<uint8_t>(p, i, static_cast<uint8_t>(v));
    case DType::kInt32: return save<int32_t>(p, i, static_cast<int32_t>(v));
    case DType::kInt64: return save<int64_t>(p, i, static_cast<int64_t>(v));
  }
}

double input_value(DType dtype, ReduceOp op, int rank, size_t index) {
  return test::reduction_input(dtype, op, rank, index);
}

void fill_input(Array& a, ReduceOp op, int rank, size_t first) {
  for (size_t i = 0; i < a.count(); ++i) a.set(i, input_value(a.dtype(), op, rank, first + i));
}

void fill_constant(Array& a, double v) {
  for (size_t i = 0; i < a.count(); ++i) a.set(i, v);
}

double reduced_value(DType dtype, ReduceOp op, int world, size_t index) {
  return test::reduction_result(dtype, op, world, index);
}

std::string oracle_failure(DType dtype, ReduceOp op, int world, size_t first, size_t count) {
  const std::string failure = test::reduction_oracle_failure(dtype, op, world, first, count);
  return failure.empty() ? "" : "the reference itself: " + failure;
}

}  // namespace ddp::comm::conformance
