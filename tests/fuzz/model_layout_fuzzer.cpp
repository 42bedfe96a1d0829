// libFuzzer target: the readers that recognise a model's layout from a safetensors header and infer
// its configuration from the shapes alone — the TAEHV preview decoder (TaehvWeights::shapes_only),
// the Qwen3-VL vision tower and the H3 language model (VisionTowerWeights::from,
// TextEncoderWeights::from). The input is the JSON header; the data section is as long as the
// header's largest data_offsets end says (a sparse file, capped), so real headers reach the layout
// checks. Each reader must either give a configuration that keeps its promises or throw
// Error(kBadModelFile / kMissingTensor / kUnsupported); anything else is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/models/h3/vision_tower_weights.h"
#include "core/models/taehv/taehv_weights.h"
#include "tests/fuzz/scratch_file.h"

namespace {

// Data sections longer than this are not made (the sparse file stays cheap); such headers are
// then refused by the safetensors reader, which is fuzzed on its own.
constexpr std::uint64_t kMaxDataBytes = 256ull << 20;

void check(bool ok) {
  if (!ok) std::abort();
}

const std::filesystem::path& scratch_file() {
  static const ferry::fuzz::ScratchFile file("ferry_layout_fuzz");
  return file.path();
}

// The largest data_offsets end the header names (0 when it is no JSON object of entries).
std::uint64_t data_bytes_claimed(const std::uint8_t* data, std::size_t size) {
  const auto header = nlohmann::json::parse(data, data + size, nullptr, false);
  std::uint64_t end = 0;
  if (!header.is_object()) return end;
  for (const auto& [name, entry] : header.items()) {
    if (!entry.is_object() || !entry.contains("data_offsets")) continue;
    const auto& offsets = entry["data_offsets"];
    if (offsets.is_array() && offsets.size() == 2 && offsets[1].is_number_unsigned()) {
      end = std::max(end, offsets[1].get<std::uint64_t>());
    }
  }
  return end;
}

bool expected(const ferry::Error& e) {
  return e.code() == ferry::ErrorCode::kBadModelFile ||
         e.code() == ferry::ErrorCode::kMissingTensor || e.code() == ferry::ErrorCode::kUnsupported;
}

void taehv(const ferry::io::TensorSet& set) {
  try {
    const auto weights = ferry::models::taehv::TaehvWeights::shapes_only(set);
    const auto& config = weights.config();
    check(config.latent_channels > 0 && (config.patch == 1 || config.patch == 2));
    for (int width : config.widths) check(width > 0);
  } catch (const ferry::Error& e) {
    check(expected(e));
  }
}

void vision_tower(const ferry::io::TensorSet& set) {
  try {
    if (!ferry::models::h3::VisionTowerWeights::present(set)) return;
    const auto weights = ferry::models::h3::VisionTowerWeights::from(set);
    const auto& config = weights.config();
    check(config.depth > 0 && config.dim > 0 && config.heads > 0 && config.dim % config.heads == 0);
    check(config.patch > 0 && config.merge > 0 && config.out_dim > 0);
  } catch (const ferry::Error& e) {
    check(expected(e));
  }
}

void text_encoder(const ferry::io::TensorSet& set) {
  try {
    const auto weights = ferry::models::h3::TextEncoderWeights::from(set);
    const auto& config = weights.config();
    check(config.file_layers >= config.layers && config.dim > 0 && config.vocab_rows > 0);
    check(config.heads > 0 && config.kv_heads > 0 && config.heads % config.kv_heads == 0);
  } catch (const ferry::Error& e) {
    check(expected(e));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint64_t claimed = data_bytes_claimed(data, size);
  const std::uint64_t n = size;
  {
    std::ofstream out(scratch_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    check(out.good());
  }
  std::filesystem::resize_file(scratch_file(), 8 + size + std::min(claimed, kMaxDataBytes));
  try {
    const auto set = ferry::io::TensorSet::open(scratch_file());
    taehv(set);
    vision_tower(set);
    text_encoder(set);
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);  // the safetensors reader's refusal
  }
  return 0;
}
