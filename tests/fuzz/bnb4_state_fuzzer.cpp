// libFuzzer target: bitsandbytes 4-bit grouping of a small state dict whose quant-state JSON is
// the input (after one byte choosing nf4/fp4 and nested/plain side tensors). Any input must
// either group the weight into a kBnb4 tensor that keeps the promises of bnb4.h or throw
// Error(kBadModelFile) / Error(kUnsupported); anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/bnb4.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

ferry::io::TensorInfo tensor(std::string name, ferry::DType dtype, std::vector<std::uint64_t> shape,
                             std::uint64_t bytes) {
  ferry::io::TensorInfo t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes = bytes;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ferry::DType;
  if (size == 0) return 0;
  const bool fp4 = (data[0] & 1) != 0;
  const bool nested = (data[0] & 2) != 0;
  const std::string json(reinterpret_cast<const char*>(data) + 1, size - 1);

  // A [4, 128] weight in blocks of 64: 8 blocks, 256 bytes of codes.
  std::vector<ferry::io::TensorInfo> tensors;
  tensors.push_back(tensor("l.weight", DType::kU8, {256, 1}, 256));
  tensors.push_back(tensor("l.weight.absmax", nested ? DType::kU8 : DType::kF32, {8}, 8));
  tensors.push_back(tensor("l.weight.quant_map", DType::kF32, {16}, 64));
  if (nested) {
    tensors.push_back(tensor("l.weight.nested_absmax", DType::kF32, {1}, 4));
    tensors.push_back(tensor("l.weight.nested_quant_map", DType::kF32, {256}, 1024));
  }
  tensors.push_back(
      tensor(std::string("l.weight.quant_state.bitsandbytes__") + (fp4 ? "fp4" : "nf4"), DType::kU8,
             {json.size()}, json.size()));
  try {
    ferry::io::group_bnb4_weights(
        tensors, [&](const ferry::io::TensorInfo&) { return json; }, "fuzz.safetensors");
    const ferry::io::TensorInfo& w = tensors[0];
    if (w.dtype == DType::kBnb4) {
      check(w.bnb4 != nullptr && w.shape.size() == 2);
      check(w.shape[0] * w.shape[1] == 2 * w.bytes);
      check(w.shape[1] % static_cast<std::uint64_t>(w.bnb4->blocksize) == 0);
      check(w.bnb4->nested == nested);
      check(w.bnb4->quant_type == (fp4 ? "fp4" : "nf4"));
    } else {
      check(w.bnb4 == nullptr);
    }
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile ||
          e.code() == ferry::ErrorCode::kUnsupported);
  }
  return 0;
}
