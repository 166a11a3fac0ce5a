#include "blas/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "store/cache.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit::blas {

// ---- cuBLASLt descriptors ------------------------------------------------------------

struct Gemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool tuned = false;
  double tuned_us = 0;
  // Pointers cuBLASLt takes as descriptor attributes (bias, fp8 scales) are set on each
  // run; the lock keeps two threads' runs of one plan from mixing them.
  bool per_call_attributes = false;
  std::mutex mu;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (!lt_loaded()) return;
    const Lt& l = lt();
    if (d) l.cublasLtMatrixLayoutDestroy(d);
    if (c) l.cublasLtMatrixLayoutDestroy(c);
    if (b) l.cublasLtMatrixLayoutDestroy(b);
    if (a) l.cublasLtMatrixLayoutDestroy(a);
    if (op) l.cublasLtMatmulDescDestroy(op);
  }
};

struct Gemm::Workspace {
  std::mutex mu;  // held while the workspace is grown and while a run is enqueued with it
  CUdeviceptr ptr = 0;
  size_t size = 0;
  uint64_t last_use = 0;  // guarded by Gemm::ws_mu_
  bool retired = false;   // evicted from the map; users fetch a new one
};

namespace {

cudaDataType_t cuda_type(int32_t t) {
  switch (t) {
    case KJIT_GEMM_F32:
      return CUDA_R_32F;
    case KJIT_GEMM_F16:
      return CUDA_R_16F;
    case KJIT_GEMM_BF16:
      return CUDA_R_16BF;
    case KJIT_GEMM_F8_E4M3:
      return CUDA_R_8F_E4M3;
    case KJIT_GEMM_F8_E5M2:
      return CUDA_R_8F_E5M2;
    case KJIT_GEMM_F64:
      return CUDA_R_64F;
    default:
      fail(KJIT_ERROR_INTERNAL, "gemm: unknown dtype " + std::to_string(t));
  }
}

cublasComputeType_t compute_type(int32_t c) {
  switch (c) {
    case KJIT_GEMM_COMPUTE_F32:
      return CUBLAS_COMPUTE_32F;
    case KJIT_GEMM_COMPUTE_TF32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case KJIT_GEMM_COMPUTE_F16:
      return CUBLAS_COMPUTE_16F;
    case KJIT_GEMM_COMPUTE_F64:
      return CUBLAS_COMPUTE_64F;
    case KJIT_GEMM_COMPUTE_F32_FAST_F16:
      return CUBLAS_COMPUTE_32F_FAST_16F;
    case KJIT_GEMM_COMPUTE_F32_FAST_BF16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    default:
      fail(KJIT_ERROR_INTERNAL, "gemm: unknown compute type " + std::to_string(c));
  }
}

cudaDataType_t scale_type(int32_t c) {
  if (c == KJIT_GEMM_COMPUTE_F64) return CUDA_R_64F;
  if (c == KJIT_GEMM_COMPUTE_F16) return CUDA_R_16F;
  return CUDA_R_32F;
}

uint32_t lt_epilogue(int32_t e) {
  switch (e) {
    case KJIT_GEMM_EPILOGUE_BIAS:
      return CUBLASLT_EPILOGUE_BIAS;
    case KJIT_GEMM_EPILOGUE_RELU:
      return CUBLASLT_EPILOGUE_RELU;
    case KJIT_GEMM_EPILOGUE_RELU_BIAS:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case KJIT_GEMM_EPILOGUE_GELU:
      return CUBLASLT_EPILOGUE_GELU;
    case KJIT_GEMM_EPILOGUE_GELU_BIAS:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// IEEE binary16 from a double, rounding to nearest even (for COMPUTE_F16 alpha/beta).
uint16_t to_half(double value) {
  const float f = static_cast<float>(value);
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {                                  // subnormal or zero
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);
    if (shift > 24) return uint16_t(sign);
    const uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    const uint32_t r = half + ((rem > mid || (rem == mid && (half & 1u))) ? 1u : 0u);
    return uint16_t(sign | r);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

// alpha/beta in the scale type.
struct Scalar {
  union {
    double d;
    float f;
    uint16_t h;
  } v{};
  Scalar(double x, int32_t compute) {
    if (compute == KJIT_GEMM_COMPUTE_F64)
      v.d = x;
    else if (compute == KJIT_GEMM_COMPUTE_F16)
      v.h = to_half(x);
    else
      v.f = static_cast<float>(x);
  }
  const void* ptr() const { return &v; }
};

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
              const char* what) {
  lt_check(lt().cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value), what);
}

template <typename T>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& value,
                const char* what) {
  lt_check(lt().cublasLtMatrixLayoutSetAttribute(l, attr, &value, sizeof value), what);
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
              const T& value, const char* what) {
  lt_check(lt().cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof value), what);
}

void set_pointers(cublasLtMatmulDesc_t op, const Problem& p) {
  if (epilogue_has_bias(p.epilogue))
    set_desc(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias, "setting the bias pointer");
  if (is_fp8(p.a_type))
    set_desc(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.a_scale, "setting A's scale");
  if (is_fp8(p.b_type))
    set_desc(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.b_scale, "setting B's scale");
  if (is_fp8(p.d_type))
    set_desc(op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p.d_scale, "setting D's scale");
}

cublasLtMatrixLayout_t make_layout(int32_t type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride, const char* what) {
  cublasLtMatrixLayout_t l = nullptr;
  lt_check(lt().cublasLtMatrixLayoutCreate(&l, cuda_type(type), uint64_t(rows), uint64_t(cols), ld),
           what);
  if (batch > 1) {
    try {
      set_layout(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t(batch), what);
      set_layout(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride, what);
    } catch (...) {
      lt().cublasLtMatrixLayoutDestroy(l);
      throw;
    }
  }
  return l;
}

AlgoConfig decode_config(const cublasLtMatmulAlgo_t& algo) {
  AlgoConfig c;
  const Lt& l = lt();
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t size) {
    size_t written = 0;
    if (l.cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, buf, size, &written) !=
        CUBLAS_STATUS_SUCCESS)
      std::memset(buf, 0, size);
  };
  uint16_t inner = 0, cluster = 0;
  get(CUBLASLT_ALGO_CONFIG_ID, &c.algo_id, sizeof c.algo_id);
  get(CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof c.tile);
  get(CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof c.stages);
  get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.split_k, sizeof c.split_k);
  get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction, sizeof c.reduction);
  get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle, sizeof c.swizzle);
  get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom, sizeof c.custom);
  get(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner);
  get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster);
  c.inner_shape = inner;
  c.cluster_shape = cluster;
  return c;
}

std::string config_text(const AlgoConfig& c, uint64_t workspace) {
  return "algo " + std::to_string(c.algo_id) + " tile " + std::to_string(c.tile) + " stages " +
         std::to_string(c.stages) + " splitK " + std::to_string(c.split_k) + " reduction " +
         std::to_string(c.reduction) + " swizzle " + std::to_string(c.swizzle) + " custom " +
         std::to_string(c.custom) + " cluster " + std::to_string(c.cluster_shape) + " workspace " +
         std::to_string(workspace);
}

// Streams are told apart by id (cuStreamGetId, CUDA 12.0+), not address, so a new stream
// at a destroyed stream's address never shares a workspace with work the old one left in
// flight. Without cuStreamGetId the address is used.
unsigned long long stream_key(CUstream s) {
  if (const auto fn = cuda::driver().cuStreamGetId) {
    unsigned long long id = 0;
    const CUresult r = fn(s, &id);
    if (r == CUDA_SUCCESS) return id;
    if (s != nullptr && s != CU_STREAM_LEGACY) cuda::throw_error(r, "cuStreamGetId (stream)");
  }
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(s)) | (1ull << 63);
}

constexpr size_t kMaxStreams = 32;

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (bytes) cuda::check(cuda::driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc (gemm scratch)");
  }
  ~DeviceBuffer() {
    if (ptr_) cuda::driver().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return reinterpret_cast<void*>(ptr_); }

 private:
  CUdeviceptr ptr_ = 0;
};

class Events {
 public:
  explicit Events(size_t n) : ev_(n, nullptr) {
    for (auto& e : ev_)
      cuda::check(cuda::driver().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~Events() {
    for (auto e : ev_)
      if (e) cuda::driver().cuEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent operator[](size_t i) const { return ev_[i]; }

 private:
  std::vector<CUevent> ev_;
};

}  // namespace

// ---- options and device ----------------------------------------------------------------

GemmOptions options_from(const kjit_gemm_options* o) {
  GemmOptions g;
  if (!o) return g;
  if (o->plan_capacity) g.plan_capacity = o->plan_capacity;
  g.autotune = o->autotune != 0;
  if (o->autotune_candidates) g.autotune_candidates = o->autotune_candidates;
  if (o->autotune_warmup) g.autotune_warmup = o->autotune_warmup;
  if (o->autotune_reps) g.autotune_reps = o->autotune_reps;
  if (o->max_workspace_bytes) g.max_workspace = o->max_workspace_bytes;
  if (g.autotune_candidates > 64)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "options->autotune_candidates must be <= 64 (got " +
                                          std::to_string(g.autotune_candidates) + ")");
  if (g.autotune_reps > 1000 || g.autotune_warmup > 1000)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "options->autotune_reps and autotune_warmup must be <= 1000");
  if (g.max_workspace > (uint64_t(1) << 40))
    fail(KJIT_ERROR_INVALID_ARGUMENT, "options->max_workspace_bytes is too large");
  return g;
}

DeviceInfo query_device(int ordinal) {
  DeviceInfo d;
  d.ordinal = ordinal;
  cuda::device_handle(ordinal);  // driver and ordinal first: KJIT_ERROR_CUDA_UNAVAILABLE
  const int cc = cuda::compute_capability(ordinal);
  d.cc_major = cc / 10;
  d.cc_minor = cc % 10;
  d.sm_count = cuda::device_attribute(ordinal, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.name = cuda::device_name(ordinal);
  d.driver_version = cuda::driver_version();
  d.lt_version = lt().version;
  return d;
}

// ---- the handle ----------------------------------------------------------------------

Gemm::Gemm(Cache* cache, int device, const GemmOptions& opts)
    : cache_(cache), ordinal_(device), opts_(opts), dev_(query_device(device)) {
  validators_ = blas::validators(dev_);
  ctx_ = cuda::primary_context(device);
  if (!cuda::context_id(ctx_, &ctx_id_))
    fail(KJIT_ERROR_CUDA,
         "the primary context of device " + std::to_string(device) + " has no id after retain");
  cuda::ScopedContext scope(ctx_);
  lt_check(lt().cublasLtCreate(&handle_), "cublasLtCreate");
}

Gemm::~Gemm() {
  if (!context_alive()) {
    // cuDevicePrimaryCtxReset freed the workspaces with the context, and the addresses
    // may belong to new allocations by now: free nothing. The cuBLASLt handle is left
    // as it is (its state lived in the old context).
    log_debug("gemm handle of device " + std::to_string(ordinal_) +
              " destroyed after its primary context was reset; nothing left to free");
    return;
  }
  try {
    cuda::ScopedContext scope(ctx_);
    const auto& drv = cuda::driver();
    bool any = false;
    for (auto& kv : workspaces_) any = any || kv.second->ptr != 0;
    if (any) drv.cuCtxSynchronize();  // the GEMMs enqueued with these workspaces
    for (auto& kv : workspaces_)
      if (kv.second->ptr) drv.cuMemFree(kv.second->ptr);
    workspaces_.clear();
    lru_.clear();
    index_.clear();
    if (handle_) lt().cublasLtDestroy(handle_);
  } catch (const std::exception& e) {
    // The driver may already be shutting down at process exit; nothing else to do.
    log_debug(std::string("gemm handle teardown: ") + e.what());
  }
}

void Gemm::clear_plans() {
  std::lock_guard<std::mutex> lock(plans_mu_);
  lru_.clear();
  index_.clear();
}

GemmStats Gemm::stats() const {
  GemmStats s;
  s.runs = runs_.load();
  s.memory_hits = memory_hits_.load();
  s.disk_hits = disk_hits_.load();
  s.misses = misses_.load();
  s.heuristic_queries = queries_.load();
  s.autotunes = autotunes_.load();
  s.disk_rejected = disk_rejected_.load();
  s.disk_writes = disk_writes_.load();
  s.evictions = evictions_.load();
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    s.plans = lru_.size();
  }
  s.workspace_bytes = ws_bytes_.load();
  return s;
}

Gemm::PlanPtr Gemm::build_plan(const Problem& p) const {
  const Lt& l = lt();
  auto plan = std::make_shared<Plan>();
  lt_check(l.cublasLtMatmulDescCreate(&plan->op, compute_type(p.compute), scale_type(p.compute)),
           "cublasLtMatmulDescCreate");
  const auto op = [](int32_t t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op(p.op_a), "setting op(A)");
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op(p.op_b), "setting op(B)");
  if (p.epilogue != KJIT_GEMM_EPILOGUE_NONE)
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(p.epilogue),
             "setting the epilogue");
  if (epilogue_has_bias(p.epilogue)) {
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(cuda_type(p.bias_type)),
             "setting the bias type");
    if (p.batch > 1)
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, p.stride_bias,
               "setting the bias batch stride");
  }
  plan->per_call_attributes =
      epilogue_has_bias(p.epilogue) || is_fp8(p.a_type) || is_fp8(p.b_type) || is_fp8(p.d_type);
  set_pointers(plan->op, p);
  plan->a = make_layout(p.a_type, p.op_a ? p.k : p.m, p.op_a ? p.m : p.k, p.lda, p.batch,
                        p.stride_a, "layout of A");
  plan->b = make_layout(p.b_type, p.op_b ? p.n : p.k, p.op_b ? p.k : p.n, p.ldb, p.batch,
                        p.stride_b, "layout of B");
  plan->c = make_layout(p.c_type, p.m, p.n, p.ldc, p.batch, p.stride_c, "layout of C");
  plan->d = make_layout(p.d_type, p.m, p.n, p.ldd, p.batch, p.stride_d, "layout of D");
  return plan;
}

Gemm::Heuristics Gemm::heuristic(const Problem& p, const Plan& plan, int count) {
  const Lt& l = lt();
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(l.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { lt().cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(opts_.max_workspace),
           "setting the workspace cap");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, pointer_alignment(p.a), "alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, pointer_alignment(p.b), "alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, pointer_alignment(p.c), "alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, pointer_alignment(p.d), "alignment");

  Heuristics results(static_cast<size_t>(count));
  int got = 0;
  queries_.fetch_add(1, std::memory_order_relaxed);
  const cublasStatus_t s = l.cublasLtMatmulAlgoGetHeuristic(
      handle_, plan.op, plan.a, plan.b, plan.c, plan.d, pref, count, results.data(), &got);
  if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
    lt_throw(s, "cublasLtMatmulAlgoGetHeuristic (" + describe(p) + ")");
  results.resize(size_t(std::max(got, 0)));
  results.erase(std::remove_if(results.begin(), results.end(),
                               [&](const cublasLtMatmulHeuristicResult_t& r) {
                                 return r.state != CUBLAS_STATUS_SUCCESS ||
                                        r.workspaceSize > opts_.max_workspace;
                               }),
                results.end());
  if (results.empty()) {
    std::string hint;
    if ((is_fp8(p.a_type) || is_fp8(p.b_type)) && !(p.op_a == 1 && p.op_b == 0))
      hint =
          "; fp8 on this GPU may need op(A)=T, op(B)=N in column-major terms (row-major: "
          "trans_a=N, trans_b=T)";
    fail(KJIT_ERROR_UNSUPPORTED,
         "cuBLASLt has no algorithm for " + describe(p) + " on device " + std::to_string(ordinal_) +
             " (" + dev_.name + ", sm_" + std::to_string(dev_.cc_major) +
             std::to_string(dev_.cc_minor) + ")" +
             (s == CUBLAS_STATUS_NOT_SUPPORTED ? ": " + lt_status_text(s) : "") + hint);
  }
  return results;
}

cublasStatus_t Gemm::matmul(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Problem& p,
                            const void* c, void* d, void* ws, size_t ws_size,
                            CUstream stream) const {
  const Scalar alpha(p.alpha, p.compute), beta(p.beta, p.compute);
  return lt().cublasLtMatmul(handle_, plan.op, alpha.ptr(), p.a, plan.a, p.b, plan.b, beta.ptr(), c,
                             plan.c, d, plan.d, &algo, ws, ws_size,
                             reinterpret_cast<cudaStream_t>(stream));
}

size_t Gemm::autotune(const Problem& p, const Plan& plan, const Heuristics& cands,
                      CUstream stream) {
  const auto& drv = cuda::driver();
  size_t ws_need = 0;
  for (const auto& c : cands) ws_need = std::max(ws_need, c.workspaceSize);
  // Trials write a scratch D, never the caller's: with beta != 0 and C == D, repeated runs
  // would otherwise accumulate into the result.
  DeviceBuffer scratch(d_footprint_bytes(p));
  DeviceBuffer ws(ws_need);
  const size_t reps = opts_.autotune_reps;
  Events ev(reps + 1);
  size_t best = cands.size();
  float best_ms = std::numeric_limits<float>::infinity();
  std::vector<float> times(reps);
  for (size_t i = 0; i < cands.size(); ++i) {
    const auto& algo = cands[i].algo;
    bool ok = true;
    for (uint32_t w = 0; w < opts_.autotune_warmup && ok; ++w)
      ok = matmul(plan, algo, p, p.c, scratch.get(), ws.get(), ws_need, stream) ==
           CUBLAS_STATUS_SUCCESS;
    if (!ok) continue;
    cuda::check(drv.cuEventRecord(ev[0], stream), "cuEventRecord");
    for (size_t r = 0; r < reps && ok; ++r) {
      ok = matmul(plan, algo, p, p.c, scratch.get(), ws.get(), ws_need, stream) ==
           CUBLAS_STATUS_SUCCESS;
      cuda::check(drv.cuEventRecord(ev[r + 1], stream), "cuEventRecord");
    }
    cuda::check(drv.cuEventSynchronize(ev[reps]), "cuEventSynchronize (autotune)");
    if (!ok) continue;
    for (size_t r = 0; r < reps; ++r)
      cuda::check(drv.cuEventElapsedTime(&times[r], ev[r], ev[r + 1]), "cuEventElapsedTime");
    std::nth_element(times.begin(), times.begin() + long(reps / 2), times.end());
    const float median = times[reps / 2];
    log_debug("gemm autotune: candidate " + std::to_string(i) + " " +
              config_text(decode_config(algo), cands[i].workspaceSize) + ": " +
              std::to_string(median * 1000.0f) + " us");
    if (median < best_ms) {
      best_ms = median;
      best = i;
    }
  }
  if (best == cands.size())
    fail(KJIT_ERROR_CUBLAS, "autotuning " + describe(p) + ": none of the " +
                                std::to_string(cands.size()) + " candidates ran");
  autotunes_.fetch_add(1, std::memory_order_relaxed);
  return best;
}

Gemm::PlanPtr Gemm::load_persisted(const Problem& p, const PlanKey& key, const std::string& pkey,
                                   bool* retune) {
  // The disk's plan, else one that a node of the fleet persisted (remote tier): kept here
  // only once it decodes under this scope (validators_) and passes cublasLtMatmulAlgoCheck.
  bool from_remote = false;
  const std::optional<std::string> value =
      cache_->get_shared_value(kPlanNamespace, pkey, &from_remote);
  if (!value) return nullptr;
  std::string why;
  const std::optional<PersistedPlan> rec = decode_plan(*value, key, validators_, &why);
  if (!rec) {
    disk_rejected_.fetch_add(1, std::memory_order_relaxed);
    log_warn("gemm: persisted plan for " + describe(p) +
             (from_remote ? " from the remote tier" : "") + " rejected (" + why + "); re-planning");
    return nullptr;
  }
  if (opts_.autotune && !rec->tuned) {
    *retune = true;  // a heuristic plan; this handle wants a tuned one
    return nullptr;
  }
  PlanPtr plan = build_plan(p);
  static_assert(sizeof(plan->algo) == sizeof(rec->algo), "cublasLtMatmulAlgo_t is 64 bytes");
  std::memcpy(&plan->algo, rec->algo.data(), sizeof plan->algo);
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t s = lt().cublasLtMatmulAlgoCheck(handle_, plan->op, plan->a, plan->b,
                                                        plan->c, plan->d, &plan->algo, &check);
  if (s != CUBLAS_STATUS_SUCCESS || check.workspaceSize > opts_.max_workspace) {
    disk_rejected_.fetch_add(1, std::memory_order_relaxed);
    log_warn("gemm: persisted plan for " + describe(p) + " failed cublasLtMatmulAlgoCheck (" +
             (s != CUBLAS_STATUS_SUCCESS ? lt_status_text(s) : "workspace over the cap") +
             "); re-planning");
    return nullptr;
  }
  plan->workspace = check.workspaceSize;
  plan->tuned = rec->tuned;
  plan->tuned_us = rec->tuned_us;
  if (from_remote) cache_->facts().put_value(kPlanNamespace, pkey, *value);
  return plan;
}

void Gemm::persist(const PlanKey& key, const std::string& pkey, const Plan& plan) {
  if (!cache_ || !cache_->disk_usable() || cache_->disk()->read_only()) return;
  PersistedPlan rec;
  std::memcpy(rec.algo.data(), &plan.algo, rec.algo.size());
  rec.config = decode_config(plan.algo);
  rec.workspace = plan.workspace;
  rec.tuned = plan.tuned;
  rec.tuned_us = plan.tuned_us;
  cache_->put_shared_value(kPlanNamespace, pkey, encode_plan(key, validators_, rec));
  disk_writes_.fetch_add(1, std::memory_order_relaxed);
}

void Gemm::insert(const PlanKey& key, const PlanPtr& plan) {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {  // another thread planned it meanwhile: keep the newer
    it->second->second = plan;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, plan);
  index_.emplace(key, lru_.begin());
  while (lru_.size() > opts_.plan_capacity) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

Gemm::PlanPtr Gemm::get_plan(const Problem& p, const PlanKey& key, CUstream stream) {
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return it->second->second;
    }
  }
  if ((is_fp8(p.a_type) || is_fp8(p.b_type)) && dev_.cc_major * 10 + dev_.cc_minor < 89)
    fail(KJIT_ERROR_UNSUPPORTED, "fp8 GEMM needs compute capability 8.9 or newer; device " +
                                     std::to_string(ordinal_) + " (" + dev_.name + ") is " +
                                     std::to_string(dev_.cc_major) + "." +
                                     std::to_string(dev_.cc_minor));
  std::string pkey;
  if (cache_) {
    pkey = persist_key(key, validators_);
    bool retune = false;
    if (PlanPtr plan = load_persisted(p, key, pkey, &retune)) {
      disk_hits_.fetch_add(1, std::memory_order_relaxed);
      log_debug("gemm: plan for " + describe(p) + " from the cache database");
      insert(key, plan);
      return plan;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  PlanPtr plan = build_plan(p);
  if (opts_.autotune) {
    const Heuristics cands = heuristic(p, *plan, int(opts_.autotune_candidates));
    const size_t best = autotune(p, *plan, cands, stream);
    plan->algo = cands[best].algo;
    plan->workspace = cands[best].workspaceSize;
    plan->tuned = true;
  } else {
    const Heuristics cands = heuristic(p, *plan, 1);
    plan->algo = cands[0].algo;
    plan->workspace = cands[0].workspaceSize;
  }
  log_debug("gemm: planned " + describe(p) + ": " +
            config_text(decode_config(plan->algo), plan->workspace));
  if (cache_) persist(key, pkey, *plan);
  insert(key, plan);
  return plan;
}

bool Gemm::context_alive() const {
  unsigned long long id = 0;
  return cuda::context_id(ctx_, &id) && id == ctx_id_;
}

void Gemm::check_stream(CUstream stream) const {
  // The special handles mean "this stream of the current context", which run() makes the
  // handle's own.
  if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return;
  CUcontext owner = nullptr;
  const CUresult r = cuda::driver().cuStreamGetCtx(stream, &owner);
  if (r != CUDA_SUCCESS) cuda::throw_error(r, "cuStreamGetCtx (the stream given to kjit_gemm_run)");
  if (owner != ctx_)
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "kjit_gemm_run: the stream belongs to " + cuda::describe_context(owner) +
             ", but this GEMM handle runs in the primary context of device " +
             std::to_string(ordinal_) + "; pass a stream of that context (or NULL)");
}

std::vector<CUdeviceptr> Gemm::workspace_pointers() const {
  std::lock_guard<std::mutex> lock(ws_mu_);
  std::vector<CUdeviceptr> out;
  for (const auto& kv : workspaces_)
    if (kv.second->ptr) out.push_back(kv.second->ptr);
  return out;
}

std::shared_ptr<Gemm::Workspace> Gemm::workspace_for(CUstream stream) {
  const unsigned long long id = stream_key(stream);
  std::lock_guard<std::mutex> lock(ws_mu_);
  auto it = workspaces_.find(id);
  if (it != workspaces_.end()) {
    it->second->last_use = ++ws_tick_;
    return it->second;
  }
  if (workspaces_.size() >= kMaxStreams) {
    // Retire the least recently used stream's workspace. Its GEMMs may still be running
    // and its stream may be gone, so wait for the whole context before freeing.
    unsigned long long victim = 0;
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (const auto& kv : workspaces_) {
      if (kv.second->last_use < oldest) {
        oldest = kv.second->last_use;
        victim = kv.first;
      }
    }
    std::shared_ptr<Workspace> w = std::move(workspaces_[victim]);
    workspaces_.erase(victim);
    std::lock_guard<std::mutex> wlock(w->mu);
    if (w->ptr) {
      cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize (retiring a workspace)");
      cuda::driver().cuMemFree(w->ptr);
      ws_bytes_.fetch_sub(w->size, std::memory_order_relaxed);
    }
    w->ptr = 0;
    w->size = 0;
    w->retired = true;
  }
  auto w = std::make_shared<Workspace>();
  w->last_use = ++ws_tick_;
  workspaces_.emplace(id, w);
  return w;
}

void Gemm::grow(Workspace& ws, size_t need, CUstream stream) {
  const auto& drv = cuda::driver();
  if (ws.ptr) {
    // Earlier GEMMs on this stream may still use the old buffer (the caller holds ws.mu,
    // so no other thread enqueues with it meanwhile).
    cuda::check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize (growing a workspace)");
    drv.cuMemFree(ws.ptr);
    ws_bytes_.fetch_sub(ws.size, std::memory_order_relaxed);
    ws.ptr = 0;
    ws.size = 0;
  }
  // Round up to 1 MiB (capped) so that small growth steps do not each reallocate.
  constexpr size_t kStep = size_t(1) << 20;
  size_t bytes = (need + kStep - 1) / kStep * kStep;
  bytes = std::max(need, std::min<size_t>(bytes, size_t(opts_.max_workspace)));
  cuda::check(drv.cuMemAlloc(&ws.ptr, bytes), "cuMemAlloc (gemm workspace)");
  ws.size = bytes;
  ws_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void Gemm::run(const Problem& p, void* stream_ptr) {
  const CUstream stream = static_cast<CUstream>(stream_ptr);
  if (!context_alive())
    fail(KJIT_ERROR_STALE_HANDLE,
         "GEMM handle of device " + std::to_string(ordinal_) +
             ": the device's primary context was reset (cuDevicePrimaryCtxReset or "
             "cudaDeviceReset) after the handle was created, and its workspaces and cuBLASLt "
             "state went with it; destroy the handle and create a new one");
  cuda::ScopedContext scope(ctx_);
  check_stream(stream);
  const PlanKey key = key_for(p);
  const PlanPtr plan = get_plan(p, key, stream);

  std::shared_ptr<Workspace> ws;
  std::unique_lock<std::mutex> ws_lock;
  if (plan->workspace > 0) {
    for (;;) {
      ws = workspace_for(stream);
      ws_lock = std::unique_lock<std::mutex>(ws->mu);
      if (!ws->retired) break;
      ws_lock.unlock();
    }
    if (ws->size < plan->workspace) grow(*ws, plan->workspace, stream);
  }
  std::unique_lock<std::mutex> plan_lock(plan->mu, std::defer_lock);
  if (plan->per_call_attributes) {
    plan_lock.lock();
    set_pointers(plan->op, p);
  }
  const cublasStatus_t s =
      matmul(*plan, plan->algo, p, p.c, p.d, ws ? reinterpret_cast<void*>(ws->ptr) : nullptr,
             ws ? ws->size : 0, stream);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The heuristic accepted the shapes and types but cuBLASLt refuses this call (it also
    // sees beta, the pointers and whether C is D).
    std::string hint;
    if (is_fp8(p.a_type) || is_fp8(p.b_type))
      hint =
          "; fp8 GEMMs run with beta = 0 or in place (C == D, 16-bit or f32 D), with "
          "16-byte aligned pointers and leading dimensions";
    fail(KJIT_ERROR_UNSUPPORTED, "cuBLASLt cannot run " + describe(p) + " on device " +
                                     std::to_string(ordinal_) + " (" + dev_.name +
                                     "): cublasLtMatmul returned " + lt_status_text(s) + hint);
  }
  if (s != CUBLAS_STATUS_SUCCESS) lt_throw(s, "cublasLtMatmul (" + describe(p) + ")");
  runs_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace kjit::blas
