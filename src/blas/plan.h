// GEMM problems as cuBLASLt sees them, the keys that select a plan, and the persisted
// form of a plan. Everything here is host-only and works without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "kjit/gemm.h"

namespace kjit::blas {

// Kinds of plan. Every key starts with its kind, so keys of different kinds never
// compare equal and never hash to the same persisted key.
enum class PlanKind : int64_t { kGemm = 1 };

// A validated problem in cuBLASLt's column-major terms. A row-major request is turned
// around (D^T = op(B)^T op(A)^T): A and B, m and n, and their fields are exchanged.
struct Problem {
  int32_t op_a = 0, op_b = 0;  // kjit_gemm_op
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;  // never 0 after prepare()
  int32_t a_type = 0, b_type = 0, c_type = 0, d_type = 0;  // kjit_gemm_dtype, resolved
  int32_t bias_type = 0;  // resolved when the epilogue has a bias, else 0
  int32_t compute = 0;    // kjit_gemm_compute, resolved
  int32_t epilogue = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0, stride_bias = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // D when the caller gave NULL
  void* d = nullptr;
  const void* bias = nullptr;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* d_scale = nullptr;
  bool swapped = false;  // the request was row-major
};

// Validates a request and builds its Problem. `desc` is a full-size struct, as the C shim
// copies it (struct_size is not looked at). Throws kjit::Error with
// KJIT_ERROR_INVALID_ARGUMENT or KJIT_ERROR_UNSUPPORTED naming the field.
Problem prepare(const kjit_gemm_desc* desc, const void* A, const void* B, const void* C,
                const void* D, const void* bias);

size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);
const char* compute_name(int32_t compute);
const char* epilogue_name(int32_t epilogue);
bool epilogue_has_bias(int32_t epilogue);
bool is_fp8(int32_t dtype);
// Bytes a matrix of `elements` x elem spans, for scratch buffers.
uint64_t d_footprint_bytes(const Problem& p);
// "m=127 n=255 k=63 op(A)=N op(B)=T A/B/C/D=bf16/bf16/bf16/bf16 compute=f32 ..."
std::string describe(const Problem& p);

// What the plan depends on besides the problem.
struct DeviceInfo {
  int ordinal = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::string name;
  int driver_version = 0;
  size_t lt_version = 0;
};

// Largest power of two dividing the address, capped at 256 (256 for NULL).
uint32_t pointer_alignment(const void* p);

// Everything that selects an algorithm, as fixed-width integers.
struct PlanKey {
  enum Field {
    kKind, kOpA, kOpB, kM, kN, kK, kLda, kLdb, kLdc, kLdd,
    kAType, kBType, kCType, kDType, kBiasType, kCompute, kEpilogue,
    kBatch, kStrideA, kStrideB, kStrideC, kStrideD, kStrideBias,
    kAlignA, kAlignB, kAlignC, kAlignD, kAlignBias, kScales, kInPlace,
    kWorkspaceCap, kCapability, kSmCount,
    kFieldCount
  };
  std::array<int64_t, kFieldCount> f{};
  bool operator==(const PlanKey& o) const { return f == o.f; }
  bool operator!=(const PlanKey& o) const { return f != o.f; }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept;
};

PlanKey make_key(const Problem& p, const DeviceInfo& dev, uint64_t workspace_cap);

// ---- persistence ---------------------------------------------------------------------

constexpr uint32_t kPlanFormat = 1;
constexpr const char* kPlanNamespace = "gemm-plan";

// Decoded configuration of an algorithm (for people and tools; the 64 opaque bytes are
// what cuBLASLt runs).
struct AlgoConfig {
  int32_t algo_id = -1;
  uint32_t tile = 0, stages = 0;
  int32_t split_k = 0;
  uint32_t reduction = 0, swizzle = 0, custom = 0;
  uint32_t inner_shape = 0, cluster_shape = 0;
};

struct PersistedPlan {
  std::array<uint8_t, 64> algo{};  // cublasLtMatmulAlgo_t
  AlgoConfig config;
  uint64_t workspace = 0;  // bytes the algorithm needs
  bool tuned = false;      // chosen by autotuning
  double tuned_us = 0;     // its median time when tuned
};

// "kjit-gemm-plan/1;cublasLt=130100;driver=13000;device=NVIDIA H200;cc=9.0"
std::string validators(const DeviceInfo& dev);
// Key in the cache's kv table: hex SHA-256 of the validators and the plan key.
std::string persist_key(const PlanKey& key, const std::string& validators);
std::string encode_plan(const PlanKey& key, const std::string& validators,
                        const PersistedPlan& plan);
// nullopt when the value is truncated, fails its checksum, has another format, other
// validators or another key; `why` says which.
std::optional<PersistedPlan> decode_plan(const std::string& value, const PlanKey& key,
                                         const std::string& validators, std::string* why);

}  // namespace kjit::blas
