// Output files appear under their name only when complete (core/io/partial_file.h).
#include "core/io/partial_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

TEST(PartialFile, CommitRenamesThePartialFileOverTheName) {
  test::ScratchDir dir;
  test::write_file(dir / "out.bin", std::string_view("old"));
  {
    PartialFile file(dir / "out.bin");
    EXPECT_EQ(file.partial_path(), dir / "out.bin.partial");
    test::write_file(file.partial_path(), std::string_view("new"));
    // Until commit, the old file is what readers see.
    EXPECT_EQ(test::read_file(dir / "out.bin").size(), 3u);
    file.commit();
  }
  const auto bytes = test::read_file(dir / "out.bin");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "new");
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bin.partial"));
}

TEST(PartialFile, AnAbandonedFileLeavesNothing) {
  test::ScratchDir dir;
  {
    PartialFile file(dir / "out.bin");
    test::write_file(file.partial_path(), std::string_view("half"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(PartialFile, WriteFileAtomicallyWritesTheBytes) {
  test::ScratchDir dir;
  const auto bytes = test::pattern_bytes(100000, 7);
  write_file_atomically(dir / "data.bin", bytes);
  EXPECT_EQ(test::read_file(dir / "data.bin"), bytes);
  EXPECT_FALSE(std::filesystem::exists(dir / "data.bin.partial"));
}

TEST(PartialFile, AFailedWriteIsAnIoErrorAndLeavesNothing) {
  test::ScratchDir dir;
  // The partial name is taken by a folder: the file cannot be created.
  std::filesystem::create_directory(dir / "data.bin.partial");
  EXPECT_EQ(test::error_code_of(
                [&] { write_file_atomically(dir / "data.bin", test::pattern_bytes(10)); }),
            ErrorCode::kIo);
  EXPECT_FALSE(std::filesystem::exists(dir / "data.bin"));
}

}  // namespace
}  // namespace ferry::io
