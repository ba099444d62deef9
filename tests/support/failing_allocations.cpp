// See failing_allocations.hpp.
#include "support/failing_allocations.hpp"

#include <cstdlib>
#include <new>

namespace {

// Allocations on this thread until one fails; -1: none fails.
thread_local long allocations_until_failure = -1;
thread_local bool armed_failed = false;  // the armed allocation has failed

void* allocate(std::size_t n) {
  if (allocations_until_failure >= 0 && allocations_until_failure-- == 0) {
    armed_failed = true;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void dhara::testing::fail_allocation_after(long n) {
  allocations_until_failure = n;
  armed_failed = false;
}

bool dhara::testing::armed_allocation_failed() { return armed_failed; }

// Every form a new-expression or a standard container uses, and the deletes that free them,
// so that a sanitizer's allocator sees malloc matched with free. (The aligned forms are left
// to the library, which pairs its own.)
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
