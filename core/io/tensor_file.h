// One model file, opened for mapping, with its validated header: a .safetensors file (a
// bitsandbytes 4-bit state dict among them) or a GGUF file, told apart by their first bytes.
// Tensors are TensorInfo whatever the container; views on their bytes are leases on the mapping.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/io/gguf.h"
#include "core/io/mapped_file.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_info.h"

namespace ferry::io {

enum class TensorFileFormat { kSafetensors, kGguf };

class TensorFile {
 public:
  // Throws Error: kIo when the file cannot be opened or read, kBadModelFile when it is invalid.
  static TensorFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  std::uint64_t file_size() const { return file_.size(); }
  TensorFileFormat format() const { return format_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // safetensors: the `__metadata__` strings. GGUF: empty (see gguf()).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // GGUF: the key/value section; nullptr for a safetensors file.
  const GgufHeader* gguf() const { return format_ == TensorFileFormat::kGguf ? &gguf_ : nullptr; }
  std::uint64_t data_offset() const { return data_offset_; }

  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // Throws Error(kMissingTensor) when absent.
  const TensorInfo& at(std::string_view name) const;

  // A lease on a tensor's bytes.
  MappedView map(const TensorInfo& tensor) const { return file_.map(tensor.offset, tensor.bytes); }
  const MappedFile& mapped_file() const { return file_; }

 private:
  void index_tensors();

  MappedFile file_;
  TensorFileFormat format_ = TensorFileFormat::kSafetensors;
  std::uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  GgufHeader gguf_;
  std::unordered_map<std::string_view, std::size_t> index_;  // views into tensors_ names
};

}  // namespace ferry::io
