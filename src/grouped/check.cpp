#include "grouped/check.h"

namespace kjit::grouped {

std::string check_source() {
  // One block: each thread checks every blockDim.x-th group; the smallest bad group is
  // reduced in shared memory; one thread records it. The first call recorded since the
  // host cleared the record keeps it (atomicCAS); every bad call is counted.
  return R"(extern "C" __global__ void kjit_grouped_check_offsets(
    const int* __restrict__ offs, int G, int rows, unsigned call, unsigned* record) {
  __shared__ int first;
  if (threadIdx.x == 0) first = 0x7fffffff;
  __syncthreads();
  for (int g = threadIdx.x; g < G; g += blockDim.x) {
    const int end = offs[g];
    const int prev = g ? offs[g - 1] : 0;
    if (end < prev || end > rows) atomicMin(&first, g);
  }
  __syncthreads();
  if (threadIdx.x != 0 || first == 0x7fffffff) return;
  const int g = first;
  atomicAdd(record + 1, 1u);
  if (atomicCAS(record, 0u, 1u) != 0u) return;
  record[2] = call;
  record[3] = (unsigned)g;
  record[4] = (unsigned)offs[g];
  record[5] = (unsigned)(g ? offs[g - 1] : 0);
  record[6] = (unsigned)rows;
  __threadfence_system();
}
)";
}

std::string describe(const CheckRecord& r) {
  if (!r.recorded && !r.bad_calls) return {};
  if (!r.recorded)
    return "bad offsets in " + std::to_string(r.bad_calls) +
           " call(s) of this handle since the last read (the first one's details were still "
           "being written: read the status after the calls are complete)";
  const std::string g = std::to_string(r.group);
  const std::string at = "offs[" + g + "] = " + std::to_string(r.value);
  std::string what;
  if (r.value < r.prev) {
    what = r.group == 0 ? at + " is negative"
                        : at + " is less than offs[" + std::to_string(r.group - 1) +
                              "] = " + std::to_string(r.prev) + " (group " + g +
                              " would end before it starts)";
  } else {
    what = at + " is past rows = " + std::to_string(r.rows);
  }
  const uint32_t n = r.bad_calls ? r.bad_calls : 1;
  return "bad offsets in call " + std::to_string(r.call) + " of this handle: " + what + "; " +
         std::to_string(n) + (n == 1 ? " call" : " calls") + " had bad offsets since the last read";
}

}  // namespace kjit::grouped
