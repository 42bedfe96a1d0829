// Tensor: a typed, shaped, contiguous (row-major) window onto memory that something else owns —
// an Arena (activations, allocated once per stage) or a streamer slot (weights, borrowed for one
// layer). A Tensor never owns or frees memory; whoever hands it out says how long it is valid.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/tensor/dtype.h"

namespace ferry {

enum class Device { kCpu, kCuda };

std::string_view device_name(Device device);

// Up to kMaxRank dimensions, stored inline: shapes never allocate.
class Shape {
 public:
  static constexpr int kMaxRank = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  // The last dimension (1 for a scalar) and the product of all the others: the [rows, cols]
  // view most ops take.
  std::int64_t cols() const { return rank_ == 0 ? 1 : dims_[static_cast<std::size_t>(rank_ - 1)]; }
  std::int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[3, 4]"

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device = Device::kCpu;

  std::int64_t numel() const { return shape.numel(); }
  // For a block type (dtype_is_blocked) every row — the last dimension — is whole blocks.
  std::size_t bytes() const {
    return static_cast<std::size_t>(dtype_storage_bytes(dtype, static_cast<std::uint64_t>(numel())));
  }
  bool empty() const { return numel() == 0; }

  // The same memory seen with another shape of the same element count. Throws kInternal.
  Tensor reshaped(Shape to) const;
  // Rows [begin, end) of dimension 0: contiguous, so still a plain Tensor.
  Tensor rows(std::int64_t begin, std::int64_t end) const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

std::string describe(const Tensor& t);  // "BF16[3, 4] on cuda"

// Checks used by every backend entry point: they throw Error(kInternal) naming `op`, because a
// wrong shape reaching an op is a bug in the model code, not a user error.
//
// The message is given in pieces (text, numbers, shapes, dtypes, tensors) that are joined only
// when the check fails: a check that passes costs a comparison and allocates nothing, which the
// ops on a step's hot path rely on (architecture.md §3 rule 3). A std::string piece is accepted,
// but it was built before the call whatever the outcome: hot paths pass the parts instead.
//   require(w.shape[1] == k, op, "weight ", w.shape, " does not match input ", x.shape);
namespace detail {
[[noreturn]] void fail_check(const char* op, const std::string& what);
inline void append_piece(std::string& out, std::string_view text) {
  out += text;
}
void append_piece(std::string& out, const Shape& shape);
void append_piece(std::string& out, DType dtype);
void append_piece(std::string& out, const Tensor& tensor);
template <typename T>
requires std::is_integral_v<T>
void append_piece(std::string& out, T value) {
  out += std::to_string(value);
}
}  // namespace detail

template <typename... Pieces>
void require(bool condition, const char* op, const Pieces&... what) {
  if (condition) [[likely]]
    return;
  std::string message;
  (detail::append_piece(message, what), ...);
  detail::fail_check(op, message);
}
void require_shape(const Tensor& t, const Shape& shape, const char* op, const char* name);
void require_float(const Tensor& t, const char* op, const char* name);

}  // namespace ferry
