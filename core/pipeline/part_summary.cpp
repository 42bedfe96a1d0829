#include "core/pipeline/part_summary.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/io/tensor_set.h"
#include "core/tensor/dtype.h"

namespace ferry::pipeline {

PartSummary summarize_part(const std::filesystem::path& path) {
  const io::TensorSet set = io::TensorSet::open(path);
  PartSummary summary;
  std::map<std::string, std::uint64_t> by_dtype;
  for (const auto& entry : set.entries()) {
    by_dtype[std::string(dtype_name(entry.tensor->dtype))] += entry.tensor->bytes;
  }
  for (const auto& file : set.files()) summary.bytes += file.file_size();
  std::vector<std::pair<std::string, std::uint64_t>> sorted(by_dtype.begin(), by_dtype.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto& [name, bytes] : sorted) summary.dtypes.push_back(name);
  return summary;
}

}  // namespace ferry::pipeline
