// Remote file names made safe (core/io/safe_path.h): what a hub's answer or a shared clip may name
// and what it may not, on both platforms (the mingw lane runs these under Wine, where a name that
// slipped through would reach the Win32 path rules).
#include "core/io/safe_path.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

std::string refusal(std::string_view name) {
  try {
    const fs::path p = safe_relative_path(name);
    ADD_FAILURE() << "accepted \"" << name << "\" as " << detail::display(p);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    return e.what();
  }
  return {};
}

TEST(SafePath, KeepsTheFoldersAndNamesOfAHubListing) {
  EXPECT_EQ(safe_relative_path("model.safetensors"), fs::path("model.safetensors"));
  EXPECT_EQ(safe_relative_path("transformer/diffusion_pytorch_model-00001-of-00003.safetensors"),
            fs::path("transformer") / "diffusion_pytorch_model-00001-of-00003.safetensors");
  EXPECT_EQ(safe_relative_path("split_files\\vae\\wan_2.1_vae.safetensors"),
            fs::path("split_files") / "vae" / "wan_2.1_vae.safetensors");
  EXPECT_EQ(safe_relative_path("tokenizer/spiece.model"), fs::path("tokenizer") / "spiece.model");
  EXPECT_EQ(safe_relative_path(".gitattributes"), fs::path(".gitattributes"));
  EXPECT_EQ(safe_relative_path("console/null.safetensors"),
            fs::path("console") / "null.safetensors")
      << "a device name is the whole name before the first dot";
  EXPECT_EQ(safe_relative_path("COM10.txt"), fs::path("COM10.txt"));
  EXPECT_EQ(safe_relative_path("\xe7\x8c\xab.png"), detail::path_from_utf8("\xe7\x8c\xab.png"));
}

TEST(SafePath, RefusesEveryWayOutOfTheTargetFolder) {
  EXPECT_NE(refusal("").find("empty"), std::string::npos);
  EXPECT_NE(refusal("../x.safetensors").find(".."), std::string::npos);
  EXPECT_NE(refusal("a/../../x").find(".."), std::string::npos);
  EXPECT_NE(refusal("a\\..\\..\\x").find(".."), std::string::npos);
  EXPECT_NE(refusal("./x").find("\".\""), std::string::npos);
  EXPECT_NE(refusal("/etc/passwd").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("\\Windows\\x.dll").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("\\\\server\\share\\x").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("\\\\?\\C:\\x").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("C:\\Windows\\x.dll").find("drive"), std::string::npos);
  EXPECT_NE(refusal("C:x.dll").find("drive"), std::string::npos);
  EXPECT_NE(refusal("c:/x.dll").find("drive"), std::string::npos);
  EXPECT_NE(refusal("C:").find("drive"), std::string::npos);
  EXPECT_NE(refusal("a/C:x.dll").find("':'"), std::string::npos) << "a drive-relative component";
  EXPECT_NE(refusal("//server/share/x").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("\\\\.\\PhysicalDrive0").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("/\\server\\x").find("absolute"), std::string::npos);
  EXPECT_NE(refusal("a//b").find("empty"), std::string::npos);
  EXPECT_NE(refusal("a/").find("empty"), std::string::npos);
}

TEST(SafePath, RefusesWhatWindowsReadsAsSomethingElse) {
  EXPECT_NE(refusal("model.safetensors:evil").find("alternate data stream"), std::string::npos);
  EXPECT_NE(refusal("a/b:$DATA").find("':'"), std::string::npos);
  for (const char* device :
       {"CON", "con", "PRN", "aux", "NUL", "nul.txt", "NUL.tar.gz", "COM1", "com9.safetensors",
        "LPT1", "lpt9.bin", "COM0", "Nul .txt", "COM\xc2\xb9", "lpt\xc2\xb3.txt", "CONIN$",
        "a/CON/b", "con.safetensors.d/x"}) {
    EXPECT_NE(refusal(device).find("device name"), std::string::npos) << device;
  }
  EXPECT_NE(refusal("model.safetensors.").find("dot or a space"), std::string::npos);
  EXPECT_NE(refusal("model.safetensors ").find("dot or a space"), std::string::npos);
  EXPECT_NE(refusal("folder./x").find("dot or a space"), std::string::npos);
  for (const char* trailing : {"CON.", "nul ", "a/x.safetensors..", "dir /x", "x. "}) {
    EXPECT_NE(refusal(trailing).find("dot or a space"), std::string::npos) << trailing;
  }
  EXPECT_NE(refusal("LPT1:").find("':'"), std::string::npos);
  for (const char* forbidden : {"a<b", "a>b", "a\"b", "a|b", "a?b", "a*b"}) {
    EXPECT_NE(refusal(forbidden).find("forbids"), std::string::npos) << forbidden;
  }
}

TEST(SafePath, RefusesControlCharactersBadUtf8AndHugeNames) {
  EXPECT_NE(refusal(std::string("a\0b", 3)).find("control"), std::string::npos);
  EXPECT_NE(refusal("a\nb").find("control"), std::string::npos);
  EXPECT_NE(refusal("a\x7f").find("control"), std::string::npos);
  EXPECT_NE(refusal("\xc3\x28.png").find("UTF-8"), std::string::npos);
  EXPECT_NE(refusal("\xc0\xae\xc0\xae/x").find("UTF-8"), std::string::npos) << "overlong \"..\"";
  EXPECT_NE(refusal("\xed\xa0\x80").find("UTF-8"), std::string::npos) << "a surrogate";
  EXPECT_NE(refusal(std::string(256, 'a')).find("255"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 400; ++i) deep += "ab/";
  deep += "x";
  EXPECT_NE(refusal(deep).find("1024"), std::string::npos);
}

TEST(SafePath, AFileNameHasNoFolder) {
  EXPECT_EQ(safe_file_name("wan_2.1_vae.safetensors"), fs::path("wan_2.1_vae.safetensors"));
  EXPECT_THROW(safe_file_name("vae/x.safetensors"), Error);
  EXPECT_THROW(safe_file_name("vae\\x.safetensors"), Error);
  EXPECT_THROW(safe_file_name(".."), Error);
}

// What the rules are for: joined to a folder, an accepted name stays in it, and on Windows the
// file created is the one named (no device, no stream, no trailing dot dropped).
TEST(SafePath, AnAcceptedNameIsCreatedInsideTheTargetFolder) {
  test::ScratchDir dir;
  for (const char* name : {"a/b/model.safetensors", "x\\y.json", "\xc3\xa9t\xc3\xa9.txt"}) {
    const fs::path target = dir.path() / safe_relative_path(name);
    fs::create_directories(target.parent_path());
    test::write_file(target, std::string_view("x"));
    const fs::path canonical = fs::canonical(target);
    const fs::path root = fs::canonical(dir.path());
    EXPECT_EQ(canonical.string().rfind(root.string(), 0), 0u) << name;
    EXPECT_EQ(canonical.filename(), target.filename()) << name;
  }
}

}  // namespace
}  // namespace ferry::io
