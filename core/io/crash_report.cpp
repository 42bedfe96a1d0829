#include "core/io/crash_report.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>

#include "core/io/detail/os_file.h"

namespace ferry::io {

namespace detail {

int crash_report_stem(char* out, long long seconds, long long pid) {
  return std::snprintf(out, 64, "crash-%lld-%lld", seconds, pid);
}

std::string terminate_reason() {
  const std::exception_ptr e = std::current_exception();
  if (!e) return "std::terminate called without an exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return std::string("an exception nobody caught: ") + x.what();
  } catch (...) {
    return "an exception nobody caught (not a std::exception)";
  }
}

}  // namespace detail

void install_process_guards(const std::filesystem::path& logs_folder) {
  detail::install_fault_guard();
  install_crash_reporter(logs_folder);
}

std::optional<std::filesystem::path> newest_crash_report(const std::filesystem::path& folder,
                                                         long long after) {
  std::optional<std::filesystem::path> newest;
  long long newest_seconds = after;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    long long seconds = 0, pid = 0;
    char tail[8] = {};
    // crash-<seconds>-<pid>.txt
    if (std::sscanf(name.c_str(), "crash-%lld-%lld.%3s", &seconds, &pid, tail) != 3 ||
        std::string(tail) != "txt") {
      continue;
    }
    if (seconds > newest_seconds) {
      newest_seconds = seconds;
      newest = entry.path();
    }
  }
  return newest;
}

}  // namespace ferry::io
