// The per-user data folder (core/io/user_data.h).
#include "core/io/user_data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/test_support.h"

namespace ferry::io {
namespace {

void set_env(const char* name, const std::string& value) {
#ifdef _WIN32
  _putenv_s(name, value.c_str());
#else
  setenv(name, value.c_str(), 1);
#endif
}

TEST(UserData, FerryDataDirOverridesThePlatformFolder) {
  test::ScratchDir dir;
  const char* old = std::getenv("FERRY_DATA_DIR");
  const std::string saved = old != nullptr ? old : "";
  set_env("FERRY_DATA_DIR", (dir / "data").string());
  EXPECT_EQ(user_data_dir(), dir / "data");
  const auto demo = user_data_subdir("demo");
  EXPECT_EQ(demo, dir / "data" / "demo");
  EXPECT_TRUE(std::filesystem::is_directory(demo));
  set_env("FERRY_DATA_DIR", saved);
}

TEST(UserData, IsNamedFerryInThePlatformFolder) {
  const char* old = std::getenv("FERRY_DATA_DIR");
  const std::string saved = old != nullptr ? old : "";
  set_env("FERRY_DATA_DIR", "");
  EXPECT_EQ(user_data_dir().filename(), "Ferry");
  set_env("FERRY_DATA_DIR", saved);
}

}  // namespace
}  // namespace ferry::io
