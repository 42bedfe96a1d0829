// The catalogues a user has: the built-in ones, then the user's folder (kept apart from
// catalogue.cpp, which the catalogue fuzzer compiles alone, without the built-in ones).
#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/library/catalogue.h"

namespace ferry::library {

namespace fs = std::filesystem;

Catalogue load_catalogue(const fs::path& user_folder, std::vector<std::string>* problems) {
  Catalogue catalogue = builtin_catalogue();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(user_folder, ec)) {
    std::error_code file_ec;
    if (entry.path().extension() == ".json" && entry.is_regular_file(file_ec)) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const std::string source = io::detail::display(file);
    try {
      std::error_code size_ec;
      if (fs::file_size(file, size_ec) > kMaxCatalogueBytes || size_ec) {
        throw Error(ErrorCode::kBadArgument, source + ": missing or larger than 4 MiB");
      }
      std::ifstream in(file, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      merge_catalogue(catalogue, parse_catalogue(text.str(), source));
    } catch (const Error& e) {
      if (problems != nullptr) problems->push_back(e.what());
    }
  }
  return catalogue;
}

}  // namespace ferry::library
