// libFuzzer target: parse_tree_listing on arbitrary text (the hub's answer to a folder listing,
// which a mirror named by HF_ENDPOINT or anyone on the path of a plain-http one controls). It must
// return files with a path and, for each, exactly one hash of the right length in lowercase hex, or
// throw Error(kIo) naming the source; a crash, a hang, a sanitizer report or another exception is a
// finding. The listing's paths are only compared with the catalogue's, never used as file names.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/library/hub_api.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool lower_hex(const std::string& s, std::size_t length) {
  return s.size() == length && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    for (const ferry::library::HubFile& f : ferry::library::parse_tree_listing(json, "fuzz tree")) {
      check(!f.path.empty());
      check(f.sha256.empty() != f.git_oid.empty());
      check(f.sha256.empty() || lower_hex(f.sha256, 64));
      check(f.git_oid.empty() || lower_hex(f.git_oid, 40));
    }
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kIo);
    check(std::string_view(e.what()).find("fuzz tree") != std::string_view::npos);
  }
  return 0;
}
