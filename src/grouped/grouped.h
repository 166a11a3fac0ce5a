// A grouped-GEMM handle: problem checks, the configuration choice, kernels compiled through
// the Compiler (cache, single flight, worker) and kept per configuration, TMA descriptors
// encoded through the driver, and the launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "grouped/check.h"
#include "grouped/plan.h"
#include "grouped/render.h"
#include "kjit/grouped_gemm.h"
#include "store/outcome.h"

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
  bool check_offsets = false;
  bool autotune = false;
  int cluster_m = 0;  // 0 = by shape
  // Whether the choice is left to kjit (nothing forced): plans apply only then.
  bool automatic() const {
    return tile_n == 0 && stages == 0 && schedule == 0 && cluster_m == 0 && !portable_only;
  }
};

// Options from the public struct (a full-size copy; NULL = defaults). Throws
// KJIT_ERROR_INVALID_ARGUMENT for values out of range and for autotune with a forced
// configuration field.
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
  DType in = DType::Bf16;  // A's and B's type
  Scale scale = Scale::None;
  const float* scale_a = nullptr;  // rows fp32 (Scale::Row)
  const float* scale_b = nullptr;  // G x n fp32 (Scale::Row)
};

// The scale pointers of a call, and whether they are checked (kjit_grouped_gemm_run_scaled)
// or not looked at (kjit_grouped_gemm_check, plan keys: stand-ins when the desc asks for
// scales).
struct Scales {
  bool check = false;
  const float* a = nullptr;
  const float* b = nullptr;
};

// Checks `desc` (a full-size copy) and the pointers without a GPU and fills in the
// defaults. With `pointers` false the pointers are not looked at (kjit_grouped_gemm_prepare)
// and are taken as 256-byte aligned, C as given when beta != 0, bias as given when `bias` is
// not NULL, the scales as given when the desc asks for them. Throws
// KJIT_ERROR_INVALID_ARGUMENT or KJIT_ERROR_UNSUPPORTED naming the field.
Problem check(const kjit_grouped_gemm_desc& desc, const void* A, const void* B, const int32_t* offs,
              const void* C, const void* D, const void* bias, bool pointers = true,
              const Scales& scales = Scales());

// Whether the TMA kernel can take `p`: 16-byte aligned A and B and 16-byte multiples as
// their row and matrix strides (TMA's rules); with SwiGLU and B order KN, n/2 a multiple of
// 8 (the up half's first column is where a copy starts).
bool tma_eligible(const Problem& p);

// The configuration for `p` on a device of compute capability `cc` (e.g. 90), with
// `tma_available` telling whether the driver can encode tensor maps.
Config choose(const Problem& p, int cc, bool tma_available, const Options& o);
// Sets the store form of `c`'s epilogue (vec_store, tma_store) from its schedule, tile and
// D's alignment; choose() calls it, and so does a tuned or candidate configuration.
void choose_store(Config& c, const Problem& p);

// The options a configuration's source is compiled with (its target, a program name).
CompileOptions compile_options(const Config& c);

// Compiles (or hits) `c`'s source through `compiler` exactly as a handle does, so that a
// handle's later compile of `c` is a cache hit.
Outcome compile(Compiler& compiler, const Config& c);

// Compute capability of a target kjit_grouped_gemm_compile() accepts ("sm_90a" -> 90,
// "sm_80" -> 80). Throws KJIT_ERROR_INVALID_ARGUMENT for anything else.
int target_capability(const std::string& target);

// The configuration a handle with `o` picks by heuristic for `p` on a device of `target`
// (no plan looked up: kjit_grouped_gemm_compile()).
Config config_for_target(const Problem& p, const std::string& target, const Options& o);

class GroupedGemm {
 public:
  // `compiler` must outlive the handle. Throws KJIT_ERROR_CUDA_UNAVAILABLE without a driver
  // or the device.
  GroupedGemm(Compiler& compiler, int device, const Options& o);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // The configuration run() uses for `p`: a tuned plan of its shape class (in memory or
  // persisted in the cache) when the options leave the choice to kjit, else the heuristic's.
  Config config_for(const Problem& p);
  // Compiles (or hits) and loads the kernel of `p`'s configuration.
  void prepare(const Problem& p);
  // Enqueues `p` on `stream` (after the offset check, in check mode; after tuning, when
  // autotune is on and the shape class has no tuned plan).
  void run(const Problem& p, void* stream);
  // Reads and clears the offset record; empty when nothing was recorded. Throws
  // KJIT_ERROR_INVALID_ARGUMENT when the handle does not check offsets.
  std::string offsets_status();

  const DeviceInfo& device_info() const { return dev_; }

 private:
  // A configuration's loaded kernel and the most blocks one launch of it takes: one per SM
  // for the TMA kernel (a persistent grid), four for the portable one; a 2x1 cluster's grid
  // is the clusters the device runs at once (cuOccupancyMaxActiveClusters), two blocks each.
  struct Loaded {
    std::unique_ptr<Kernel> kernel;
    unsigned max_grid = 0;
  };
  Loaded& kernel(const Config& c);
  void launch(const Problem& p, const Config& c, const Loaded& k, void* stream);
  void check_offsets(const Problem& p, void* stream);
  // The tuned plan of `key` (memory, then the cache's named values); nullopt when none.
  std::optional<Config> tuned_plan(const PlanKey& key, const Config& heuristic);
  Config autotune(const Problem& p, const PlanKey& key, const Config& heuristic, void* stream);
  void persist(const PlanKey& key, const PersistedPlan& plan);

  Compiler& compiler_;
  int device_;
  int cc_;
  int sms_;
  bool tma_;
  Options opts_;
  DeviceInfo dev_;
  std::string validators_;
  std::mutex mu_;
  std::unordered_map<std::string, Loaded> kernels_;
  // Plans by key: the tuned configuration, or nullopt once looked up and not found.
  std::mutex plans_mu_;
  std::unordered_map<PlanKey, std::optional<Config>, PlanKeyHash> plans_;
  std::mutex tune_mu_;  // one autotuning at a time per handle
  // Offset check mode.
  std::mutex check_mu_;
  std::unique_ptr<Kernel> check_kernel_;
  unsigned long long record_ = 0;  // CUdeviceptr of a CheckRecord
  void* record_ctx_ = nullptr;     // CUcontext it was allocated in
  std::atomic<uint32_t> calls_{0};
};

}  // namespace kjit::grouped
