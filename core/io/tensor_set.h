// A model component's tensors, from one .safetensors file or from a sharded set named by a
// `*.safetensors.index.json` (the Hugging Face layout: {"metadata": {...}, "weight_map":
// {tensor: shard file}}). Names are unique across the set; every shard is validated.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/io/tensor_file.h"

namespace ferry::io {

// Index files larger than this are refused (real ones are well under 1 MB).
inline constexpr std::uint64_t kMaxShardIndexBytes = 64ull << 20;

class TensorSet {
 public:
  struct Entry {
    const TensorFile* file;
    const TensorInfo* tensor;
  };

  // `path` is a .safetensors file or a .safetensors.index.json. Throws Error: kIo when a file
  // cannot be read, kBadModelFile when any file or the index is invalid or they disagree.
  static TensorSet open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  bool sharded() const { return sharded_; }
  const std::vector<TensorFile>& files() const { return files_; }
  // Every tensor, file by file, each file in offset order.
  const std::vector<Entry>& entries() const { return entries_; }
  std::uint64_t tensor_bytes() const { return tensor_bytes_; }

  const Entry* find(std::string_view name) const;
  // Throws Error(kMissingTensor).
  const Entry& at(std::string_view name) const;

 private:
  void index_entries();

  std::filesystem::path path_;
  bool sharded_ = false;
  std::vector<TensorFile> files_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string_view, std::size_t> by_name_;
  std::uint64_t tensor_bytes_ = 0;
};

// Parses a shard index: returns (tensor name, shard file name) pairs. Shard names must be plain
// file names in the index's folder. Throws Error(kBadModelFile).
std::vector<std::pair<std::string, std::string>> parse_shard_index(std::string_view json,
                                                                   std::string_view source);

}  // namespace ferry::io
