// The H3 demo set (core/models/h3/demo_model.h), written once per test binary into a scratch
// folder and shared by the pipeline suites that run it (an inline function's static is one
// object across translation units).
#pragma once

#include <filesystem>

#include "core/models/family.h"
#include "tests/test_support.h"

namespace ferry::test {

inline const std::filesystem::path& h3_demo_folder() {
  static const ScratchDir dir;
  static const std::filesystem::path folder = [] {
    const std::filesystem::path f = dir / "h3-demo";
    models::find_family("h3")->write_demo_model(f);
    return f;
  }();
  return folder;
}

}  // namespace ferry::test
