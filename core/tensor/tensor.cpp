#include "core/tensor/tensor.h"

#include "core/error.h"

namespace ferry {

std::string_view device_name(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  if (dims.size() > kMaxRank) throw Error(ErrorCode::kInternal, "tensor rank above 6");
  for (std::int64_t d : dims) {
    if (d < 0) throw Error(ErrorCode::kInternal, "negative tensor dimension");
    dims_[static_cast<std::size_t>(rank_++)] = d;
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if ((*this)[i] != other[i]) return false;
  }
  return true;
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i != 0) out += ", ";
    out += std::to_string((*this)[i]);
  }
  return out + "]";
}

Tensor Tensor::reshaped(Shape to) const {
  require(to.numel() == numel(), "reshape", shape, " -> ", to);
  require(to.cols() % dtype_block_elems(dtype) == 0, "reshape", shape, " -> ", to,
          ": rows must stay whole blocks of ", dtype);
  Tensor t = *this;
  t.shape = to;
  return t;
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t end) const {
  require(shape.rank() >= 1 && begin >= 0 && begin <= end && end <= shape[0], "rows", shape,
          " rows ", begin, "..", end);
  Tensor t = *this;
  t.shape[0] = end - begin;
  const std::size_t row_bytes = shape[0] == 0 ? 0 : bytes() / static_cast<std::size_t>(shape[0]);
  t.data = static_cast<std::byte*>(data) + static_cast<std::size_t>(begin) * row_bytes;
  return t;
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype)) + t.shape.str() + " on " + std::string(device_name(t.device));
}

namespace detail {

void fail_check(const char* op, const std::string& what) {
  throw Error(ErrorCode::kInternal, std::string(op) + ": " + what);
}

void append_piece(std::string& out, const Shape& shape) {
  out += shape.str();
}
void append_piece(std::string& out, DType dtype) {
  out += dtype_name(dtype);
}
void append_piece(std::string& out, const Tensor& tensor) {
  out += describe(tensor);
}

}  // namespace detail

void require_shape(const Tensor& t, const Shape& shape, const char* op, const char* name) {
  require(t.shape == shape, op, name, " is ", t.shape, ", expected ", shape);
}

void require_float(const Tensor& t, const char* op, const char* name) {
  require(t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16, op, name,
          " must be F32, BF16 or F16, not ", t.dtype);
}

}  // namespace ferry
