// Allocation failure at the C boundary: every check of an entry point runs inside the
// shim's exception guard, so a message that cannot be allocated gives a status
// (KJIT_ERROR_OUT_OF_MEMORY, or the check's own when it needs no memory), never an
// exception out of an extern "C" function.
//
// This program replaces the global operator new: on the thread that asks for it, the
// allocations after a given count fail with std::bad_alloc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "kjit/compile.h"
#include "kjit/kernel.h"

namespace {
thread_local long t_allocations_left = -1;  // -1: no limit
}  // namespace

// The replacement pair allocates with malloc and frees with free, which GCC cannot match.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  if (t_allocations_left == 0) throw std::bad_alloc();
  if (t_allocations_left > 0) --t_allocations_left;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

namespace {

struct Call {
  const char* name;
  kjit_status expected;  // the status with memory to spare
  std::function<kjit_status()> run;
};

// Runs `call` with 0, 1, 2, ... allocations allowed until it no longer runs out: each time
// it must return a status (its own, or out of memory), never throw.
void expect_statuses_under_allocation_failure(const Call& call) {
  for (long allowed = 0; allowed < 64; ++allowed) {
    kjit_status st = KJIT_OK;
    bool threw = false;
    t_allocations_left = allowed;
    try {
      st = call.run();
    } catch (...) {
      threw = true;
    }
    t_allocations_left = -1;
    ASSERT_FALSE(threw) << call.name << ": an exception left the C API with " << allowed
                        << " allocations allowed";
    ASSERT_TRUE(st == call.expected || st == KJIT_ERROR_OUT_OF_MEMORY)
        << call.name << " with " << allowed << " allocations allowed returned " << st;
    if (st == call.expected) {
      EXPECT_NE(std::string(kjit_last_error()), "") << call.name << ": no message";
      return;
    }
  }
  ADD_FAILURE() << call.name << " still ran out of memory with 64 allocations allowed";
}

TEST(ApiAllocation, EntryPointsReportStatusesWhenMessagesCannotBeAllocated) {
  kjit_compiler* compiler = nullptr;
  ASSERT_EQ(kjit_compiler_create(nullptr, 1, &compiler), KJIT_OK) << kjit_last_error();
  kjit_launch_config cfg;
  kjit_launch_config_init(&cfg);
  char small[4];
  char arch[32];
  size_t n = 0;
  int blocks = 0, grid = 0, block = 0;
  kjit_kernel* out = nullptr;
  const std::vector<Call> calls = {
      {"kjit_device_arch (small buffer)", KJIT_ERROR_BUFFER_TOO_SMALL,
       [&] { return kjit_device_arch(0, small, sizeof small); }},
      {"kjit_device_arch (NULL)", KJIT_ERROR_INVALID_ARGUMENT,
       [&] { return kjit_device_arch(0, nullptr, sizeof arch); }},
      {"kjit_kernel_create (negative device)", KJIT_ERROR_INVALID_ARGUMENT,
       [&] {
         return kjit_kernel_create(compiler, "__global__ void k() {}", "k", nullptr, -1, 0, &out,
                                   nullptr);
       }},
      {"kjit_kernel_create (unknown flags)", KJIT_ERROR_INVALID_ARGUMENT,
       [&] {
         return kjit_kernel_create(compiler, "__global__ void k() {}", "k", nullptr, 0, 1u << 30,
                                   &out, nullptr);
       }},
      {"kjit_kernel_param_count", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_param_count(nullptr, &n); }},
      {"kjit_kernel_param_buffer_size", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_param_buffer_size(nullptr, &n); }},
      {"kjit_kernel_set_max_dynamic_shared", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_set_max_dynamic_shared(nullptr, -1); }},
      {"kjit_kernel_occupancy", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_occupancy(nullptr, 128, 0, &blocks); }},
      {"kjit_kernel_suggest_block_size", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_suggest_block_size(nullptr, 0, &grid, &block); }},
      {"kjit_kernel_launch (no config)", KJIT_ERROR_INVALID_ARGUMENT,
       [&] { return kjit_kernel_launch(nullptr, nullptr, nullptr, 0); }},
      {"kjit_kernel_launch_packed (no kernel)", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_launch_packed(nullptr, &cfg, nullptr, 0); }},
      {"kjit_kernel_launch_sized (no kernel)", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_kernel_launch_sized(nullptr, &cfg, nullptr, nullptr, 0); }},
      {"kjit_future_cancel", KJIT_ERROR_INVALID_HANDLE,
       [&] { return kjit_future_cancel(nullptr); }},
  };
  for (const Call& c : calls) expect_statuses_under_allocation_failure(c);
  kjit_compiler_destroy(compiler);
}

}  // namespace
