// The device-side offset check (kjit_grouped_gemm_options.check_offsets): a small kernel,
// rendered here and compiled through the Compiler like the GEMM kernels, that finds the
// first group of a call whose end offset decreases or passes the row count and records it
// in a status record in device memory; and the host's reading of that record.
#pragma once

#include <cstdint>
#include <string>

namespace kjit::grouped {

constexpr const char* kCheckKernelName = "kjit_grouped_check_offsets";
constexpr unsigned kCheckThreads = 256;

// Source of the check kernel. Parameters: (const int* offs, int G, int rows, unsigned
// call, unsigned* record). Plain CUDA for any target from sm_70 on; reads no file.
std::string check_source();

// The record as the kernel writes it (8 words of device memory, zero = nothing recorded).
struct CheckRecord {
  uint32_t recorded = 0;   // 1 once a call with bad offsets was recorded
  uint32_t bad_calls = 0;  // calls with bad offsets since the record was cleared
  uint32_t call = 0;       // the first such call's number
  int32_t group = 0;       // its first bad group
  int32_t value = 0;       // offs[group]
  int32_t prev = 0;        // offs[group - 1], 0 for group 0
  int32_t rows = 0;        // the call's rows
  uint32_t unused = 0;
};
static_assert(sizeof(CheckRecord) == 32, "eight 32-bit words");

// "bad offsets in call 3 of this handle: offs[2] = 40 is less than offs[1] = 50 (group 2
// would end before it starts); 1 call had bad offsets since the last read". Empty when
// nothing is recorded.
std::string describe(const CheckRecord& r);

}  // namespace kjit::grouped
