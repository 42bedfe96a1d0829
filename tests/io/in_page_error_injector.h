// An EXCEPTION_IN_PAGE_ERROR made on demand, for the tests of the guard behind MappedView::copy_to
// (win32_os_file_test.cpp) and of the guard with the crash reporter (crash_report_test.cpp).
#pragma once

#ifdef _WIN32

#include <windows.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::test {

// Windows raises EXCEPTION_IN_PAGE_ERROR when a view's page cannot be read in (network share
// gone, disk removed). Neither can be staged in a test, and Wine never raises it at all (a lost
// page faults as an access violation there). So the fault is real but its kind is translated: a
// page of the view is made PAGE_NOACCESS, and a vectored handler ahead of ours rewrites the
// resulting access violation into the in-page error Windows would deliver, with the same
// parameters (read, address, NTSTATUS). Everything after that — the guard's handler, resuming
// the copy's saved context, copy_to's error — is the production path.
class InPageErrorInjector {
 public:
  InPageErrorInjector(const void* page, std::size_t length) {
    begin_ = reinterpret_cast<std::uintptr_t>(page);
    end_ = begin_ + length;
    DWORD old = 0;
    ok_ = VirtualProtect(const_cast<void*>(page), length, PAGE_NOACCESS, &old) != 0;
    page_ = const_cast<void*>(page);
    length_ = length;
    translated_ = 0;
    handler_ = AddVectoredExceptionHandler(1, &InPageErrorInjector::translate);
  }
  ~InPageErrorInjector() {
    RemoveVectoredExceptionHandler(handler_);
    DWORD old = 0;
    VirtualProtect(page_, length_, PAGE_READONLY, &old);
  }
  bool ok() const { return ok_ && handler_ != nullptr; }
  int translated() const { return translated_; }

 private:
  static LONG CALLBACK translate(EXCEPTION_POINTERS* pointers) {
    EXCEPTION_RECORD* record = pointers->ExceptionRecord;
    if (record->ExceptionCode == EXCEPTION_ACCESS_VIOLATION && record->NumberParameters >= 2 &&
        record->ExceptionInformation[1] >= begin_ && record->ExceptionInformation[1] < end_) {
      record->ExceptionCode = EXCEPTION_IN_PAGE_ERROR;
      record->NumberParameters = 3;
      record->ExceptionInformation[2] =
          static_cast<ULONG_PTR>(0xC000009DL);  // device not connected
      ++translated_;
    }
    return EXCEPTION_CONTINUE_SEARCH;
  }

  static inline std::uintptr_t begin_ = 0;
  static inline std::uintptr_t end_ = 0;
  static inline std::atomic<int> translated_{0};
  void* page_ = nullptr;
  std::size_t length_ = 0;
  bool ok_ = false;
  void* handler_ = nullptr;
};

}  // namespace ferry::test

#endif  // _WIN32
