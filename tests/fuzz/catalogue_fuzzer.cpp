// libFuzzer target: parse_catalogue on arbitrary text (a model catalogue a user adds to
// <user data>/catalogues/, pasted from anywhere). It must return entries inside the promises of
// core/library/catalogue.h — every destination a safe relative path with no "..", no pickle file,
// plain repository names — or throw Error(kBadArgument) naming the source; a crash, a hang, a
// sanitizer report or another exception (nlohmann's own included) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/io/model_folder.h"
#include "core/library/catalogue.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_file(const ferry::library::CatalogueFile& f) {
  check(!f.to.empty() && f.to.is_relative() && !f.to.has_root_name());
  for (const auto& part : f.to) check(part != ".." && part != ".");
  check(!ferry::io::is_pickle_file(f.to) && !ferry::io::is_pickle_file(f.path));
  check(f.repo.find('/') != std::string::npos && f.repo.find("..") == std::string::npos);
  check(f.repo.find_first_of("?#% \\") == std::string::npos);
  check(!f.revision.empty() && f.revision.find("..") == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    const ferry::library::Catalogue c = ferry::library::parse_catalogue(json, "fuzz.json");
    for (const auto& e : c.entries) {
      check(!e.name.empty() && e.name.size() <= 64 && !e.variants.empty());
      check(e.licence.url.rfind("https://", 0) == 0);
      check(!e.licence.confirm || !e.licence.notice.empty());
      for (const auto& v : e.variants) {
        check(!v.files.empty());
        for (const auto& f : v.files) check_file(f);
      }
    }
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadArgument);
    check(std::string_view(e.what()).find("fuzz.json") != std::string_view::npos);
  }
  return 0;
}
