// A GEMM handle: cuBLASLt on one device, a two-tier plan cache (memory LRU over the cache
// database), per-stream workspaces and optional autotuning.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "blas/lt.h"
#include "blas/plan.h"
#include "kjit/gemm.h"

namespace kjit {
class Cache;
}

namespace kjit::blas {

struct GemmOptions {
  uint32_t plan_capacity = 64;
  bool autotune = false;
  uint32_t autotune_candidates = 8;
  uint32_t autotune_warmup = 2;
  uint32_t autotune_reps = 7;
  uint64_t max_workspace = 32ull << 20;
};

// Options from the public struct (NULL = defaults): a full-size struct, as the C shim
// copies it (struct_size is not looked at). Throws KJIT_ERROR_INVALID_ARGUMENT.
GemmOptions options_from(const kjit_gemm_options* opts);

// Counters of a handle (the C shim turns them into kjit_gemm_stats).
struct GemmStats {
  uint64_t runs = 0, memory_hits = 0, disk_hits = 0, misses = 0, heuristic_queries = 0;
  uint64_t autotunes = 0, disk_rejected = 0, disk_writes = 0, evictions = 0, plans = 0;
  uint64_t workspace_bytes = 0;
};

// Device facts a plan depends on. Loads the driver (KJIT_ERROR_CUDA_UNAVAILABLE) and
// then cuBLASLt (KJIT_ERROR_CUBLAS).
DeviceInfo query_device(int ordinal);

class Gemm {
 public:
  // `cache` may be null (memory tier only); it must outlive the handle.
  Gemm(Cache* cache, int device, const GemmOptions& opts);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueue one GEMM on `stream` (a CUstream of the device's primary context; a stream
  // of another context is KJIT_ERROR_INVALID_ARGUMENT). KJIT_ERROR_STALE_HANDLE once the
  // primary context was reset: the workspaces and cuBLASLt state went with it.
  void run(const Problem& p, void* stream);
  void clear_plans();
  GemmStats stats() const;

  const DeviceInfo& device() const { return dev_; }
  CUcontext context() const { return ctx_; }
  // For tests: the device memory held for workspaces now.
  std::vector<CUdeviceptr> workspace_pointers() const;
  const GemmOptions& options() const { return opts_; }
  const std::string& plan_validators() const { return validators_; }
  PlanKey key_for(const Problem& p) const { return make_key(p, dev_, opts_.max_workspace); }

 private:
  struct Plan;
  struct Workspace;
  using PlanPtr = std::shared_ptr<Plan>;
  using Heuristics = std::vector<cublasLtMatmulHeuristicResult_t>;

  PlanPtr get_plan(const Problem& p, const PlanKey& key, CUstream stream);
  PlanPtr build_plan(const Problem& p) const;
  PlanPtr load_persisted(const Problem& p, const PlanKey& key, const std::string& pkey,
                         bool* retune);
  void persist(const PlanKey& key, const std::string& pkey, const Plan& plan);
  Heuristics heuristic(const Problem& p, const Plan& plan, int count);
  size_t autotune(const Problem& p, const Plan& plan, const Heuristics& cands, CUstream stream);
  void insert(const PlanKey& key, const PlanPtr& plan);
  // True while the primary context is the one the handle was created in.
  bool context_alive() const;
  void check_stream(CUstream stream) const;
  std::shared_ptr<Workspace> workspace_for(CUstream stream);
  void grow(Workspace& ws, size_t need, CUstream stream);
  cublasStatus_t matmul(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Problem& p,
                        const void* c, void* d, void* ws, size_t ws_size, CUstream stream) const;

  Cache* cache_;
  int ordinal_;
  GemmOptions opts_;
  DeviceInfo dev_;
  std::string validators_;
  CUcontext ctx_ = nullptr;
  unsigned long long ctx_id_ = 0;  // the primary context's id when the handle was made
  cublasLtHandle_t handle_ = nullptr;

  mutable std::mutex plans_mu_;
  std::list<std::pair<PlanKey, PlanPtr>> lru_;  // front = most recent
  std::unordered_map<PlanKey, std::list<std::pair<PlanKey, PlanPtr>>::iterator, PlanKeyHash>
      index_;

  mutable std::mutex ws_mu_;
  std::unordered_map<unsigned long long, std::shared_ptr<Workspace>> workspaces_;
  uint64_t ws_tick_ = 0;

  std::atomic<uint64_t> runs_{0}, memory_hits_{0}, disk_hits_{0}, misses_{0}, queries_{0},
      autotunes_{0}, disk_rejected_{0}, disk_writes_{0}, evictions_{0}, ws_bytes_{0};
};

}  // namespace kjit::blas
