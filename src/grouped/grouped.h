// A grouped-GEMM handle: problem checks, the configuration choice, kernels compiled through
// the Compiler (cache, single flight, worker) and kept per configuration, TMA descriptors
// encoded through the driver, and the launch.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grouped/render.h"
#include "kjit/grouped_gemm.h"

namespace kjit {
class Compiler;
class Kernel;
struct CompileOptions;
}  // namespace kjit

namespace kjit::grouped {

struct Options {
  int tile_n = 0;  // 0 = by shape
  int stages = 0;  // 0 = by tile
  bool portable_only = false;
  int schedule = 0;  // kjit_grouped_schedule
};

// Options from the public struct (a full-size copy; NULL = defaults). Throws
// KJIT_ERROR_INVALID_ARGUMENT for values out of range.
Options options_from(const kjit_grouped_gemm_options* o);

// A checked problem.
struct Problem {
  int groups = 0, rows = 0, n = 0, k = 0;
  BOrder b_order = BOrder::KN;
  Act act = Act::None;
  long long lda = 0, ldb = 0, ldc = 0, ldd = 0, stride_b = 0, stride_bias = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr;
  const void* b = nullptr;
  const int32_t* offs = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;
};

// Checks `desc` (a full-size copy) and the pointers without a GPU and fills in the
// defaults. With `pointers` false the pointers are not looked at (kjit_grouped_gemm_prepare)
// and are taken as 256-byte aligned, C as given when beta != 0, bias as given when `bias` is
// not NULL. Throws KJIT_ERROR_INVALID_ARGUMENT or
// KJIT_ERROR_UNSUPPORTED naming the field.
Problem check(const kjit_grouped_gemm_desc& desc, const void* A, const void* B, const int32_t* offs,
              const void* C, const void* D, const void* bias, bool pointers = true);

// Whether the TMA kernel can take `p`: 16-byte aligned A and B and 16-byte multiples as
// their row and matrix strides (TMA's rules); with SwiGLU and B order KN, n/2 a multiple of
// 8 (the up half's first column is where a copy starts).
bool tma_eligible(const Problem& p);

// The configuration for `p` on a device of compute capability `cc` (e.g. 90), with
// `tma_available` telling whether the driver can encode tensor maps.
Config choose(const Problem& p, int cc, bool tma_available, const Options& o);

// The options a configuration's source is compiled with (its target, a program name).
CompileOptions compile_options(const Config& c);

class GroupedGemm {
 public:
  // `compiler` must outlive the handle. Throws KJIT_ERROR_CUDA_UNAVAILABLE without a driver
  // or the device.
  GroupedGemm(Compiler& compiler, int device, const Options& o);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  Config config_for(const Problem& p) const;
  // Compiles (or hits) and loads the kernel of `p`'s configuration.
  void prepare(const Problem& p);
  // Enqueues `p` on `stream`.
  void run(const Problem& p, void* stream);

 private:
  Kernel& kernel(const Config& c);

  Compiler& compiler_;
  int device_;
  int cc_;
  int sms_;
  bool tma_;
  Options opts_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels_;
};

}  // namespace kjit::grouped
