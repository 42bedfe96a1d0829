// A report when the process dies anyway. Ferry's own failures are typed errors with messages
// (architecture.md §5) and never reach this; it is for the crash that should not happen — an
// access violation, an illegal instruction, an exception nobody caught — so that the user has a
// file to send instead of a window that vanished.
//
// The report goes into `folder` (the per-user logs folder): crash-<unix time>-<pid>.txt says
// what happened (the signal or exception code and address, or the uncaught exception's
// message), Ferry's version and, where the platform gives one, a backtrace; on Windows a
// minidump (.dmp) for a debugger goes beside it. The process then ends as it would have
// without the reporter (POSIX: the same signal, default action; Windows: the exception code as
// the exit code). Writing a report allocates nothing: the folder's name is prepared when the
// reporter is installed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace ferry::io {

// Installs the handlers for the whole process and creates `folder`. A second call only changes
// the folder. Error(kIo) when the folder cannot be created.
void install_crash_reporter(const std::filesystem::path& folder);

// What the app installs at start, in one call so that its tests install the same: the guard that
// turns a fault in a copy out of a mapped model file into an I/O error (a file truncated or a
// drive lost mid-run; detail::guarded_copy), then the crash reporter for every other fault. The
// app calls it once its window knows the logs folder, after the window's first model reads have
// installed the guard already; the order does not matter (detail::install_fault_guard says why),
// inside a guarded copy the guard wins either way. Error(kIo) as install_crash_reporter.
void install_process_guards(const std::filesystem::path& logs_folder);

// The newest crash-*.txt in `folder` written after `after` (seconds since the Unix epoch), if
// any: what the app shows at its next start.
std::optional<std::filesystem::path> newest_crash_report(const std::filesystem::path& folder,
                                                         long long after);

namespace detail {
// The report's file name without extension, "crash-<seconds>-<pid>", written into `out`
// (at least 64 bytes) without allocating; returns its length.
int crash_report_stem(char* out, long long seconds, long long pid);
// Why std::terminate was called, for the terminate handlers: "an exception nobody caught: what()".
std::string terminate_reason();
}  // namespace detail

}  // namespace ferry::io
