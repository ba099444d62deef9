// Allocations made to fail on purpose, to test what code does when memory runs out part way.
// A test binary that compiles failing_allocations.cpp has the global operator new and delete
// replaced: malloc and free, except that the allocation a thread armed fails with
// std::bad_alloc. Only binaries of such tests compile it (it replaces them for the whole
// binary).
#pragma once

namespace dhara::testing {

/// Makes this thread's allocation number `n` from now fail with std::bad_alloc (0: the next
/// one), then none after it; -1: none fails. Other threads' allocations never fail.
void fail_allocation_after(long n);

/// Whether the allocation this thread armed last (fail_allocation_after) has failed.
bool armed_allocation_failed();

}  // namespace dhara::testing
