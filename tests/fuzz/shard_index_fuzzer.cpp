// libFuzzer target: parse_shard_index on arbitrary text. It must return (tensor, shard) pairs
// with unique tensor names and plain .safetensors file names, or throw Error(kBadModelFile).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/io/tensor_set.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    std::set<std::string> names;
    for (const auto& [tensor, shard] : ferry::io::parse_shard_index(json, "fuzz.index.json")) {
      check(names.insert(tensor).second);
      check(ends_with(shard, ".safetensors"));
      check(shard.find_first_of("/\\:") == std::string::npos);
    }
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);
  }
  return 0;
}
