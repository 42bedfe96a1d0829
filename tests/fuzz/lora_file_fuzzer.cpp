// libFuzzer target: open_lora (core/models/lora/lora_file.h) on a safetensors file whose JSON
// header is the input, followed by a 4 KiB data section that repeats the input's bytes (so
// alphas and scales take fuzzed values). Any input must either give Terms that keep the promises
// of lora_file.h or throw Error(kBadModelFile); anything else is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "core/models/lora/lora_file.h"
#include "tests/fuzz/scratch_file.h"

namespace {

using ferry::models::lora::LoraFile;
using ferry::models::lora::Term;
using ferry::models::lora::TermKind;

constexpr std::size_t kDataBytes = 4096;

void check(bool ok) {
  if (!ok) std::abort();
}

const std::filesystem::path& scratch_file() {
  static const ferry::fuzz::ScratchFile file("ferry_lora_fuzz");
  return file.path();
}

bool is_float(ferry::DType d) {
  return d == ferry::DType::kF32 || d == ferry::DType::kF16 || d == ferry::DType::kBF16;
}

void check_promises(const LoraFile& lora) {
  check(!lora.terms.empty());
  std::set<std::string> used;  // every tensor is part of one Term at most
  for (const Term& t : lora.terms) {
    check(!t.module.empty());
    const ferry::io::TensorInfo& up = lora.file->at(t.up);
    check(is_float(up.dtype));
    check(used.insert(t.up).second);
    if (t.kind == TermKind::kLowRank) {
      const ferry::io::TensorInfo& down = lora.file->at(t.down);
      check(is_float(down.dtype));
      check(used.insert(t.down).second);
      const auto d = ferry::models::lora::down_shape(lora, t);
      const auto u = ferry::models::lora::up_shape(lora, t);
      check(d.size() == 2 && u.size() == 2);
      check(t.rank > 0 && d[0] == t.rank && u[1] == t.rank && d[1] > 0 && u[0] > 0);
      check(std::isfinite(t.alpha_scale));
    } else {
      check(t.down.empty() && t.rank == 0 && t.alpha_scale == 1.0f);
      check(ferry::models::lora::down_shape(lora, t).empty());
    }
  }
  for (const std::string& name : lora.ignored) check(lora.file->find(name) != nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(8, '\0');
  const std::uint64_t n = size;
  std::memcpy(file.data(), &n, 8);
  file.append(reinterpret_cast<const char*>(data), size);
  for (std::size_t i = 0; i < kDataBytes; ++i) file.push_back(static_cast<char>(data[i % size]));
  {
    std::ofstream out(scratch_file(), std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    check(out.good());
  }
  try {
    check_promises(ferry::models::lora::open_lora(scratch_file()));
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);
  }
  return 0;
}
