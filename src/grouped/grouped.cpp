#include "grouped/grouped.h"

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "kernel/kernel.h"
#include "kjit/gemm.h"
#include "kjit/kernel.h"
#include "store/cache.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit::grouped {
namespace {

constexpr long long kMaxDim = (1ll << 31) - 1;

[[noreturn]] void bad(const std::string& what) {
  fail(KJIT_ERROR_INVALID_ARGUMENT, "grouped GEMM: " + what);
}

bool aligned(const void* p, uintptr_t a) {
  return (reinterpret_cast<uintptr_t>(p) % a) == 0;
}

const char* type_name(int32_t t) {
  switch (t) {
    case KJIT_GEMM_F32:
      return "f32";
    case KJIT_GEMM_F16:
      return "f16";
    case KJIT_GEMM_BF16:
      return "bf16";
    case KJIT_GEMM_F8_E4M3:
      return "fp8 e4m3";
    case KJIT_GEMM_F8_E5M2:
      return "fp8 e5m2";
    case KJIT_GEMM_F64:
      return "f64";
  }
  return "?";
}

// A type field with DEFAULT resolved to `def`: one of `offered` (else UNSUPPORTED naming it).
int32_t resolve_type(int32_t t, int32_t def, const char* field, bool fp8_offered,
                     const char* offered) {
  if (t < 0 || t > KJIT_GEMM_F64)
    bad(std::string(field) + " is " + std::to_string(t) + ", not a kjit_gemm_dtype");
  if (t == KJIT_GEMM_DTYPE_DEFAULT) t = def;
  if (t == KJIT_GEMM_BF16 || (fp8_offered && t == KJIT_GEMM_F8_E4M3)) return t;
  fail(KJIT_ERROR_UNSUPPORTED,
       std::string("grouped GEMM: ") + field + " is " + type_name(t) + "; " + offered);
}

void check_ld(long long ld, long long least, const char* field) {
  if (ld < least || ld > (1ll << 40))
    bad(std::string(field) + " is " + std::to_string(ld) + ", must be at least " +
        std::to_string(least));
}

}  // namespace

Options options_from(const kjit_grouped_gemm_options* o) {
  Options r;
  if (!o) return r;
  if (o->tile_n != 0 && o->tile_n != 128 && o->tile_n != 256)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_options: tile_n is " +
                                          std::to_string(o->tile_n) + ", must be 0, 128 or 256");
  if (o->stages != 0 && (o->stages < 2 || o->stages > 8))
    fail(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_options: stages is " +
                                          std::to_string(o->stages) + ", must be 0 or 2..8");
  if (o->schedule < KJIT_GROUPED_SCHEDULE_AUTO || o->schedule > KJIT_GROUPED_SCHEDULE_PINGPONG)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_options: schedule is " +
                                          std::to_string(o->schedule) +
                                          ", not a kjit_grouped_schedule");
  if (o->schedule == KJIT_GROUPED_SCHEDULE_PINGPONG && o->tile_n == 256)
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "kjit_grouped_gemm_options: the pingpong schedule has the tile 128x128, not tile_n 256");
  if (o->cluster_m > 2)
    fail(KJIT_ERROR_INVALID_ARGUMENT, "kjit_grouped_gemm_options: cluster_m is " +
                                          std::to_string(o->cluster_m) + ", must be 0, 1 or 2");
  if (o->cluster_m == 2 && o->schedule == KJIT_GROUPED_SCHEDULE_PINGPONG)
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "kjit_grouped_gemm_options: the 2x1 cluster has the cooperative schedule, not pingpong");
  r.cluster_m = int(o->cluster_m);
  r.schedule = o->schedule;
  r.tile_n = int(o->tile_n);
  r.stages = int(o->stages);
  r.portable_only = o->portable_only != 0;
  r.check_offsets = o->check_offsets != 0;
  r.autotune = o->autotune != 0;
  if (r.autotune && !r.automatic())
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "kjit_grouped_gemm_options: autotune needs tile_n, stages, schedule and cluster_m 0 "
         "and portable_only 0 (it chooses them)");
  return r;
}

Problem check(const kjit_grouped_gemm_desc& d, const void* A, const void* B, const int32_t* offs,
              const void* C, const void* D, const void* bias, bool pointers, const Scales& scales) {
  Problem p;
  if (d.groups < 1) bad("groups is " + std::to_string(d.groups) + ", must be >= 1");
  if (d.rows < 0 || d.rows > kMaxDim)
    bad("rows is " + std::to_string(d.rows) + ", must be in [0, 2^31)");
  if (d.n < 1 || d.n > kMaxDim) bad("n is " + std::to_string(d.n) + ", must be in [1, 2^31)");
  if (d.k < 1 || d.k > kMaxDim) bad("k is " + std::to_string(d.k) + ", must be in [1, 2^31)");
  if (d.b_order != KJIT_GROUPED_B_KN && d.b_order != KJIT_GROUPED_B_NK)
    bad("b_order is " + std::to_string(d.b_order) + ", not a kjit_grouped_b_order");
  if (d.activation < KJIT_GROUPED_ACT_NONE || d.activation > KJIT_GROUPED_ACT_SWIGLU)
    bad("activation is " + std::to_string(d.activation) + ", not a kjit_grouped_activation");
  if (d.reserved0 != 0) bad("reserved0 is " + std::to_string(d.reserved0) + ", must be 0");
  if (d.reserved1 != 0) bad("reserved1 is " + std::to_string(d.reserved1) + ", must be 0");
  if (d.scale_mode != KJIT_GROUPED_SCALE_NONE && d.scale_mode != KJIT_GROUPED_SCALE_ROWWISE &&
      d.scale_mode != KJIT_GROUPED_SCALE_BLOCK128)
    bad("scale_mode is " + std::to_string(d.scale_mode) + ", not a kjit_grouped_scale_mode");
  const int32_t a_type =
      resolve_type(d.a_type, KJIT_GEMM_BF16, "a_type", true,
                   "A and B may be bf16 (KJIT_GEMM_BF16) or fp8 e4m3 (KJIT_GEMM_F8_E4M3)");
  const int32_t b_type =
      resolve_type(d.b_type, a_type, "b_type", true,
                   "A and B may be bf16 (KJIT_GEMM_BF16) or fp8 e4m3 (KJIT_GEMM_F8_E4M3)");
  if (b_type != a_type)
    fail(KJIT_ERROR_UNSUPPORTED, std::string("grouped GEMM: b_type is ") + type_name(b_type) +
                                     " but a_type is " + type_name(a_type) +
                                     "; A and B must have one type");
  resolve_type(d.d_type, KJIT_GEMM_BF16, "d_type", false,
               "D (and C and the bias) must be bf16 (KJIT_GEMM_BF16)");
  p.in = a_type == KJIT_GEMM_F8_E4M3 ? DType::E4m3 : DType::Bf16;
  p.scale = d.scale_mode == KJIT_GROUPED_SCALE_ROWWISE    ? Scale::Row
            : d.scale_mode == KJIT_GROUPED_SCALE_BLOCK128 ? Scale::Block128
                                                          : Scale::None;
  if (p.scale != Scale::None && p.in != DType::E4m3)
    fail(KJIT_ERROR_UNSUPPORTED,
         "grouped GEMM: scale_mode asks for scales but the inputs are bf16; "
         "scales are offered with fp8 e4m3 inputs (a_type KJIT_GEMM_F8_E4M3)");

  p.groups = d.groups;
  p.rows = int(d.rows);
  p.n = int(d.n);
  p.k = int(d.k);
  p.b_order = d.b_order == KJIT_GROUPED_B_KN ? BOrder::KN : BOrder::NK;
  p.act = Act(d.activation);
  p.lda = d.lda ? d.lda : d.k;
  check_ld(p.lda, d.k, "lda");
  const long long b_row = p.b_order == BOrder::KN ? d.n : d.k;
  const long long b_rows = p.b_order == BOrder::KN ? d.k : d.n;
  p.ldb = d.ldb ? d.ldb : b_row;
  check_ld(p.ldb, b_row, "ldb");
  p.stride_b = d.stride_b ? d.stride_b : b_rows * p.ldb;
  check_ld(p.stride_b, b_rows * p.ldb, "stride_b");
  // The gated epilogue writes n / 2 columns (gate and up halves of B's n).
  const bool gated = d.activation == KJIT_GROUPED_ACT_SWIGLU;
  if (gated && d.n % 2 != 0)
    bad("n is " + std::to_string(d.n) +
        "; KJIT_GROUPED_ACT_SWIGLU needs an even n (the gate and up halves of B)");
  const long long out_n = gated ? d.n / 2 : d.n;
  p.ldd = d.ldd ? d.ldd : out_n;
  check_ld(p.ldd, out_n, "ldd");
  p.ldc = d.ldc ? d.ldc : out_n;
  check_ld(p.ldc, out_n, "ldc");
  p.stride_bias = d.stride_bias ? d.stride_bias : d.n;
  check_ld(p.stride_bias, d.n, "stride_bias");
  if (!(d.alpha == d.alpha) || !(d.beta == d.beta)) bad("alpha or beta is NaN");
  p.alpha = float(d.alpha);
  p.beta = float(d.beta);

  if (!pointers) {
    // Stand-ins, only compared with NULL and checked for alignment.
    alignas(256) static const unsigned char stand_in[1] = {0};
    p.a = p.b = stand_in;
    p.offs = reinterpret_cast<const int32_t*>(stand_in);
    p.d = const_cast<unsigned char*>(stand_in);
    p.c = d.beta != 0.0 ? stand_in : nullptr;
    p.bias = bias ? stand_in : nullptr;
    if (p.scale != Scale::None) p.scale_a = p.scale_b = reinterpret_cast<const float*>(stand_in);
    return p;
  }
  if (p.rows > 0) {
    if (!A) bad("A is NULL");
    if (!B) bad("B is NULL");
    if (!offs) bad("offs is NULL");
    if (!D) bad("D is NULL");
    if (d.beta != 0.0 && !C) bad("C is NULL but beta is not 0");
  }
  if (p.in == DType::Bf16 && !aligned(A, 2)) bad("A is not aligned to 2 bytes (bf16)");
  if (p.in == DType::Bf16 && !aligned(B, 2)) bad("B is not aligned to 2 bytes (bf16)");
  if (!aligned(C, 2)) bad("C is not aligned to 2 bytes (bf16)");
  if (!aligned(D, 2)) bad("D is not aligned to 2 bytes (bf16)");
  if (!aligned(bias, 2)) bad("bias is not aligned to 2 bytes (bf16)");
  if (!aligned(offs, 4)) bad("offs is not aligned to 4 bytes (int32)");
  if (scales.check) {
    if (p.scale == Scale::None) {
      if (scales.a) bad("scale_a is given but scale_mode is KJIT_GROUPED_SCALE_NONE");
      if (scales.b) bad("scale_b is given but scale_mode is KJIT_GROUPED_SCALE_NONE");
    } else {
      const bool row = p.scale == Scale::Row;
      const std::string mode = row ? "KJIT_GROUPED_SCALE_ROWWISE" : "KJIT_GROUPED_SCALE_BLOCK128";
      if (p.rows > 0 && !scales.a)
        bad("scale_a is NULL but scale_mode is " + mode +
            (row ? " (rows fp32 row scales" : " (rows x ceil(k/128) fp32 block scales") +
            "; kjit_grouped_gemm_run_scaled() takes them)");
      if (p.rows > 0 && !scales.b)
        bad("scale_b is NULL but scale_mode is " + mode +
            (row ? " (G x n fp32 column scales"
                 : " (G x ceil(n/128) x ceil(k/128) fp32 block scales") +
            "; kjit_grouped_gemm_run_scaled() takes them)");
      if (!aligned(scales.a, 4)) bad("scale_a is not aligned to 4 bytes (fp32)");
      if (!aligned(scales.b, 4)) bad("scale_b is not aligned to 4 bytes (fp32)");
    }
    p.scale_a = scales.a;
    p.scale_b = scales.b;
  } else if (p.scale != Scale::None) {
    // Not looked at (kjit_grouped_gemm_check(), plan keys): stand-ins for the configuration.
    alignas(256) static const float scale_stand_in[1] = {0};
    p.scale_a = p.scale_b = scale_stand_in;
  }
  p.a = A;
  p.b = B;
  p.offs = offs;
  p.c = d.beta != 0.0 ? C : nullptr;
  p.d = const_cast<void*>(D);
  p.bias = bias;
  return p;
}

bool tma_eligible(const Problem& p) {
  // SwiGLU with B order KN copies the up half from column n/2 on: its start must be 16-byte
  // aligned in the row too (a copy from an unaligned column traps on the device).
  if (p.act == Act::Swiglu && p.b_order == BOrder::KN && (p.n / 2) % 8 != 0) return false;
  // fp8: 16-byte rows are 16 elements, and the fp8 wgmma reads B K-major (order NK) only.
  const long long e = p.in == DType::E4m3 ? 16 : 8;
  if (p.in == DType::E4m3 && p.b_order != BOrder::NK) return false;
  // Block scales with SwiGLU: the up half of a 64-column gated tile must lie in one
  // 128-column scale block.
  if (p.scale == Scale::Block128 && p.act == Act::Swiglu && (p.n / 2) % 64 != 0) return false;
  return aligned(p.a, 16) && aligned(p.b, 16) && p.lda % e == 0 && p.ldb % e == 0 &&
         p.stride_b % e == 0;
}

namespace {

// D suits a tensor map for the TMA store epilogue: a 16-byte aligned base and pitch.
bool tma_store_fits(const Problem& p) {
  return aligned(p.d, 16) && p.ldd % 8 == 0;
}

}  // namespace

void choose_store(Config& c, const Problem& p) {
  c.vec_store = c.tma_store = false;
  if (c.path != Path::Tma) return;
  // The 16-byte store epilogue for wide pingpong problems (H200, Mixtral w1/w3, N 28672:
  // 594-599 -> 672-679 TFLOPS uniform, 529-553 -> 557-561 skewed); it measured slower on
  // the narrower prefill shapes (DeepSeek-V3 w2, Qwen3 w1/w3: 5-6%) and on decode (the
  // cooperative 128x256 tile: 3.61-3.91 -> 3.46-3.53 TB/s). bench/RESULTS.md.
  c.vec_store = c.pingpong && p.n >= 16384 && c.scale != Scale::Block128;
  // The cooperative schedule's epilogue stalls both consumers: stored through shared
  // memory with TMA copies, they go on to the next tile while the copies run (H200:
  // bench/RESULTS.md). Not for the decode tile (memory-bound) or D unfit for a tensor map.
  c.tma_store = !c.pingpong && c.tile_m == 128 && tma_store_fits(p);
  if (c.tma_store && shared_bytes(c) > kMaxShared) c.tma_store = false;
}

Config choose(const Problem& p, int cc, bool tma_available, const Options& o) {
  Config c;
  c.b_order = p.b_order;
  c.has_c = p.c != nullptr;
  c.has_bias = p.bias != nullptr;
  c.act = p.act;
  c.in = p.in;
  c.scale = p.scale;
  if (cc == 90 && tma_available && !o.portable_only && tma_eligible(p)) {
    c.path = Path::Tma;
    c.target = "sm_90a";
    c.tile_m = 128;
    c.tile_k = p.in == DType::E4m3 ? 128 : 64;  // 128 bytes of K per row either way
    // Pingpong for prefill-like problems (its epilogue overlaps the other consumer's main
    // loop: 1.03-1.28x torch._grouped_mm on H200 where cooperative 128x256 with the epilogue
    // from registers gave 0.87-1.12x);
    // cooperative 128x256 when groups average fewer than 64 rows (decode: memory-bound, the
    // wide tile reads each weight tile once for more columns). bench/RESULTS.md.
    const bool decode = (long long)p.rows < 64ll * p.groups;
    // fp8 prefill: the cooperative 128x128 tile with the TMA store epilogue where D takes a
    // tensor map (H200, torch._scaled_grouped_mm shapes: 1.08-1.27x faster than pingpong
    // on five, equal on the other two); its main loop takes half bf16's time, so the
    // epilogue weighs twice as much. bench/RESULTS.md.
    // bf16 prefill with narrow weights (N <= 2048): the cooperative 128x256 tile with it too
    // (H200, Qwen3-30B w1/w3, N 1536: 1.07-1.09x pingpong's speed uniform, 1.03-1.06x
    // skewed; equal at N 4096, pingpong ahead at N 7168 and 28672).
    const bool coop_tma = !decode && o.tile_n == 0 && o.schedule == KJIT_GROUPED_SCHEDULE_AUTO &&
                          tma_store_fits(p) && (p.in == DType::E4m3 || p.n <= 2048);
    const bool fp8_coop = coop_tma && p.in == DType::E4m3;
    // bf16 prefill with 2048 < N < 16384: the cooperative 128x256 tile in 2x1 clusters (B
    // multicast), with TMA stores where D takes them. Under sustained load the H200 runs
    // every one of these kernels at its 700 W board limit, and the kernel that moves fewer
    // bytes per FLOP runs at a higher clock: H200, rounds of 300 ms, Mixtral w2 (N 4096),
    // DeepSeek-V3 w1/w3 and w2 (N 4096, 7168): 1.02-1.06x pingpong's speed (in short
    // bursts, before the clock comes down to the limit, 0.93-0.99x). Wider weights keep
    // pingpong: Mixtral w1/w3 (N 28672) equal uniform, pingpong 1.05x with Zipf-skewed
    // routing. bench/RESULTS.md.
    const bool bf16_cluster =
        !decode && o.tile_n == 0 && o.schedule == KJIT_GROUPED_SCHEDULE_AUTO && o.cluster_m == 0 &&
        p.in == DType::Bf16 && p.scale == Scale::None && p.n > 2048 && p.n < 16384;
    c.pingpong = o.schedule == KJIT_GROUPED_SCHEDULE_PINGPONG ||
                 (o.schedule == KJIT_GROUPED_SCHEDULE_AUTO && !decode && o.tile_n != 256 &&
                  o.cluster_m != 2 && !coop_tma && !bf16_cluster);
    c.tile_n = c.pingpong || fp8_coop ? 128 : o.tile_n ? o.tile_n : (p.n <= 128 ? 128 : 256);
    // fp8 pingpong: 5 stages (H200, torch._scaled_grouped_mm shapes: 2-6% faster than 6).
    const int narrow = p.in == DType::E4m3 && c.pingpong ? 5 : 6;
    c.stages = o.stages ? o.stages : (c.tile_n == 256 ? 4 : narrow);
    // Decode with the schedule left to the heuristic: the 64-row tile, one consumer
    // warpgroup, so a stage holds 64 rows of A, not 128, and the ring one stage more; B's
    // copies evict-first (the weights are read once). H200, 128 experts x 4 rows: 3.96 ->
    // 4.18 TB/s of weights; 8 x 16: 4.00 -> 4.26 TB/s, where torch's sum of the same bytes
    // reads 4.15 and 4.29 TB/s (the hint's share: 0.3-0.7%). bench/RESULTS.md.
    if (decode && o.schedule == KJIT_GROUPED_SCHEDULE_AUTO && p.in == DType::Bf16 &&
        p.scale == Scale::None) {
      c.tile_m = 64;
      c.stages = o.stages ? o.stages : (c.tile_n == 256 ? 5 : 8);
      c.b_evict_first = true;
    }
    if ((o.cluster_m == 2 || bf16_cluster) && p.in == DType::Bf16) {
      c.cluster_m = 2;
      c.tile_m = 128;
      c.b_evict_first = false;
      c.stages = o.stages ? o.stages : (c.tile_n == 256 ? 4 : 6);
    }
    if (p.scale == Scale::Block128) {
      // The main accumulator beside the wgmma one: one 64x128 half per consumer, the
      // cooperative 128x128 tile whatever the options ask.
      c.pingpong = false;
      c.tile_n = 128;
      c.stages = o.stages ? o.stages : 6;
    }
    choose_store(c, p);
  } else {
    c.path = Path::Simt;
    c.target = "sm_" + std::to_string(cc);
    c.tile_m = 64;
    c.tile_n = 64;
    c.tile_k = 16;
    c.stages = 1;
  }
  return c;
}

CompileOptions compile_options(const Config& c) {
  CompileOptions opts;
  opts.target = c.target;
  opts.name = "kjit_grouped_gemm.cu";
  opts.raw = {"-std=c++17"};
  return opts;
}

Outcome compile(Compiler& compiler, const Config& c) {
  return compiler.compile(render(c), compile_options(c));
}

int target_capability(const std::string& t) {
  const auto bad_target = [&] {
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "grouped GEMM: target '" + t + "' is not an exact architecture (sm_XY, or sm_90a)");
  };
  if (t.size() < 5 || t.compare(0, 3, "sm_") != 0) bad_target();
  std::string digits = t.substr(3);
  if (digits.back() == 'a') {
    if (digits != "90a") bad_target();  // the only arch-specific target the kernels use
    digits.pop_back();
  }
  if (digits.size() < 2 || digits.size() > 3 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    bad_target();
  const int cc = std::stoi(digits);
  if (cc < 70) bad_target();
  return cc;
}

Config config_for_target(const Problem& p, const std::string& target, const Options& o) {
  const int cc = target_capability(target);
  if (cc == 90 && target != "sm_90a" && !o.portable_only)
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "grouped GEMM: a device of compute capability 9.0 runs the sm_90a kernel; give target "
         "sm_90a (or portable_only for the portable kernel, compiled for sm_90)");
  return choose(p, cc, /*tma_available=*/true, o);
}

GroupedGemm::GroupedGemm(Compiler& compiler, int device, const Options& o)
    : compiler_(compiler), device_(device), opts_(o) {
  cuda::device_handle(device);  // the driver and the device, or KJIT_ERROR_CUDA_UNAVAILABLE
  cc_ = cuda::compute_capability(device);
  sms_ = cuda::device_attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  tma_ = cuda::driver().cuTensorMapEncodeTiled != nullptr;
  dev_.cc = cc_;
  dev_.sm_count = sms_;
  dev_.name = cuda::device_name(device);
  dev_.driver_version = cuda::driver_version();
  dev_.max_shared =
      size_t(cuda::device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  validators_ = validators(dev_);
}

GroupedGemm::~GroupedGemm() {
  if (!record_) return;
  // Best effort: the context may be gone at process exit.
  cuda::ScopedContext scope(static_cast<CUcontext>(record_ctx_));
  cuda::driver().cuMemFree(CUdeviceptr(record_));
}

std::optional<Config> GroupedGemm::tuned_plan(const PlanKey& key, const Config& heuristic) {
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(key);
    if (it != plans_.end())
      return it->second ? std::optional<Config>(apply(heuristic, *it->second)) : std::nullopt;
  }
  std::optional<Config> found;
  Cache* cache = compiler_.cache();
  const std::string pkey = persist_key(key, validators_);
  bool from_remote = false;
  std::optional<std::string> value =
      cache ? cache->get_shared_value(kPlanNamespace, pkey, &from_remote) : std::nullopt;
  if (value) {
    std::string why;
    std::optional<PersistedPlan> rec = decode_plan(*value, key, validators_, &why);
    if (rec && dev_.max_shared && shared_bytes(rec->config) > dev_.max_shared) {
      why = "needs more shared memory than the device offers";
      rec.reset();
    }
    if (rec) {
      found = rec->config;
      if (from_remote) cache->facts().put_value(kPlanNamespace, pkey, *value);
      log_debug("grouped GEMM: tuned plan for " + key.text() +
                " from the cache: " + apply(heuristic, rec->config).key());
    } else {
      log_warn("grouped GEMM: persisted plan for " + key.text() +
               (from_remote ? " from the remote tier" : "") + " rejected (" + why +
               "); using the heuristic");
    }
  }
  std::lock_guard<std::mutex> lock(plans_mu_);
  plans_[key] = found;
  return found ? std::optional<Config>(apply(heuristic, *found)) : std::nullopt;
}

Config GroupedGemm::config_for(const Problem& p) {
  const Config heuristic = choose(p, cc_, tma_, opts_);
  if (!opts_.automatic() || heuristic.path != Path::Tma) return heuristic;
  std::optional<Config> tuned = tuned_plan(make_key(p, dev_), heuristic);
  if (!tuned) return heuristic;
  choose_store(*tuned, p);  // the store form follows the tuned schedule
  return *tuned;
}

GroupedGemm::Loaded& GroupedGemm::kernel(const Config& c) {
  const std::string key = c.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second;
  }
  // Compiled without the lock, so that configurations compile side by side; the compiler's
  // single flight makes threads asking for the same one wait for one compile.
  const CompileOptions opts = compile_options(c);
  KernelCreation made = Kernel::create(compiler_, render(c), kKernelName, &opts, device_, 0);
  if (!made.kernel) {
    std::string msg = "grouped GEMM kernel " + key + " failed to compile: " + made.failure.message;
    if (made.failure.entry) msg += "\n" + made.failure.entry->log;
    fail(made.failure.status ? made.failure.status : KJIT_ERROR_COMPILE, msg);
  }
  if (shared_bytes(c) > 0) made.kernel->set_max_dynamic_shared(int(shared_bytes(c)));
  Loaded loaded;
  loaded.max_grid = unsigned((c.path == Path::Tma ? 1 : 4) * sms_);
  if (c.cluster_m > 1) {
    // A persistent grid of clusters: no more than run at once, or the last would start only
    // when others end. Without the query, one cluster per cluster_m SMs.
    const int fit = made.kernel->max_active_clusters(unsigned(c.cluster_m), threads(c),
                                                     shared_bytes(c));
    const int clusters = fit > 0 ? fit : std::max(1, sms_ / c.cluster_m);
    loaded.max_grid = unsigned(clusters * c.cluster_m);
    log_debug("grouped GEMM " + c.key() + ": " + std::to_string(fit) +
              " clusters run at once; persistent grid of up to " +
              std::to_string(loaded.max_grid) + " blocks");
  }
  loaded.kernel = std::move(made.kernel);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.emplace(key, std::move(loaded)).first;  // keeps an earlier one
  return it->second;
}

void GroupedGemm::prepare(const Problem& p) {
  kernel(config_for(p));
}

void GroupedGemm::run(const Problem& p, void* stream) {
  if (p.rows == 0) return;
  if (opts_.check_offsets) check_offsets(p, stream);
  const Config heuristic = choose(p, cc_, tma_, opts_);
  Config c = heuristic;
  if (opts_.automatic() && heuristic.path == Path::Tma) {
    const PlanKey key = make_key(p, dev_);
    if (std::optional<Config> tuned = tuned_plan(key, heuristic))
      c = *tuned;
    else if (opts_.autotune)
      c = autotune(p, key, heuristic, stream);
    choose_store(c, p);  // the store form follows the tuned schedule
  }
  launch(p, c, kernel(c), stream);
}

void GroupedGemm::launch(const Problem& p, const Config& c, const Loaded& loaded,
                         void* stream) {
  Kernel& k = *loaded.kernel;
  const long long n_tiles = (p.n + c.tile_n - 1) / c.tile_n;
  const long long cluster_rows = (long long)c.tile_m * c.cluster_m;
  // Tiles (of cluster_m blocks each) the groups can have at most: the persistent grid needs
  // no more blocks than that.
  const long long bound =
      ((p.rows + cluster_rows - 1) / cluster_rows + p.groups) * n_tiles * c.cluster_m;
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = uint32_t(std::max<long long>(c.cluster_m, std::min<long long>(bound, loaded.max_grid)));
  if (c.cluster_m > 1) cfg.cluster[0] = uint32_t(c.cluster_m);
  cfg.block[0] = uint32_t(threads(c));
  cfg.shared_bytes = uint32_t(shared_bytes(c));
  cfg.stream = stream;

  const void* a = p.a;
  const void* b = p.b;
  const void* offs = p.offs;
  void* d = p.d;
  const void* cptr = p.c;
  const void* bias = p.bias;
  long long lda = p.lda, ldb = p.ldb, stride_b = p.stride_b, ldc = p.ldc, ldd = p.ldd,
            stride_bias = p.stride_bias;
  int groups = p.groups, rows = p.rows, n = p.n, kk = p.k;
  float alpha = p.alpha, beta = p.beta;
  const float* scale_a = p.scale_a;
  const float* scale_b = p.scale_b;
  void* common[] = {&a,   &b,        &offs,  &d,    &cptr,        &bias,   &lda,
                    &ldb, &stride_b, &ldc,   &ldd,  &stride_bias, &groups, &rows,
                    &n,   &kk,       &alpha, &beta, &scale_a,     &scale_b};
  // The scale pointers only for a scaled configuration (params()).
  const size_t kCommon = sizeof(common) / sizeof(common[0]) - (c.scale != Scale::None ? 0 : 2);

  if (c.path == Path::Simt) {
    k.launch(cfg, common, kCommon);
    return;
  }
  const bool e4m3 = c.in == DType::E4m3;
  const CUtensorMapDataType ttype =
      e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t esize = e4m3 ? 1 : 2;
  const cuda::Driver& drv = cuda::driver();
  CUtensorMap map_a, map_b;
  const cuuint32_t ones[3] = {1, 1, 1};
  {
    const cuuint64_t dims[2] = {cuuint64_t(p.k), cuuint64_t(p.rows)};
    const cuuint64_t strides[1] = {cuuint64_t(p.lda) * esize};
    const cuuint32_t box[2] = {cuuint32_t(c.tile_k), cuuint32_t(c.tile_m)};
    cuda::check(drv.cuTensorMapEncodeTiled(
                    &map_a, ttype, 2, const_cast<void*>(p.a), dims, strides, box, ones,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                "cuTensorMapEncodeTiled (grouped GEMM, A)");
  }
  {
    const bool kn = p.b_order == BOrder::KN;
    const cuuint64_t dims[3] = {cuuint64_t(kn ? p.n : p.k), cuuint64_t(kn ? p.k : p.n),
                                cuuint64_t(p.groups)};
    const cuuint64_t strides[2] = {cuuint64_t(p.ldb) * esize, cuuint64_t(p.stride_b) * esize};
    const Box bb = b_box(c);
    const cuuint32_t box[3] = {bb.inner, bb.outer, 1};
    cuda::check(drv.cuTensorMapEncodeTiled(
                    &map_b, ttype, 3, const_cast<void*>(p.b), dims, strides, box, ones,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                "cuTensorMapEncodeTiled (grouped GEMM, B)");
  }
  CUtensorMap map_d;
  size_t maps = 2;
  void* args[3 + sizeof(common) / sizeof(common[0])];
  args[0] = &map_a;
  args[1] = &map_b;
  if (c.tma_store) {
    // D's columns (N, or N / 2 gated) by its rows, 64 x 64 pieces; the copies never write
    // past either bound.
    const cuuint64_t dims[2] = {cuuint64_t(p.act == Act::Swiglu ? p.n / 2 : p.n),
                                cuuint64_t(p.rows)};
    const cuuint64_t strides[1] = {cuuint64_t(p.ldd) * 2};
    const cuuint32_t box[2] = {64, 64};
    cuda::check(drv.cuTensorMapEncodeTiled(
                    &map_d, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.d, dims, strides, box, ones,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                "cuTensorMapEncodeTiled (grouped GEMM, D)");
    args[maps++] = &map_d;
  }
  for (size_t i = 0; i < kCommon; ++i) args[maps + i] = common[i];
  k.launch(cfg, args, maps + kCommon);
}

namespace {

// Events and a scratch output for autotuning, released on every path out.
struct TuneResources {
  const cuda::Driver& drv = cuda::driver();
  CUevent start = nullptr, stop = nullptr;
  CUdeviceptr scratch = 0;
  ~TuneResources() {
    if (start) drv.cuEventDestroy(start);
    if (stop) drv.cuEventDestroy(stop);
    if (scratch) drv.cuMemFree(scratch);
  }
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Config GroupedGemm::autotune(const Problem& p, const PlanKey& key, const Config& heuristic,
                             void* stream) {
  std::lock_guard<std::mutex> tune_lock(tune_mu_);
  {
    // Another thread may have tuned this class while this one waited.
    std::lock_guard<std::mutex> lock(plans_mu_);
    auto it = plans_.find(key);
    if (it != plans_.end() && it->second) return apply(heuristic, *it->second);
  }
  std::vector<Config> cands = candidates(heuristic, dev_);
  for (Config& c : cands) choose_store(c, p);
  // Compile (or hit) every candidate side by side; one that fails is left out.
  std::vector<Loaded*> kernels(cands.size(), nullptr);
  std::vector<std::string> errors(cands.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < cands.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          kernels[i] = &kernel(cands[i]);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  if (!kernels[0]) fail(KJIT_ERROR_COMPILE, errors[0]);
  for (size_t i = 1; i < cands.size(); ++i)
    if (!kernels[i])
      log_warn("grouped GEMM autotune: candidate " + cands[i].key() + " left out: " + errors[i]);

  const cuda::ContextChoice ctx = cuda::choose_context(device_);
  cuda::ScopedContext scope(ctx.ctx);
  TuneResources res;
  Problem q = p;
  if (p.c && p.c == p.d) {
    // In place (C is D, beta != 0): the candidates write a scratch output, so that the
    // call's own launch below still reads the caller's C.
    cuda::check(res.drv.cuMemAlloc(&res.scratch, size_t(p.rows) * size_t(p.ldd) * 2),
                "cuMemAlloc (grouped GEMM autotune scratch)");
    q.d = reinterpret_cast<void*>(res.scratch);
  }
  cuda::check(res.drv.cuEventCreate(&res.start, CU_EVENT_DEFAULT), "cuEventCreate");
  cuda::check(res.drv.cuEventCreate(&res.stop, CU_EVENT_DEFAULT), "cuEventCreate");
  const CUstream s = static_cast<CUstream>(stream);
  constexpr int kRounds = 3, kReps = 5;
  std::vector<std::vector<float>> times(cands.size());
  for (size_t i = 0; i < cands.size(); ++i)
    if (kernels[i]) launch(q, cands[i], *kernels[i], stream);  // warm-up
  for (int r = 0; r < kRounds; ++r) {                          // interleaved rounds
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!kernels[i]) continue;
      cuda::check(res.drv.cuEventRecord(res.start, s), "cuEventRecord");
      for (int j = 0; j < kReps; ++j) launch(q, cands[i], *kernels[i], stream);
      cuda::check(res.drv.cuEventRecord(res.stop, s), "cuEventRecord");
      cuda::check(res.drv.cuEventSynchronize(res.stop), "cuEventSynchronize (autotune)");
      float ms = 0;
      cuda::check(res.drv.cuEventElapsedTime(&ms, res.start, res.stop), "cuEventElapsedTime");
      times[i].push_back(ms * 1000.0f / kReps);
    }
  }
  size_t best = 0;
  int timed = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (times[i].empty()) continue;
    ++timed;
    log_debug("grouped GEMM autotune " + key.text() + ": " + cands[i].key() + " " +
              std::to_string(median(times[i])) + " us");
    if (median(times[i]) < median(times[best])) best = i;
  }
  PersistedPlan rec;
  rec.config = cands[best];
  rec.tuned_us = median(times[best]);
  rec.heuristic_us = median(times[0]);
  rec.candidates = timed;
  persist(key, rec);
  {
    std::lock_guard<std::mutex> lock(plans_mu_);
    plans_[key] = cands[best];
  }
  log_info("grouped GEMM autotune " + key.text() + ": " + cands[best].key() + " (" +
           std::to_string(rec.tuned_us) + " us; the heuristic's " + cands[0].key() + ": " +
           std::to_string(rec.heuristic_us) + " us; " + std::to_string(timed) + " timed)");
  return cands[best];
}

void GroupedGemm::persist(const PlanKey& key, const PersistedPlan& plan) {
  Cache* cache = compiler_.cache();
  if (!cache || !cache->disk_usable()) return;
  cache->put_shared_value(kPlanNamespace, persist_key(key, validators_),
                          encode_plan(key, validators_, plan));
}

void GroupedGemm::check_offsets(const Problem& p, void* stream) {
  {
    std::lock_guard<std::mutex> lock(check_mu_);
    if (!check_kernel_) {
      CompileOptions o;
      o.target = "sm_" + std::to_string(cc_);
      o.name = "kjit_grouped_check.cu";
      KernelCreation made =
          Kernel::create(compiler_, check_source(), kCheckKernelName, &o, device_, 0);
      if (!made.kernel) {
        std::string msg =
            "grouped GEMM offset check kernel failed to compile: " + made.failure.message;
        if (made.failure.entry) msg += "\n" + made.failure.entry->log;
        fail(made.failure.status ? made.failure.status : KJIT_ERROR_COMPILE, msg);
      }
      const cuda::ContextChoice ctx = cuda::choose_context(device_);
      cuda::ScopedContext scope(ctx.ctx);
      const cuda::Driver& drv = cuda::driver();
      CUdeviceptr rec = 0;
      cuda::check(drv.cuMemAlloc(&rec, sizeof(CheckRecord)), "cuMemAlloc (offset record)");
      const CUresult r = drv.cuMemsetD8(rec, 0, sizeof(CheckRecord));
      if (r != CUDA_SUCCESS) {
        drv.cuMemFree(rec);
        cuda::throw_error(r, "cuMemsetD8 (offset record)");
      }
      record_ = rec;
      record_ctx_ = ctx.ctx;
      check_kernel_ = std::move(made.kernel);
    }
  }
  const void* offs = p.offs;
  int groups = p.groups, rows = p.rows;
  unsigned call = calls_.fetch_add(1, std::memory_order_relaxed) + 1;
  unsigned long long record = record_;
  void* args[] = {&offs, &groups, &rows, &call, &record};
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  cfg.grid[0] = 1;
  cfg.block[0] = kCheckThreads;
  cfg.stream = stream;
  check_kernel_->launch(cfg, args, 5);
}

std::string GroupedGemm::offsets_status() {
  if (!opts_.check_offsets)
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "kjit_grouped_gemm_offsets_status: the handle was created without check_offsets, so "
         "nothing is recorded");
  std::lock_guard<std::mutex> lock(check_mu_);
  if (!record_) return {};
  cuda::ScopedContext scope(static_cast<CUcontext>(record_ctx_));
  const cuda::Driver& drv = cuda::driver();
  CheckRecord r;
  cuda::check(drv.cuMemcpyDtoH(&r, CUdeviceptr(record_), sizeof r),
              "cuMemcpyDtoH (grouped GEMM offset record)");
  if (!r.recorded && !r.bad_calls) return {};
  cuda::check(drv.cuMemsetD8(CUdeviceptr(record_), 0, sizeof r),
              "cuMemsetD8 (grouped GEMM offset record)");
  return describe(r);
}

}  // namespace kjit::grouped
