#pragma once
// The allocation count of kiln_allocation_tests: every global operator new in that
// program adds one (runtime/replay_allocation_test.cpp replaces the allocator).

#include <atomic>
#include <cstddef>

extern std::atomic<std::size_t> g_allocations;
