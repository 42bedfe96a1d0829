// Crash reports (core/io/crash_report.h): a fault and an uncaught exception, each in a death
// test's child process, leave a report that says what happened and which Ferry it was (on
// Windows a minidump beside it), and the process still ends as it would have. The reporter is
// only ever installed in the child: this test binary keeps its own handlers.
#include "core/io/crash_report.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#endif

#include "tests/test_support.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFolderVariable = "FERRY_CRASH_TEST_DIR";

// The folder the child writes its report to. A death test's child on Windows is this program run
// again from the start of the test, so the parent's folder reaches it through the environment.
class CrashFolder {
 public:
  CrashFolder() {
    if (const char* inherited = std::getenv(kFolderVariable)) {
      path_ = inherited;
      return;
    }
    path_ = dir_.path();
    set(path_.string().c_str());
  }
  ~CrashFolder() { set(nullptr); }
  const fs::path& path() const { return path_; }

  std::vector<fs::path> files(const std::string& extension) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(path_)) {
      if (e.path().extension() == extension) out.push_back(e.path());
    }
    return out;
  }

 private:
  static void set(const char* value) {
#ifdef _WIN32
    _putenv_s(kFolderVariable, value != nullptr ? value : "");
#else
    if (value != nullptr) {
      setenv(kFolderVariable, value, 1);
    } else {
      unsetenv(kFolderVariable);
    }
#endif
  }
  test::ScratchDir dir_;
  fs::path path_;
};

std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#ifdef _WIN32
// How each death ends the child: the exception code as its exit code; abort()'s exit code 3.
const auto kEndedByTheFault =
    ::testing::ExitedWithCode(static_cast<int>(EXCEPTION_ACCESS_VIOLATION));
const auto kEndedByAbort = ::testing::ExitedWithCode(3);
#else
// ... killed by the signal itself.
const auto kEndedByTheFault = ::testing::KilledBySignal(SIGILL);
const auto kEndedByAbort = ::testing::KilledBySignal(SIGABRT);
#endif

[[noreturn]] void fault() {
#ifdef _WIN32
  RaiseException(EXCEPTION_ACCESS_VIOLATION, 0, 0, nullptr);
#else
  std::raise(SIGILL);  // SIGILL: the sanitizers leave it to the program
#endif
  std::abort();
}

TEST(CrashReportDeathTest, AFaultLeavesAReportAndStillEndsTheProcess) {
  const CrashFolder folder;
  EXPECT_EXIT(
      {
        install_crash_reporter(folder.path());
        fault();
      },
      kEndedByTheFault, "");
  const auto reports = folder.files(".txt");
  ASSERT_EQ(reports.size(), 1u);
  const std::string text = text_of(reports.front());
  EXPECT_EQ(text.rfind("Ferry " FERRY_VERSION " crashed: ", 0), 0u) << text;
#ifdef _WIN32
  EXPECT_NE(text.find("exception 0xC0000005"), std::string::npos) << text;
  const auto dumps = folder.files(".dmp");
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(text_of(dumps.front()).substr(0, 4), "MDMP");
#else
  EXPECT_NE(text.find("(SIGILL, illegal instruction)"), std::string::npos) << text;
#endif
  EXPECT_EQ(newest_crash_report(folder.path(), 0), reports.front());
}

TEST(CrashReportDeathTest, AnExceptionNobodyCaughtIsReportedWithItsMessage) {
  const CrashFolder folder;
  EXPECT_EXIT(
      {
        install_crash_reporter(folder.path());
        try {
          throw std::runtime_error("the engine broke");
        } catch (...) {
          std::terminate();
        }
      },
      kEndedByAbort, "");
  const auto reports = folder.files(".txt");
  ASSERT_EQ(reports.size(), 1u);
  const std::string text = text_of(reports.front());
  EXPECT_EQ(
      text.rfind("Ferry " FERRY_VERSION " stopped: an exception nobody caught: the engine broke\n",
                 0),
      0u)
      << text;
}

TEST(CrashReport, TheNewestReportAfterAGivenTimeIsFound) {
  test::ScratchDir dir;
  for (const char* name : {"crash-1700000000-12.txt", "crash-1700000500-13.txt",
                           "crash-1700000500-13.dmp", "crash-1800000000-14.log", "notes.txt"}) {
    test::write_file(dir / name, "x");
  }
  EXPECT_EQ(newest_crash_report(dir.path(), 0), dir / "crash-1700000500-13.txt");
  EXPECT_EQ(newest_crash_report(dir.path(), 1700000000), dir / "crash-1700000500-13.txt");
  EXPECT_EQ(newest_crash_report(dir.path(), 1700000500), std::nullopt);
  EXPECT_EQ(newest_crash_report(dir / "no-such-folder", 0), std::nullopt);
  char stem[64];
  EXPECT_EQ(detail::crash_report_stem(stem, 1700000500, 13), 19);
  EXPECT_EQ(std::string(stem), "crash-1700000500-13");
}

}  // namespace
}  // namespace ferry::io
