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

// The hub's answer is a stranger's JSON: nesting deeper than a listing's three levels, and an
// answer over kMaxTreeAnswerBytes or with more than kMaxTreeEntries files, are refused with kIo
// before anything walks them.
TEST(HubApi, RefusesDeepNestingAndOversizedAnswers) {
  const auto refusal = [](const std::string& answer) -> std::string {
    try {
      parse_tree_listing(answer, "tree");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      return e.what();
    }
    ADD_FAILURE() << "accepted an answer of " << answer.size() << " bytes";
    return {};
  };
  const std::string file =
      R"({"type": "file", "path": "a", "size": 1, "oid": "3333333333333333333333333333333333333333"})";
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(refusal(deep).find("nested too deeply"), std::string::npos);
  EXPECT_NE(refusal(std::string(100000, '{')).find("nested too deeply"), std::string::npos);
  EXPECT_NE(
      refusal("[" + file + R"(, {"type": "file", "x": )" + deep + "}]").find("nested too deeply"),
      std::string::npos);
  EXPECT_EQ(parse_tree_listing("[" + file + "]", "tree").size(), 1u);

  std::string padded = "[" + file + "]";
  padded += std::string(kMaxTreeAnswerBytes + 1 - padded.size(), ' ');
  EXPECT_NE(refusal(padded).find("larger than 8 MiB"), std::string::npos);
  std::string many = "[" + file;
  for (std::size_t i = 0; i < kMaxTreeEntries; ++i) many += ", " + file;
  EXPECT_NE(refusal(many + "]").find("too many entries"), std::string::npos);
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
