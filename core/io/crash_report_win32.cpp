// Windows crash reports: an unhandled-exception filter that writes the report and a minidump
// (dbghelp's MiniDumpWriteDump: every thread's stack and registers, enough for a debugger with
// the matching .pdb), and a terminate handler for uncaught C++ exceptions. The filter formats
// into stack buffers and calls only Win32 functions.
#include <windows.h>

#include "core/io/crash_report.h"
// dbghelp.h after windows.h, which it needs.
#include <dbghelp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

wchar_t g_folder[4096];  // where reports go, set before any handler can run
volatile LONG g_reporting = 0;

// g_folder \ crash-<seconds>-<pid><extension>, for CreateFileW.
void report_path(wchar_t* out, std::size_t capacity, long long seconds, const wchar_t* extension) {
  char stem[64];
  detail::crash_report_stem(stem, seconds, static_cast<long long>(GetCurrentProcessId()));
  std::swprintf(out, capacity, L"%ls\\%hs%ls", g_folder, stem, extension);
}

HANDLE create(const wchar_t* path) {
  return CreateFileW(path, GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
}

void put(HANDLE file, const char* text) {
  DWORD written = 0;
  WriteFile(file, text, static_cast<DWORD>(std::strlen(text)), &written, nullptr);
}

void write_text_report(long long seconds, const char* text) {
  wchar_t path[4096 + 80];
  report_path(path, sizeof path / sizeof path[0], seconds, L".txt");
  const HANDLE file = create(path);
  if (file == INVALID_HANDLE_VALUE) return;
  put(file, text);
  CloseHandle(file);
}

LONG WINAPI on_exception(EXCEPTION_POINTERS* e) {
  if (InterlockedExchange(&g_reporting, 1) != 0) return EXCEPTION_EXECUTE_HANDLER;
  const long long seconds = static_cast<long long>(std::time(nullptr));
  const EXCEPTION_RECORD* r = e->ExceptionRecord;
  char text[512];
  int n = std::snprintf(text, sizeof text,
                        "Ferry " FERRY_VERSION " crashed: exception 0x%08lX at address %p",
                        static_cast<unsigned long>(r->ExceptionCode), r->ExceptionAddress);
  if (r->ExceptionCode == EXCEPTION_ACCESS_VIOLATION && r->NumberParameters >= 2 && n > 0) {
    const ULONG_PTR kind = r->ExceptionInformation[0];
    n += std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n), " (%s %p)",
                       kind == 0   ? "reading"
                       : kind == 1 ? "writing"
                                   : "executing",
                       reinterpret_cast<void*>(r->ExceptionInformation[1]));
  }
  if (n > 0 && static_cast<std::size_t>(n) < sizeof text - 64) {
    std::snprintf(text + n, sizeof text - static_cast<std::size_t>(n),
                  "\nA minidump with the threads' stacks is beside this file.\n");
  }
  write_text_report(seconds, text);

  wchar_t dump_path[4096 + 80];
  report_path(dump_path, sizeof dump_path / sizeof dump_path[0], seconds, L".dmp");
  const HANDLE dump = create(dump_path);
  if (dump != INVALID_HANDLE_VALUE) {
    MINIDUMP_EXCEPTION_INFORMATION info;
    info.ThreadId = GetCurrentThreadId();
    info.ExceptionPointers = e;
    info.ClientPointers = FALSE;
    MiniDumpWriteDump(GetCurrentProcess(), GetCurrentProcessId(), dump,
                      static_cast<MINIDUMP_TYPE>(MiniDumpNormal | MiniDumpWithThreadInfo), &info,
                      nullptr, nullptr);
    CloseHandle(dump);
  }
  // Ends the process with the exception's code, without the system's crash dialog: the report
  // is what the user has.
  return EXCEPTION_EXECUTE_HANDLER;
}

void on_terminate() {
  const std::string what = detail::terminate_reason();
  InterlockedExchange(&g_reporting, 1);
  write_text_report(static_cast<long long>(std::time(nullptr)),
                    ("Ferry " FERRY_VERSION " stopped: " + what + "\n").c_str());
  std::abort();
}

}  // namespace

void install_crash_reporter(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw Error(ErrorCode::kIo,
                "cannot create the logs folder " + detail::display(folder) + ": " + ec.message());
  }
  const std::wstring path = folder.wstring();
  if (path.size() >= sizeof g_folder / sizeof g_folder[0]) {
    throw Error(ErrorCode::kIo, "the logs folder's path is too long: " + detail::display(folder));
  }
  std::memcpy(g_folder, path.c_str(), (path.size() + 1) * sizeof(wchar_t));
  SetUnhandledExceptionFilter(on_exception);
  std::set_terminate(on_terminate);
}

}  // namespace ferry::io
