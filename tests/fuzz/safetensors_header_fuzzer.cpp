// libFuzzer target: parse_safetensors_header on arbitrary bytes, taken as a whole file. Any
// input must either parse into a header that keeps the promises of safetensors.h or throw
// Error(kBadModelFile); a crash, a sanitizer report, another exception or a broken promise
// is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "core/io/safetensors.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_promises(const ferry::io::SafetensorsHeader& header, std::uint64_t file_size) {
  using ferry::io::TensorInfo;
  check(header.data_offset >= 8 + 2 && header.data_offset <= file_size);
  const TensorInfo* previous = nullptr;  // the last non-empty tensor
  for (const TensorInfo& t : header.tensors) {
    check(!t.name.empty());
    check(t.shape.size() <= ferry::io::kMaxTensorRank);
    check(t.offset >= header.data_offset);
    check(t.bytes <= file_size - t.offset);
    check(t.element_count() * ferry::dtype_size(t.dtype) == t.bytes);
    if (t.bytes == 0) continue;
    if (previous != nullptr) check(t.offset >= previous->offset + previous->bytes);
    previous = &t;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    check_promises(ferry::io::parse_safetensors_header(bytes, size, "fuzz.safetensors"), size);
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);
  }
  return 0;
}
