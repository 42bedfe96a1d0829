// A model part's files as a user sees them (the app's model panel): bytes on disk and the dtypes
// of its tensors, most bytes first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::pipeline {

struct PartSummary {
  std::uint64_t bytes = 0;
  std::vector<std::string> dtypes;  // "BF16", "F8_E4M3", ... most bytes first
};
// Throws the errors of opening `path` (kIo, kBadModelFile).
PartSummary summarize_part(const std::filesystem::path& path);

}  // namespace ferry::pipeline
