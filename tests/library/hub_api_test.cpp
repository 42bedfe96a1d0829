// The hub's API without the transport (core/library/hub_api.h): addresses and tree answers.
#include "core/library/hub_api.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry::library {
namespace {

TEST(HubApi, ReadsLfsAndGitFilesOfATreeAnswer) {
  const std::string answer = R"([
    {"type": "directory", "oid": "1111111111111111111111111111111111111111", "size": 0, "path": "vae"},
    {"type": "file", "oid": "2222222222222222222222222222222222222222", "size": 135, "path": "vae/w.safetensors",
     "lfs": {"oid": "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789", "size": 254000000, "pointerSize": 135}},
    {"type": "file", "oid": "3333333333333333333333333333333333333333", "size": 700, "path": "vae/config.json"}])";
  const std::vector<HubFile> files = parse_tree_listing(answer, "tree");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "vae/w.safetensors");
  EXPECT_EQ(files[0].size, 254000000u);  // the LFS object's size, not the pointer's
  EXPECT_EQ(files[0].sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  EXPECT_TRUE(files[0].git_oid.empty());
  EXPECT_EQ(files[1].git_oid, "3333333333333333333333333333333333333333");
  EXPECT_TRUE(files[1].sha256.empty());
}

TEST(HubApi, RefusesWhatIsNoListing) {
  for (
      const char* answer :
      {"", "{}", "[1]", R"([{"type": "file", "size": 1}])", R"([{"type": "file", "path": "a"}])",
       R"([{"type": "file", "path": "a", "size": 1, "oid": "xyz"}])",
       R"([{"type": "file", "path": "a", "size": 1, "lfs": {"oid": "12"}}])",
       R"([{"type": "file", "path": "a", "size": -1, "oid": "3333333333333333333333333333333333333333"}])",
       R"([[[[[[1]]]]]])"}) {
    EXPECT_EQ(test::error_code_of([&] { parse_tree_listing(answer, "tree"); }), ErrorCode::kIo)
        << answer;
  }
}

TEST(HubApi, EncodesRevisionsAndPathsSegmentBySegment) {
  EXPECT_EQ(tree_url("https://hf.co", "org/name", "main", "split_files/vae"),
            "https://hf.co/api/models/org/name/tree/main/split_files/vae");
  EXPECT_EQ(resolve_url("https://hf.co", "org/name", "refs/pr/1", "a b/c#d.safetensors"),
            "https://hf.co/org/name/resolve/refs%2Fpr%2F1/a%20b/c%23d.safetensors");
  EXPECT_EQ(tree_url("http://127.0.0.1:9", "o/n", "main", ""),
            "http://127.0.0.1:9/api/models/o/n/tree/main");
}

}  // namespace
}  // namespace ferry::library
