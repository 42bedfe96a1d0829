// Crash reports (core/io/crash_report.h): a fault and an uncaught exception, each in a death
// test's child process, leave a report that says what happened and which Ferry it was (on
// Windows a minidump beside it), and the process still ends as it would have. With the guard
// for copies out of mapped model files installed too, in the app's start-up order and in the
// other, a model file that loses its pages mid-copy is an I/O error, not a crash, and a fault
// outside a guarded copy is still reported. The reporter is only ever installed in the child:
// this test binary keeps its own handlers.
#include "core/io/crash_report.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#endif

#include "core/error.h"
#include "core/io/mapped_file.h"
#include "tests/io/in_page_error_injector.h"
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
    path_ = dir_.emplace().path();
    set(path_.string().c_str());
  }
  ~CrashFolder() {
    if (dir_) set(nullptr);
  }
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
  std::optional<test::ScratchDir> dir_;  // the parent's; a child made no folder of its own
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

// ---- the crash reporter with the guard for copies out of mapped model files ----

// How the children below end: exit codes, so that a failing test says what happened instead.
enum Outcome : int {
  kIoError = 0,           // every copy over the lost pages threw Error(kIo): the behaviour wanted
  kCopied = 10,           // a copy over lost pages succeeded
  kOtherError = 11,       // it threw another error
  kCannotLosePages = 12,  // the test could not take the pages away
};

enum class Order {
  kAppStart,       // the app's: the window's first reads install the guard, then
                   // install_process_guards (gui/main.cpp)
  kReporterFirst,  // the crash reporter alone first, the guard at the first read after it
};

// A model file of 16 granules mapped whole, read once in `order` with the handlers installed,
// whose pages past the first two are then lost: truncated on POSIX; on Windows, which refuses to
// shrink a mapped file, made to fail as a lost drive does (an in-page error, as in
// win32_os_file_test.cpp).
class ModelLosingPages {
 public:
  ModelLosingPages(const fs::path& folder, Order order)
      : path_(folder / "model.safetensors"),
        granule_(MappedFile::granularity()),
        file_(written_and_opened(path_, 16 * granule_)),
        view_(file_.map(0, 16 * granule_)),
        out_(16 * granule_) {
    if (order == Order::kAppStart) {
      view_.copy_to(0, out_);
      install_process_guards(folder);
    } else {
      install_crash_reporter(folder);
      view_.copy_to(0, out_);
    }
    std::string refused;
    lost_ = test::resize_file(path_, 2 * granule_, &refused);
#ifdef _WIN32
    if (!lost_) {
      injector_.emplace(view_.bytes().data() + 2 * granule_, 14 * granule_);
      lost_ = injector_->ok();
    }
#endif
  }

  static MappedFile written_and_opened(const fs::path& path, std::size_t bytes) {
    test::write_file(path, test::pattern_bytes(bytes));
    return MappedFile::open(path);
  }

  // Copies the whole view twice (the guard must take the second fault too).
  Outcome copy_twice() {
    if (!lost_) return kCannotLosePages;
    for (int i = 0; i < 2; ++i) {
      try {
        view_.copy_to(0, out_);
        return kCopied;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kIo) return kOtherError;
      }
    }
    return kIoError;
  }

  // Reads a lost byte directly, outside any guarded copy, as a bug would.
  Outcome touch_a_lost_page() {
    if (!lost_) return kCannotLosePages;
    volatile std::byte b = view_.bytes()[5 * granule_];
    (void)b;
    return kCopied;
  }

 private:
  fs::path path_;
  std::size_t granule_;
  MappedFile file_;
  MappedView view_;
  std::vector<std::byte> out_;
  bool lost_ = false;
#ifdef _WIN32
  std::optional<test::InPageErrorInjector> injector_;
#endif
};

// Death tests here run in a fresh process ("threadsafe": the child runs this test alone from its
// start), so that nothing was installed before the order under test.
class FreshChildProcess {
 public:
  FreshChildProcess() : saved_(GTEST_FLAG_GET(death_test_style)) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
  ~FreshChildProcess() { GTEST_FLAG_SET(death_test_style, saved_); }

 private:
  std::string saved_;
};

void expect_lost_pages_are_an_io_error(Order order) {
  const FreshChildProcess fresh;
  const CrashFolder folder;
  EXPECT_EXIT(std::exit(ModelLosingPages(folder.path(), order).copy_twice()),
              ::testing::ExitedWithCode(kIoError), "");
  EXPECT_TRUE(folder.files(".txt").empty()) << "a report was written";
}

TEST(CrashReportDeathTest, AModelFileLosingItsPagesMidCopyIsAnIoErrorInTheAppsStartUpOrder) {
  expect_lost_pages_are_an_io_error(Order::kAppStart);
}

TEST(CrashReportDeathTest, AModelFileLosingItsPagesMidCopyIsAnIoErrorWithTheReporterFirst) {
  expect_lost_pages_are_an_io_error(Order::kReporterFirst);
}

#ifdef _WIN32
const auto kEndedByALostPage = ::testing::ExitedWithCode(static_cast<int>(EXCEPTION_IN_PAGE_ERROR));
constexpr const char* kLostPageReport = "exception 0xC0000006";
#else
const auto kEndedByALostPage = ::testing::KilledBySignal(SIGBUS);
constexpr const char* kLostPageReport = "(SIGBUS, bus error)";
#endif

// The guard takes only its copies' faults: the same lost page read outside one still ends the
// process with a report, whichever handler came first.
void expect_a_lost_page_outside_a_copy_is_reported(Order order) {
  const FreshChildProcess fresh;
  const CrashFolder folder;
  EXPECT_EXIT(std::exit(ModelLosingPages(folder.path(), order).touch_a_lost_page()),
              kEndedByALostPage, "");
  const auto reports = folder.files(".txt");
  ASSERT_EQ(reports.size(), 1u);
  const std::string text = text_of(reports.front());
  EXPECT_NE(text.find(kLostPageReport), std::string::npos) << text;
}

TEST(CrashReportDeathTest, ALostPageReadOutsideACopyIsReportedInTheAppsStartUpOrder) {
  expect_a_lost_page_outside_a_copy_is_reported(Order::kAppStart);
}

TEST(CrashReportDeathTest, ALostPageReadOutsideACopyIsReportedWithTheReporterFirst) {
  expect_a_lost_page_outside_a_copy_is_reported(Order::kReporterFirst);
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
