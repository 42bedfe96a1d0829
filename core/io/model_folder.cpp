// Finding a model's files in a folder.
#include "core/io/model_folder.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/tensor_set.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

bool has_suffix(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_pickle_file(const fs::path& path) {
  const std::string ext = detail::display(path.extension());
  return ext == ".pth" || ext == ".pt" || ext == ".ckpt" || ext == ".pkl";
}

std::vector<fs::path> find_safetensors_sets(const fs::path& folder, std::vector<fs::path>* pickles) {
  std::vector<fs::path> indexes;
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           folder, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = detail::display(it->path().filename());
    if (it->is_directory() && !name.empty() && name[0] == '.') {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    if (has_suffix(name, ".safetensors.index.json")) indexes.push_back(it->path());
    else if (has_suffix(name, ".safetensors") || has_suffix(name, ".gguf")) files.push_back(it->path());
    else if (pickles != nullptr && is_pickle_file(it->path())) pickles->push_back(it->path());
  }
  if (ec) {
    throw Error(ErrorCode::kIo, "cannot list " + detail::display(folder) + ": " + ec.message());
  }
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  if (pickles != nullptr) std::sort(pickles->begin(), pickles->end());
  std::vector<fs::path> sets = indexes;
  std::set<fs::path> claimed;
  for (const fs::path& index : indexes) {
    const io::TensorSet set = io::TensorSet::open(index);
    for (const io::TensorFile& shard : set.files()) claimed.insert(shard.path());
  }
  for (const fs::path& file : files) {
    if (claimed.count(file) == 0) sets.push_back(file);
  }
  return sets;
}

}  // namespace ferry::io
