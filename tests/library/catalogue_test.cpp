// The model catalogue (core/library/catalogue.h): the built-in catalogues parse and hold what the
// issue lists; a user catalogue extends and overrides them; every rule a stranger's catalogue could
// break is refused with a message naming the catalogue and the field.
#include "core/library/catalogue.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry::library {
namespace {

namespace fs = std::filesystem;

std::string one_model(const std::string& file_fields, const std::string& licence = "") {
  return R"({"ferry_catalogue": 1, "models": [{"name": "m", "title": "M", "family": "wan",
    "licence": )" +
         (licence.empty() ? std::string(R"({"id": "apache-2.0", "url": "https://a.b/l"})")
                          : licence) +
         R"(, "variants": [{"precision": "fp16", "files": [{)" + file_fields + "}]}]}]}";
}

std::string refusal(const std::string& json) {
  try {
    parse_catalogue(json, "test.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    EXPECT_EQ(std::string(e.what()).rfind("test.json", 0), 0u) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << json;
  return {};
}

TEST(Catalogue, TheBuiltInCatalogueHoldsTheIssuesModels) {
  const Catalogue c = builtin_catalogue();
  for (const char* name :
       {"wan2.2-ti2v-5b", "wan2.1-t2v-1.3b", "wan2.2-i2v-a14b", "wan2.2-t2v-a14b", "umt5-xxl",
        "wan-vae", "minimax-h3-nf4", "lightx2v-wan2.2-i2v-a14b"}) {
    EXPECT_NE(c.find(name), nullptr) << name;
  }
  const CatalogueEntry* ti2v = c.find("wan2.2-ti2v-5b");
  ASSERT_NE(ti2v, nullptr);
  for (const char* precision : {"fp16", "Q8_0", "Q4_K_M"}) {
    EXPECT_NE(ti2v->variant(precision), nullptr) << precision;
  }
  EXPECT_EQ(ti2v->variant(""), &ti2v->variants.front());
  EXPECT_EQ(ti2v->variant("fp8"), nullptr);
  EXPECT_GT(ti2v->variant("fp16")->size_hint(), 10ull << 30);
  EXPECT_FALSE(ti2v->licence.confirm);
  const CatalogueEntry* h3 = c.find("minimax-h3-nf4");
  ASSERT_NE(h3, nullptr);
  EXPECT_TRUE(h3->licence.confirm);
  EXPECT_NE(h3->licence.notice.find("MiniMax H3 Community License"), std::string::npos);
  EXPECT_EQ(ti2v->source, "built-in wan.json");
}

TEST(Catalogue, ParsesAFileWithItsDefaults) {
  const Catalogue c = parse_catalogue(
      one_model(R"("repo": "org/name", "path": "split_files/vae/v.safetensors", "size_hint": 5)"),
      "test.json");
  ASSERT_EQ(c.entries.size(), 1u);
  const CatalogueFile& f = c.entries[0].variants[0].files[0];
  EXPECT_EQ(f.revision, "main");
  EXPECT_EQ(f.to, fs::path("split_files") / "vae" / "v.safetensors");
  EXPECT_EQ(f.size_hint, 5u);
}

TEST(Catalogue, RefusesPickleFilesWhateverTheCatalogueSays) {
  for (const char* path : {"model.bin", "a/model.pt", "x.pth", "y.CKPT", "z.pkl"}) {
    const std::string why =
        refusal(one_model(std::string(R"("repo": "o/n", "path": ")") + path + "\""));
    EXPECT_NE(why.find("pickle"), std::string::npos) << why;
  }
  const std::string why = refusal(
      one_model(R"("repo": "o/n", "path": "a.safetensors", "to": "diffusion_models/a.pt")"));
  EXPECT_NE(why.find("pickle"), std::string::npos) << why;
}

TEST(Catalogue, RefusesPathsThatWouldLeaveTheModelsFolder) {
  for (const char* to :
       {"../a.safetensors", "/etc/a.safetensors", "C:/a.safetensors", "a/../../b.safetensors",
        "nul.safetensors", "a.safetensors:stream", "x\\\\..\\\\..\\\\y.safetensors"}) {
    const std::string why = refusal(
        one_model(std::string(R"("repo": "o/n", "path": "a.safetensors", "to": ")") + to + "\""));
    EXPECT_NE(why.find("models[0]: m: variants[0]: files[0]: to"), std::string::npos) << why;
  }
}

TEST(Catalogue, RefusesWhatIsNotARepositoryOrARevision) {
  for (const char* repo : {"noslash", "a/b/c", "../x", "a/..", "a b/c", "a/c?x=1", "/a"}) {
    refusal(one_model(std::string(R"("repo": ")") + repo + R"(", "path": "a.safetensors")"));
  }
  for (const char* rev : {"", "../main", "a//b", "/main", "ma in", "x?y"}) {
    refusal(one_model(std::string(R"("repo": "o/n", "revision": ")") + rev +
                      R"(", "path": "a.safetensors")"));
  }
}

TEST(Catalogue, RefusesBrokenStructure) {
  refusal("");
  refusal("[]");
  refusal(R"({"ferry_catalogue": 2, "models": []})");
  refusal(R"({"ferry_catalogue": 1})");
  refusal(R"({"ferry_catalogue": 1, "models": [], "extra": 1})");
  refusal(one_model(R"("repo": "o/n", "path": "a.safetensors", "size_hint": -1)"));
  refusal(one_model(R"("repo": "o/n", "path": "a.safetensors", "sha": "x")"));
  refusal(one_model(R"("repo": "o/n", "path": "a.exe")"));
  // A licence to confirm needs its notice, and addresses are https.
  refusal(one_model(R"("repo": "o/n", "path": "a.safetensors")",
                    R"({"id": "x", "url": "https://a", "confirm": true})"));
  refusal(
      one_model(R"("repo": "o/n", "path": "a.safetensors")", R"({"id": "x", "url": "http://a"})"));
  EXPECT_TRUE(
      parse_catalogue(R"({"ferry_catalogue": 1, "models": []})", "test.json").entries.empty());
}

// A stranger's catalogue is bounded before it is parsed: nesting deeper than the format's
// (kMaxCatalogueDepth), closed or not, and text over kMaxCatalogueBytes, which a user folder's
// file is refused for from its size, unread.
TEST(Catalogue, RefusesDeepNestingAndOversizedTextBeforeParsingIt) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(refusal(deep).find("nested too deeply"), std::string::npos);
  EXPECT_NE(refusal(std::string(100000, '{')).find("nested too deeply"), std::string::npos);
  EXPECT_NE(refusal(one_model(R"("repo": "o/n", "path": "a.safetensors", "x": )" + deep))
                .find("nested too deeply"),
            std::string::npos);
  // Brackets inside strings are text, not nesting.
  EXPECT_NE(refusal(one_model(R"("repo": "o/n", "path": "a.safetensors", "sha": ")" +
                              std::string(1000, '[') + "\""))
                .find("sha"),
            std::string::npos);
  const std::string small = R"({"ferry_catalogue": 1, "models": []})";
  const std::string padded = small + std::string(kMaxCatalogueBytes, ' ');
  EXPECT_NE(refusal(padded).find("larger than 4 MiB"), std::string::npos);

  test::ScratchDir dir;
  test::write_file(dir / "big.json", std::string_view(padded));
  std::vector<std::string> problems;
  const Catalogue c = load_catalogue(dir.path(), &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("big.json"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("larger than 4 MiB"), std::string::npos) << problems[0];
  EXPECT_NE(c.find("umt5-xxl"), nullptr);  // the built-in ones stay
}

TEST(Catalogue, AUserCatalogueAddsAndReplacesEntriesAndABrokenOneIsSkipped) {
  test::ScratchDir dir;
  test::write_file(dir / "a.json", std::string(R"({"ferry_catalogue": 1, "models": [
    {"name": "wan2.2-ti2v-5b", "title": "Pinned", "family": "wan",
     "licence": {"id": "apache-2.0", "url": "https://a.b"},
     "variants": [{"precision": "fp16", "files": [{"repo": "me/mirror", "revision": "0123abc",
                                                   "path": "w.safetensors"}]}]},
    {"name": "mine", "title": "Mine", "family": "wan",
     "licence": {"id": "apache-2.0", "url": "https://a.b"},
     "variants": [{"precision": "bf16", "files": [{"repo": "me/m", "path": "m.safetensors"}]}]}]})"));
  test::write_file(dir / "b.json", std::string_view("{broken"));
  std::vector<std::string> problems;
  const Catalogue c = load_catalogue(dir.path(), &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("b.json"), std::string::npos);
  ASSERT_NE(c.find("mine"), nullptr);
  ASSERT_NE(c.find("wan2.2-ti2v-5b"), nullptr);
  EXPECT_EQ(c.find("wan2.2-ti2v-5b")->title, "Pinned");
  EXPECT_EQ(c.find("wan2.2-ti2v-5b")->variants[0].files[0].repo, "me/mirror");
  EXPECT_NE(c.find("umt5-xxl"), nullptr);  // the built-in ones stay
}

}  // namespace
}  // namespace ferry::library
