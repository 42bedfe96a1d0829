// What the benchmarks share: reading their options, the scratch file they write and remove,
// timing, and main()'s error boundary.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"

namespace ferry::bench {

using Clock = std::chrono::steady_clock;

// Seconds from `start` to now.
double seconds_since(Clock::time_point start);

// The middle value (the mean of the two middle ones for an even count).
double median(std::vector<double> values);

// A benchmark's command line, one option at a time:
//   ferry::bench::Args args(argc, argv, print_usage);
//   while (args.next()) {
//     if (args.option() == "--file") { o.file = args.value(); } else if ... else args.unknown();
//   }
//   if (args.help_asked()) return std::nullopt;
// --help or -h prints the usage and ends the options: there is nothing to run. A missing value
// and an unknown option throw Error(kBadArgument) naming the option.
class Args {
 public:
  Args(int argc, char** argv, void (*print_usage)())
      : argc_(argc), argv_(argv), print_usage_(print_usage) {}

  // Steps to the next option; false past the last, and at --help or -h.
  bool next();
  std::string_view option() const { return argv_[i_]; }
  // The word after the option, which it takes: the next step goes past it.
  const char* value();
  [[noreturn]] void unknown() const;
  bool help_asked() const { return help_asked_; }

 private:
  int argc_;
  char** argv_;
  void (*print_usage_)();
  int i_ = 0;
  bool help_asked_ = false;
};

// Creates the folder `path` goes in, when it names one.
void create_parent_directories(const std::filesystem::path& path);

// Where one tensor's random values lie: uniform in [bias - scale, bias + scale].
struct RandomRange {
  float scale = 0;
  float bias = 0;
};

// A synthetic checkpoint of `specs` (each in a 16-bit float dtype or F32) with random values of a
// plausible size, so that activations stay finite and a NaN or a denormal never times something
// else than the real model. `range` says where each tensor's values lie. The values come from a
// fixed table (a prime length, so rows do not repeat it in step): the same file on every run.
void write_random_checkpoint(const std::filesystem::path& path,
                             const std::vector<io::TensorSpec>& specs,
                             const std::function<RandomRange(const io::TensorSpec&)>& range);

// A file the benchmark wrote for itself (a synthetic checkpoint, a file to read), removed when
// this dies unless kept (--keep, or a file found in place), so that a run an error cuts short
// leaves no gigabytes behind. A failed removal is not an error.
class ScratchFile {
 public:
  enum class Report { kSilent, kPrinted };  // kPrinted: "removed PATH" on stdout

  ScratchFile(std::filesystem::path path, bool keep, Report report = Report::kSilent)
      : path_(std::move(path)), keep_(keep), report_(report) {}
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

 private:
  std::filesystem::path path_;
  bool keep_;
  Report report_;
};

// main()'s boundary: runs `body` and returns its exit code; a ferry::Error becomes
// "NAME: message" on stderr and the error's exit code.
int report_errors(const char* name, const std::function<int()>& body);

}  // namespace ferry::bench
