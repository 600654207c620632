#pragma once
// Which parameters share a bucket (c10d's compute_bucket_assignment_by_size).
//
// Parameters are taken in `order` (initially reverse registration order, later the order in
// which gradients became ready). Each (dtype, device) pair fills its own open bucket: a
// parameter is added, and the bucket closes once it holds at least its limit (the first bucket
// of each kind: first_cap_bytes, later ones: cap_bytes). Parameters of different dtypes or
// devices never share a bucket. Buckets come out sorted by the position of their first
// parameter in `order`, which is the order they are launched in. Pure function.
#include <cstddef>
#include <vector>

#include "comm/types.h"

namespace ddp {

struct BucketKey {
  comm::DType dtype = comm::DType::kFloat32;
  comm::Device device{};
  bool operator==(const BucketKey&) const = default;
};

struct ParamSize {
  size_t count = 0;  // elements
  BucketKey key;
};

using BucketAssignment = std::vector<std::vector<size_t>>;  // bucket -> parameter indices

BucketAssignment assign_buckets(const std::vector<ParamSize>& params, const std::vector<size_t>& order,
                                size_t first_cap_bytes, size_t cap_bytes);

// Reverse registration order: n-1, ..., 0.
std::vector<size_t> reverse_order(size_t n);

}  // namespace ddp
