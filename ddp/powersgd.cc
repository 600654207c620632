#include "ddp/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <sstream>
#include <string>
#include <utility>

#include "common/error.h"

namespace ddp {

namespace {

// One gradient viewed as a rows x cols matrix at `offset` in the bucket, and its P and Q
// (rows x rank, cols x rank, row-major) at p_offset / q_offset in the state's memory.
struct Matrix {
  size_t offset = 0, rows = 0, cols = 0, rank = 0, p_offset = 0, q_offset = 0;
};

struct Layout {
  std::vector<Matrix> compressed;                       // PyTorch's order: grouped by shape
  std::vector<std::pair<size_t, size_t>> uncompressed;  // (offset, count)
  size_t p_size = 0, q_size = 0, uncompressed_size = 0;
  int64_t numel_before = 0, numel_after = 0;
};

Layout plan(const GradBucket& bucket, const PowerSGDOptions& o) {
  Layout l;
  std::vector<std::pair<size_t, size_t>> shapes;  // distinct (rows, cols), first seen first
  std::vector<std::pair<size_t, Matrix>> found;   // (shape group, matrix)
  size_t offset = 0;
  for (const auto& shape : bucket.shapes) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    const size_t rows = shape.empty() ? 1 : static_cast<size_t>(shape[0]);
    const size_t cols = rows == 0 ? 0 : numel / rows;
    const size_t rank = std::min({rows, cols, static_cast<size_t>(o.matrix_approximation_rank)});
    const auto compressed_size = static_cast<double>((rows + cols) * rank);
    l.numel_before += static_cast<int64_t>(numel);
    if (compressed_size * o.min_compression_rate < static_cast<double>(numel)) {
      auto it = std::find(shapes.begin(), shapes.end(), std::make_pair(rows, cols));
      if (it == shapes.end()) it = shapes.insert(shapes.end(), {rows, cols});
      found.push_back({static_cast<size_t>(it - shapes.begin()), Matrix{offset, rows, cols, rank}});
      l.numel_after += static_cast<int64_t>(compressed_size);
    } else {
      l.uncompressed.emplace_back(offset, numel);
      l.uncompressed_size += numel;
      l.numel_after += static_cast<int64_t>(numel);
    }
    offset += numel;
  }
  if (offset != bucket.buffer.count) {
    DDP_THROW(InvalidArgument, "powersgd_hook: bucket ", bucket.index, " holds ", bucket.buffer.count,
              " elements but its parameters' shapes add up to ", offset);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [group, m] : found) {
    m.p_offset = l.p_size;
    m.q_offset = l.q_size;
    l.p_size += m.rows * m.rank;
    l.q_size += m.cols * m.rank;
    l.compressed.push_back(m);
  }
  return l;
}

template <typename T>
T* at(const comm::Buffer& b, size_t offset = 0) {
  return static_cast<T*>(b.data) + offset;
}

// Gram-Schmidt on the columns of a rows x r row-major matrix, as PyTorch's
// _orthogonalize_gram_schmidt (a zero column stays zero when epsilon is 0).
template <typename T>
void orthogonalize(T* a, size_t rows, size_t r, double epsilon) {
  for (size_t i = 0; i < r; ++i) {
    double norm = 0;
    for (size_t k = 0; k < rows; ++k) norm += static_cast<double>(a[k * r + i]) * a[k * r + i];
    const auto denom = static_cast<T>(std::sqrt(norm) + epsilon);
    for (size_t k = 0; k < rows; ++k) a[k * r + i] = denom == T(0) ? T(0) : a[k * r + i] / denom;
    for (size_t j = i + 1; j < r; ++j) {
      double dot = 0;
      for (size_t k = 0; k < rows; ++k) dot += static_cast<double>(a[k * r + i]) * a[k * r + j];
      const auto d = static_cast<T>(dot);
      for (size_t k = 0; k < rows; ++k) a[k * r + j] -= d * a[k * r + i];
    }
  }
}

// The products below take one pass over the gradient matrix each, row by row, in double,
// with loops the compiler vectorises (independent sums, unit strides). qt: Q transposed
// (r x cols), so that each of its columns is a contiguous row.

// sum of a[j] * b[j], in four independent sums (the order is ours: PyTorch's is its own).
template <typename T>
double dot(const T* a, const T* b, size_t n) {
  double s[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (size_t u = 0; u < 4; ++u) s[u] += static_cast<double>(a[j + u]) * b[j + u];
  }
  for (; j < n; ++j) s[0] += static_cast<double>(a[j]) * b[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

template <typename T>
void transpose(const T* q, T* qt, size_t cols, size_t r) {
  for (size_t j = 0; j < cols; ++j)
    for (size_t k = 0; k < r; ++k) qt[k * cols + j] = q[j * r + k];
}

// m += e (when e is given), then p = m q (m: rows x cols; p: rows x r).
template <typename T>
void add_and_multiply(T* m, const T* e, const T* qt, T* p, size_t rows, size_t cols, size_t r) {
  for (size_t i = 0; i < rows; ++i) {
    T* row = m + i * cols;
    if (e != nullptr) {
      const T* er = e + i * cols;
      for (size_t j = 0; j < cols; ++j) row[j] += er[j];
    }
    for (size_t k = 0; k < r; ++k) p[i * r + k] = static_cast<T>(dot(row, qt + k * cols, cols));
  }
}

// q = m^T p (q: cols x r), through acc (r x cols doubles).
template <typename T>
void multiply_transposed(const T* m, const T* p, T* q, size_t rows, size_t cols, size_t r,
                         std::vector<double>& acc) {
  acc.assign(cols * r, 0.0);
  for (size_t i = 0; i < rows; ++i) {
    const T* row = m + i * cols;
    for (size_t k = 0; k < r; ++k) {
      const double pk = p[i * r + k];
      double* a = acc.data() + k * cols;
      for (size_t j = 0; j < cols; ++j) a[j] += static_cast<double>(row[j]) * pk;
    }
  }
  for (size_t j = 0; j < cols; ++j)
    for (size_t k = 0; k < r; ++k) q[j * r + k] = static_cast<T>(acc[k * cols + j]);
}

// m = p q^T, and e = m - p q^T before it (when e is given): the error the step leaves.
template <typename T>
void reconstruct(const T* p, const T* qt, T* m, T* e, size_t rows, size_t cols, size_t r,
                 std::vector<double>& acc) {
  acc.resize(cols);
  for (size_t i = 0; i < rows; ++i) {
    const double p0 = p[i * r];
    for (size_t j = 0; j < cols; ++j) acc[j] = p0 * qt[j];
    for (size_t k = 1; k < r; ++k) {
      const double pk = p[i * r + k];
      const T* qk = qt + k * cols;
      for (size_t j = 0; j < cols; ++j) acc[j] += pk * qk[j];
    }
    T* row = m + i * cols;
    if (e != nullptr) {
      T* er = e + i * cols;
      for (size_t j = 0; j < cols; ++j) er[j] = row[j] - static_cast<T>(acc[j]);
    }
    for (size_t j = 0; j < cols; ++j) row[j] = static_cast<T>(acc[j]);
  }
}

// Box-Muller over a 64-bit Mersenne Twister: deterministic, the same on every rank.
void builtin_normal(uint64_t seed, const std::vector<comm::Buffer>& qs) {
  std::mt19937_64 gen(seed);
  auto uniform = [&gen] { return (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53; };  // (0, 1]
  for (const auto& q : qs) {
    for (size_t i = 0; i < q.count; i += 2) {
      const double radius = std::sqrt(-2.0 * std::log(uniform()));
      const double theta = 2.0 * std::numbers::pi * uniform();
      const double pair[2] = {radius * std::cos(theta), radius * std::sin(theta)};
      for (size_t k = 0; k < 2 && i + k < q.count; ++k) {
        if (q.dtype == comm::DType::kFloat32) {
          *at<float>(q, i + k) = static_cast<float>(pair[k]);
        } else {
          *at<double>(q, i + k) = pair[k];
        }
      }
    }
  }
}

}  // namespace

// One compressed step of one bucket (the part of the hook after the plain iterations).
class PowerSGDBucket {
 public:
  PowerSGDBucket(PowerSGDState& state, comm::ProcessGroup& group, GradBucket& bucket)
      : s_(state), o_(state.options_), group_(group), bucket_(bucket), layout_(plan(bucket, o_)) {}

  template <typename T>
  void run();

 private:
  template <typename T>
  void init_low_rank(PowerSGDState::Memory& mem);
  template <typename T>
  comm::WorkPtr start_uncompressed(DeviceMemory& flat);

  PowerSGDState& s_;
  const PowerSGDOptions& o_;
  comm::ProcessGroup& group_;
  GradBucket& bucket_;
  Layout layout_;
};

template <typename T>
void PowerSGDBucket::init_low_rank(PowerSGDState::Memory& mem) {
  const comm::Device host{};
  const comm::DType dt = bucket_.buffer.dtype;
  const bool randomize = !o_.warm_start || !mem.low_rank || mem.q.bytes() != layout_.q_size * sizeof(T);
  if (randomize) {
    mem.p = DeviceMemory(layout_.p_size * sizeof(T), host);
    mem.q = DeviceMemory(layout_.q_size * sizeof(T), host);
    mem.low_rank = true;
    std::vector<comm::Buffer> qs;
    for (const auto& m : layout_.compressed)
      qs.push_back(mem.q.view(layout_.q_size, dt).slice(m.q_offset, m.cols * m.rank));
    const uint64_t seed = s_.next_seed();
    if (o_.random_normal) {
      o_.random_normal(seed, qs);
    } else {
      builtin_normal(seed, qs);
    }
  }
  for (const auto& m : layout_.compressed)
    orthogonalize(static_cast<T*>(mem.q.data()) + m.q_offset, m.cols, m.rank, o_.orthogonalization_epsilon);
}

template <typename T>
comm::WorkPtr PowerSGDBucket::start_uncompressed(DeviceMemory& flat) {
  if (layout_.uncompressed_size == 0) return nullptr;
  flat = DeviceMemory(layout_.uncompressed_size * sizeof(T), comm::Device{});
  T* dst = static_cast<T*>(flat.data());
  for (const auto& [offset, count] : layout_.uncompressed) {
    std::memcpy(dst, at<T>(bucket_.buffer, offset), count * sizeof(T));
    dst += count;
  }
  return group_.all_reduce(flat.view(layout_.uncompressed_size, bucket_.buffer.dtype),
                           {comm::ReduceOp::kSum});
}

template <typename T>
void PowerSGDBucket::run() {
  const comm::Buffer& buf = bucket_.buffer;
  T* grad = at<T>(buf);
  s_.numel_before_ += layout_.numel_before;
  s_.numel_after_ += layout_.numel_after;
  PowerSGDState::Memory& mem = s_.memory_[bucket_.index];
  // Error feedback: added to the gradient in the first pass over it, and the new error
  // (the gradient plus the old error, less what the step returns) written in the last.
  T* error = nullptr;
  if (o_.use_error_feedback) {
    if (mem.error.bytes() != buf.bytes()) mem.error = DeviceMemory(buf.bytes(), comm::Device{});
    error = static_cast<T*>(mem.error.data());
    for (const auto& [offset, count] : layout_.uncompressed)
      for (size_t i = offset; i < offset + count; ++i) grad[i] += error[i];
  }
  init_low_rank<T>(mem);
  DeviceMemory flat;
  comm::WorkPtr uncompressed = start_uncompressed<T>(flat);
  T* p = static_cast<T*>(mem.p.data());
  T* q = static_cast<T*>(mem.q.data());
  std::vector<T> qt(layout_.q_size);  // each matrix's Q transposed, at its q_offset
  for (const auto& m : layout_.compressed) {
    transpose(q + m.q_offset, qt.data() + m.q_offset, m.cols, m.rank);
    add_and_multiply(grad + m.offset, error ? error + m.offset : nullptr, qt.data() + m.q_offset,
                     p + m.p_offset, m.rows, m.cols, m.rank);
  }
  comm::WorkPtr ps;
  if (layout_.p_size > 0)
    ps = group_.all_reduce(mem.p.view(layout_.p_size, buf.dtype), {comm::ReduceOp::kSum});
  const double divisor = bucket_.divisor();
  if (uncompressed) {
    uncompressed->wait();
    comm::Buffer reduced = flat.view(layout_.uncompressed_size, buf.dtype);
    scale_buffer(reduced, 1.0 / divisor);
    const T* src = static_cast<const T*>(flat.data());
    for (const auto& [offset, count] : layout_.uncompressed) {
      if (error) {
        for (size_t i = 0; i < count; ++i) error[offset + i] = grad[offset + i] - src[i];
      }
      std::memcpy(grad + offset, src, count * sizeof(T));
      src += count;
    }
  }
  if (ps) {
    ps->wait();
    std::vector<double> acc;
    for (const auto& m : layout_.compressed) {
      orthogonalize(p + m.p_offset, m.rows, m.rank, o_.orthogonalization_epsilon);
      multiply_transposed(grad + m.offset, p + m.p_offset, q + m.q_offset, m.rows, m.cols, m.rank, acc);
    }
    comm::Buffer qs = mem.q.view(layout_.q_size, buf.dtype);
    group_.all_reduce(qs, {comm::ReduceOp::kSum})->wait();
    scale_buffer(qs, 1.0 / divisor);
    for (const auto& m : layout_.compressed) {
      transpose(q + m.q_offset, qt.data() + m.q_offset, m.cols, m.rank);
      reconstruct(p + m.p_offset, qt.data() + m.q_offset, grad + m.offset, error ? error + m.offset : nullptr,
                  m.rows, m.cols, m.rank, acc);
    }
  }
  if (!o_.warm_start) mem.low_rank = false;
}

PowerSGDState::PowerSGDState(PowerSGDOptions options)
    : options_(std::move(options)), rng_(options_.random_seed) {
  if (options_.matrix_approximation_rank < 1) {
    DDP_THROW(InvalidArgument, "PowerSGD: matrix_approximation_rank must be at least 1, got ",
              options_.matrix_approximation_rank);
  }
  if ((options_.use_error_feedback || options_.warm_start) && options_.start_powersgd_iter <= 1) {
    DDP_THROW(InvalidArgument, "PowerSGD: start_powersgd_iter must be > 1 with error feedback or warm start ",
              "(the buckets are rebuilt after the first iteration), got ", options_.start_powersgd_iter);
  }
  if (options_.orthogonalization_epsilon < 0 || options_.min_compression_rate < 0) {
    DDP_THROW(InvalidArgument,
              "PowerSGD: orthogonalization_epsilon and min_compression_rate must not be negative");
  }
}

uint32_t PowerSGDState::next_seed() {
  // numpy's legacy bounded integers: masked rejection sampling on 32-bit draws.
  constexpr uint32_t kBound = 999'999'999, kMask = (1u << 30) - 1;
  uint32_t v = 0;
  do {
    v = static_cast<uint32_t>(rng_()) & kMask;
  } while (v > kBound);
  return v;
}

CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state) {
  DDP_CHECK(state != nullptr, "powersgd_hook: no state");
  CommHook plain = allreduce_hook();
  return [state = std::move(state), plain](comm::ProcessGroup& group, GradBucket& bucket) -> comm::WorkPtr {
    PowerSGDState& s = *state;
    if (s.iter_ < s.options_.start_powersgd_iter) {
      s.maybe_increase_iter(bucket);
      return plain(group, bucket);
    }
    const comm::DType dt = bucket.buffer.dtype;
    if (bucket.buffer.device.is_cuda() || (dt != comm::DType::kFloat32 && dt != comm::DType::kFloat64)) {
      DDP_THROW(InvalidArgument, "powersgd_hook: bucket ", bucket.index, " holds ", comm::to_string(dt),
                " gradients on ", bucket.buffer.device.str(),
                "; PowerSGD needs float32 or float64 on the host");
    }
    PowerSGDBucket step(s, group, bucket);
    if (dt == comm::DType::kFloat32) {
      step.run<float>();
    } else {
      step.run<double>();
    }
    s.maybe_increase_iter(bucket);
    return comm::Work::completed("powersgd bucket " + std::to_string(bucket.index));
  };
}

namespace {

// The state's bytes: a versioned header, the options that must match, the counters, the seed
// stream, then per bucket its P, Q and error feedback.

constexpr char kMagic[8] = {'P', 'S', 'G', 'D', 'v', '1', 0, 0};

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_bytes(const DeviceMemory& m) {
    put(static_cast<uint64_t>(m.bytes()));
    out_.append(static_cast<const char*>(m.data()), m.bytes());
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T get() {
    T v{};
    std::memcpy(&v, need(sizeof(T)), sizeof(T));
    return v;
  }
  DeviceMemory get_bytes() {
    const auto n = static_cast<size_t>(get<uint64_t>());
    DeviceMemory m(n, comm::Device{});
    if (n > 0) std::memcpy(m.data(), need(n), n);
    return m;
  }
  std::string get_string() {
    const auto n = static_cast<size_t>(get<uint64_t>());
    return std::string(need(n), n);
  }
  bool done() const { return at_ == in_.size(); }

 private:
  const char* need(size_t n) {
    if (n > in_.size() - at_) DDP_THROW(InvalidArgument, "PowerSGD state: the bytes end early (truncated?)");
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  const std::string& in_;
  size_t at_ = 0;
};

}  // namespace

std::string PowerSGDState::save() const {
  Writer w;
  w.put(kMagic);
  w.put(static_cast<int64_t>(options_.matrix_approximation_rank));
  w.put(static_cast<uint8_t>(options_.use_error_feedback));
  w.put(iter_);
  w.put(numel_before_);
  w.put(numel_after_);
  std::ostringstream rng;
  rng << rng_;
  w.put_string(rng.str());
  w.put(static_cast<uint64_t>(memory_.size()));
  for (const auto& [index, m] : memory_) {
    w.put(static_cast<uint64_t>(index));
    w.put(static_cast<uint8_t>(m.low_rank));
    w.put_bytes(m.p);
    w.put_bytes(m.q);
    w.put_bytes(m.error);
  }
  return w.take();
}

void PowerSGDState::load(const std::string& bytes) { load(bytes, true); }
void PowerSGDState::load_shared(const std::string& bytes) { load(bytes, false); }

void PowerSGDState::load(const std::string& bytes, bool with_error) {
  Reader r(bytes);
  char magic[sizeof(kMagic)];
  for (char& c : magic) c = r.get<char>();
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    DDP_THROW(InvalidArgument, "PowerSGD state: not a PowerSGD state of this version");
  const auto rank = r.get<int64_t>();
  const bool feedback = r.get<uint8_t>() != 0;
  if (rank != options_.matrix_approximation_rank || feedback != options_.use_error_feedback) {
    DDP_THROW(InvalidArgument, "PowerSGD state: saved with rank ", rank, " and error feedback ",
              feedback ? "on" : "off", "; this state has rank ", options_.matrix_approximation_rank,
              " and error feedback ", options_.use_error_feedback ? "on" : "off");
  }
  const auto iter = r.get<int64_t>();
  const auto before = r.get<int64_t>();
  const auto after = r.get<int64_t>();
  std::mt19937 rng;
  std::istringstream rng_in(r.get_string());
  rng_in >> rng;
  if (!rng_in) DDP_THROW(InvalidArgument, "PowerSGD state: a malformed random stream");
  std::map<size_t, Memory> memory;
  const auto buckets = r.get<uint64_t>();
  for (uint64_t b = 0; b < buckets; ++b) {
    const auto index = static_cast<size_t>(r.get<uint64_t>());
    Memory& m = memory[index];
    m.low_rank = r.get<uint8_t>() != 0;
    m.p = r.get_bytes();
    m.q = r.get_bytes();
    m.error = r.get_bytes();
  }
  if (!r.done()) DDP_THROW(InvalidArgument, "PowerSGD state: bytes left over after the state");
  if (!with_error) {  // this rank's own error feedback replaces the saved one (none: none)
    for (auto& [index, m] : memory) m.error = DeviceMemory();
    for (auto& [index, mine] : memory_) memory[index].error = std::move(mine.error);
  }
  iter_ = iter;
  numel_before_ = before;
  numel_after_ = after;
  rng_ = rng;
  memory_ = std::move(memory);
}

}  // namespace ddp
