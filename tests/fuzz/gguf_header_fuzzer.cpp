// libFuzzer target: parse_gguf_header on arbitrary bytes, taken as a whole file, and
// try_parse_gguf_header on the first half of them (the growing-chunk path of TensorFile::open).
// Any input must either parse into a header that keeps the promises of gguf.h or throw
// Error(kBadModelFile) (kUnsupported for an orig_shape reshape that splits blocks); a crash, a
// sanitizer report, another exception or a broken promise is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <span>
#include <string>

#include "core/error.h"
#include "core/io/gguf.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_promises(const ferry::io::GgufHeader& header, std::uint64_t file_size) {
  using ferry::io::TensorInfo;
  check(header.version == 2 || header.version == 3);
  const std::uint64_t a = header.alignment;
  check(a != 0 && (a & (a - 1)) == 0 && a <= ferry::io::kMaxGgufAlignment);
  check(header.data_offset % a == 0);
  std::set<std::string> names;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : header.tensors) {
    check(!t.name.empty() && names.insert(t.name).second);
    check(t.shape.size() <= ferry::io::kMaxGgufDims);
    for (std::uint64_t d : t.shape) check(d > 0);
    check(t.offset >= header.data_offset && (t.offset - header.data_offset) % a == 0);
    check(t.offset <= file_size && t.bytes <= file_size - t.offset);
    check(ferry::dtype_storage_bytes(t.dtype, t.element_count()) == t.bytes);
    if (previous != nullptr) check(t.offset >= previous->offset + previous->bytes);
    previous = &t;
  }
}

void check_error(const ferry::Error& e) {
  check(e.code() == ferry::ErrorCode::kBadModelFile || e.code() == ferry::ErrorCode::kUnsupported);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    check_promises(ferry::io::parse_gguf_header(bytes, size, "fuzz.gguf"), size);
  } catch (const ferry::Error& e) {
    check_error(e);
  }
  try {
    if (auto header = ferry::io::try_parse_gguf_header(bytes.first(size / 2), size, "fuzz.gguf")) {
      check_promises(*header, size);
    }
  } catch (const ferry::Error& e) {
    check_error(e);
  }
  return 0;
}
