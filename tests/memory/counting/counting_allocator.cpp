// The global operator new and delete, replaced by ones that count while counting is on (see
// counting_allocator.h). The blocks come from malloc; an aligned block remembers where its malloc
// block starts, just in front of it.
#include "tests/memory/counting/counting_allocator.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__GLIBC__)
#include <execinfo.h>
#endif

namespace {

std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::size_t> g_last_size{0};

#if defined(__GLIBC__)
// The first counted allocation's return addresses, taken inside operator new with no allocation
// (backtrace uses malloc at most, which is not counted, and is warmed up before counting starts).
constexpr int kFrames = 24;
void* g_first_site[kFrames];
std::atomic<int> g_first_site_frames{0};
std::atomic<bool> g_first_site_taken{false};
#endif

void* counted_alloc(std::size_t size, std::size_t alignment) {
  if (g_counting.load(std::memory_order_relaxed)) {
    if (g_allocations.fetch_add(1, std::memory_order_relaxed) == 0) {
#if defined(__GLIBC__)
      if (!g_first_site_taken.exchange(true)) {
        g_first_site_frames = backtrace(g_first_site, kFrames);
      }
#endif
    }
    g_last_size.store(size, std::memory_order_relaxed);
  }
  if (size == 0) size = 1;
  const std::size_t a =
      alignment < alignof(std::max_align_t) ? alignof(std::max_align_t) : alignment;
  void* raw = std::malloc(size + a + sizeof(void*));
  if (raw == nullptr) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw) + sizeof(void*);
  const std::uintptr_t aligned = (base + a - 1) / a * a;
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}

void counted_free(void* p) noexcept {
  if (p != nullptr) std::free(static_cast<void**>(p)[-1]);
}

void* must_alloc(std::size_t size, std::size_t alignment) {
  void* p = counted_alloc(size, alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

namespace ferry::test {

void start_counting_allocations() {
#if defined(__GLIBC__)
  void* warm[1];
  backtrace(warm, 1);  // its first call loads libgcc: not while counting
  g_first_site_frames = 0;
  g_first_site_taken = false;
#endif
  g_allocations = 0;
  g_counting = true;
}

std::uint64_t stop_counting_allocations() {
  g_counting = false;
  return g_allocations.load();
}

std::size_t last_counted_allocation_size() {
  return g_last_size.load();
}

std::string first_counted_allocation_site() {
  std::string out;
#if defined(__GLIBC__)
  const int frames = g_first_site_frames.load();
  if (frames == 0) return out;
  char** symbols = backtrace_symbols(g_first_site, frames);
  if (symbols == nullptr) return out;
  for (int i = 0; i < frames; ++i) out += std::string("  ") + symbols[i] + "\n";
  std::free(symbols);
#endif
  return out;
}

}  // namespace ferry::test

void* operator new(std::size_t n) {
  return must_alloc(n, 0);
}
void* operator new[](std::size_t n) {
  return must_alloc(n, 0);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return must_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return must_alloc(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_free(p);
}
