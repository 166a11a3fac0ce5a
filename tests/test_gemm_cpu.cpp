// GEMM tests that need no GPU: argument validation, the no-GPU status, plan keys, the
// persisted plan format, handle lifetime, and that cuBLASLt stays unloaded until used.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "blas/lt.h"
#include "blas/plan.h"
#include "kjit/kjit.h"
#include "kjit/gemm.h"
#include "support/test_support.h"
#include "util/sha256.h"

namespace {

using kjit::blas::DeviceInfo;
using kjit::blas::PersistedPlan;
using kjit::blas::PlanKey;
using kjit::blas::Problem;

// Fake device addresses: only compared with NULL and checked for alignment.
const void* ptr(uintptr_t v) { return reinterpret_cast<const void*>(v); }
const void* const kA = ptr(0x7f0000000000);
const void* const kB = ptr(0x7f0001000000);
const void* const kC = ptr(0x7f0002000000);
const void* const kD = ptr(0x7f0003000000);
const void* const kBias = ptr(0x7f0004000000);

kjit_gemm_desc base_desc(int32_t type = KJIT_GEMM_F32) {
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.m = 64;
  d.n = 48;
  d.k = 32;
  d.a_type = type;
  return d;
}

// Status of kjit_gemm_check, with the message captured.
struct Result {
  kjit_status status;
  std::string message;
};

Result check(const kjit_gemm_desc* d, const void* A = kA, const void* B = kB,
             const void* C = kC, const void* D = kD, const void* bias = nullptr) {
  const kjit_status s = kjit_gemm_check(d, A, B, C, D, bias);
  return {s, kjit_last_error()};
}

#define EXPECT_STATUS(result, st, needle)                                          \
  do {                                                                             \
    const Result r_ = (result);                                                    \
    EXPECT_EQ(r_.status, st) << r_.message;                                        \
    EXPECT_NE(r_.message.find(needle), std::string::npos)                          \
        << "message \"" << r_.message << "\" does not mention \"" << (needle) << "\""; \
  } while (0)

TEST(GemmCheck, ValidDescriptorsPass) {
  kjit_gemm_desc d = base_desc();
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  EXPECT_STREQ(kjit_last_error(), "");

  for (int32_t t : {KJIT_GEMM_F32, KJIT_GEMM_F16, KJIT_GEMM_BF16, KJIT_GEMM_F64}) {
    d = base_desc(t);
    EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  }
  d = base_desc(KJIT_GEMM_F32);
  d.compute = KJIT_GEMM_COMPUTE_TF32;
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  d = base_desc(KJIT_GEMM_F16);
  d.compute = KJIT_GEMM_COMPUTE_F16;
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  d = base_desc(KJIT_GEMM_BF16);
  d.d_type = KJIT_GEMM_F32;
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();

  // fp8: row-major X * W^T with bf16 output, scales, every epilogue.
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.order = KJIT_GEMM_ROW_MAJOR;
  d.trans_b = KJIT_GEMM_OP_T;
  d.d_type = KJIT_GEMM_BF16;
  d.a_scale = ptr(0x7f0005000000);
  d.b_scale = ptr(0x7f0005000004);
  for (int32_t e = KJIT_GEMM_EPILOGUE_NONE; e <= KJIT_GEMM_EPILOGUE_GELU_BIAS; ++e) {
    d.epilogue = e;
    const bool bias = e == KJIT_GEMM_EPILOGUE_BIAS || e == KJIT_GEMM_EPILOGUE_RELU_BIAS ||
                      e == KJIT_GEMM_EPILOGUE_GELU_BIAS;
    EXPECT_EQ(check(&d, kA, kB, kC, kD, bias ? kBias : nullptr).status, KJIT_OK)
        << e << ": " << kjit_last_error();
  }
  // fp8 D with a 16-bit C and a D scale.
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.b_type = KJIT_GEMM_F8_E5M2;
  d.c_type = KJIT_GEMM_F16;
  d.d_type = KJIT_GEMM_F8_E4M3;
  d.d_scale = ptr(0x7f0005000008);
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  // ... but then C cannot stand in for itself by pointing at D (cuBLASLt needs C == D to
  // have equal types): a NULL C is refused with the reason.
  EXPECT_STATUS(check(&d, kA, kB, nullptr, kD), KJIT_ERROR_INVALID_ARGUMENT,
                "C is NULL but its type (f16) differs from D's (e4m3)");

  // C may be NULL when beta == 0; C may be D with the same layout.
  d = base_desc();
  EXPECT_EQ(check(&d, kA, kB, nullptr, kD).status, KJIT_OK) << kjit_last_error();
  d.beta = 1.0;
  EXPECT_EQ(check(&d, kA, kB, kD, kD).status, KJIT_OK) << kjit_last_error();
}

TEST(GemmCheck, DescriptorItself) {
  EXPECT_STATUS(check(nullptr), KJIT_ERROR_INVALID_ARGUMENT, "desc is NULL");
  kjit_gemm_desc d = base_desc();
  d.struct_size = 8;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "struct_size");
  // A desc from a newer kjit: accepted while the fields this kjit does not know are zero.
  struct {
    kjit_gemm_desc d;
    uint64_t newer;
  } big{base_desc(), 0};
  big.d.struct_size = sizeof big;
  EXPECT_EQ(check(&big.d).status, KJIT_OK) << kjit_last_error();
  big.newer = 1;
  EXPECT_STATUS(check(&big.d), KJIT_ERROR_UNSUPPORTED, "newer kjit");
  d = base_desc();
  d.reserved0 = 1;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "reserved0");

  kjit_gemm_desc init;
  std::memset(&init, 0x5a, sizeof init);
  kjit_gemm_desc_init(&init);
  const kjit_gemm_desc macro = KJIT_GEMM_DESC_INIT;
  EXPECT_EQ(std::memcmp(&init, &macro, sizeof init), 0);
  (kjit_gemm_desc_init)(nullptr);  // the 0.1.0 function ignores NULL
  kjit_gemm_options o1, o2 = KJIT_GEMM_OPTIONS_INIT;
  std::memset(&o1, 0x5a, sizeof o1);
  kjit_gemm_options_init(&o1);
  EXPECT_EQ(std::memcmp(&o1, &o2, sizeof o1), 0);
}

TEST(GemmCheck, SizesNamed) {
  struct Case {
    int64_t kjit_gemm_desc::*field;
    int64_t value;
    const char* needle;
  } cases[] = {
      {&kjit_gemm_desc::m, 0, "desc->m must be >= 1 (got 0)"},
      {&kjit_gemm_desc::n, -3, "desc->n must be >= 1 (got -3)"},
      {&kjit_gemm_desc::k, 0, "desc->k must be >= 1"},
      {&kjit_gemm_desc::m, int64_t(INT_MAX) + 1, "desc->m is too large"},
      {&kjit_gemm_desc::batch_count, 0, "desc->batch_count must be >= 1"},
      {&kjit_gemm_desc::lda, -1, "desc->lda must be >= 0"},
  };
  for (const Case& c : cases) {
    kjit_gemm_desc d = base_desc();
    d.*c.field = c.value;
    EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, c.needle);
  }
}

TEST(GemmCheck, LeadingDimensionsAndStrides) {
  // Column-major, no transpose: A is m x k (lda >= m), B is k x n (ldb >= k).
  kjit_gemm_desc d = base_desc();
  d.lda = 63;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->lda (63) must be >= 64");
  d.lda = 64;
  EXPECT_EQ(check(&d).status, KJIT_OK);
  d.ldb = 31;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->ldb (31) must be >= 32");
  // Transposed A is stored k x m: lda >= k.
  d = base_desc();
  d.trans_a = KJIT_GEMM_OP_T;
  d.lda = 32;
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  d.lda = 31;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "A is stored 32 x 64 column-major");
  // Row-major: the leading dimension covers a row.
  d = base_desc();
  d.order = KJIT_GEMM_ROW_MAJOR;
  d.ldc = 47;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->ldc (47) must be >= 48");
  d.ldc = 0;
  d.ldd = 40;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->ldd");
  // Batches: D matrices must not overlap; inputs may.
  d = base_desc();
  d.batch_count = 4;
  d.stride_d = 64 * 48 - 1;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->stride_d");
  d.stride_d = 0;
  d.stride_a = 5;
  EXPECT_EQ(check(&d).status, KJIT_OK) << kjit_last_error();
  d.stride_b = -1;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->stride_b must be >= 0");
  d = base_desc();
  d.batch_count = 4;
  d.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  d.stride_bias = -2;
  EXPECT_STATUS(check(&d, kA, kB, kC, kD, kBias), KJIT_ERROR_INVALID_ARGUMENT, "stride_bias");
  // Sizes whose byte count overflows.
  d = base_desc();
  d.m = INT_MAX;
  d.lda = int64_t(1) << 60;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "overflow");
}

TEST(GemmCheck, EnumsNamed) {
  struct Case {
    int32_t kjit_gemm_desc::*field;
    int32_t value;
    const char* needle;
  } cases[] = {
      {&kjit_gemm_desc::order, 2, "desc->order: unknown value 2"},
      {&kjit_gemm_desc::trans_a, 3, "desc->trans_a"},
      {&kjit_gemm_desc::trans_b, -1, "desc->trans_b"},
      {&kjit_gemm_desc::a_type, 0, "desc->a_type must be set"},
      {&kjit_gemm_desc::a_type, 99, "desc->a_type: unknown value 99"},
      {&kjit_gemm_desc::b_type, 7, "desc->b_type"},
      {&kjit_gemm_desc::c_type, -2, "desc->c_type"},
      {&kjit_gemm_desc::d_type, 42, "desc->d_type"},
      {&kjit_gemm_desc::bias_type, 8, "desc->bias_type"},
      {&kjit_gemm_desc::compute, 7, "desc->compute"},
      {&kjit_gemm_desc::epilogue, 6, "desc->epilogue"},
  };
  for (const Case& c : cases) {
    kjit_gemm_desc d = base_desc();
    d.*c.field = c.value;
    EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, c.needle);
  }
}

TEST(GemmCheck, UnsupportedCombinationsNamed) {
  kjit_gemm_desc d = base_desc(KJIT_GEMM_F16);
  d.b_type = KJIT_GEMM_BF16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "mixed input types");
  d = base_desc(KJIT_GEMM_BF16);
  d.compute = KJIT_GEMM_COMPUTE_TF32;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "compute TF32 with bf16");
  d = base_desc(KJIT_GEMM_F16);
  d.compute = KJIT_GEMM_COMPUTE_F16;
  d.d_type = KJIT_GEMM_F32;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "compute F16 needs f16 C and D");
  d = base_desc(KJIT_GEMM_F32);
  d.d_type = KJIT_GEMM_F16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "f32 inputs need f32 C and D");
  d = base_desc(KJIT_GEMM_F32);
  d.compute = KJIT_GEMM_COMPUTE_F64;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "compute F64 with f32");
  d = base_desc(KJIT_GEMM_F64);
  d.compute = KJIT_GEMM_COMPUTE_F32;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "f64 needs compute F64");
  d = base_desc(KJIT_GEMM_BF16);
  d.c_type = KJIT_GEMM_F32;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "C is f32 but D is bf16");
  d = base_desc(KJIT_GEMM_F8_E5M2);
  d.d_type = KJIT_GEMM_BF16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "both A and B E5M2");
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.b_type = KJIT_GEMM_F16;
  d.d_type = KJIT_GEMM_F16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "mixed fp8 and non-fp8");
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.d_type = KJIT_GEMM_BF16;
  d.compute = KJIT_GEMM_COMPUTE_TF32;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "fp8 GEMM needs compute F32");
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.c_type = KJIT_GEMM_F32;
  d.d_type = KJIT_GEMM_BF16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "f32 C needs f32 D");
  d = base_desc(KJIT_GEMM_F16);
  d.d_type = KJIT_GEMM_F8_E4M3;
  d.c_type = KJIT_GEMM_F16;
  EXPECT_STATUS(check(&d), KJIT_ERROR_UNSUPPORTED, "fp8 C or D needs fp8 A and B");
  d = base_desc(KJIT_GEMM_F16);
  d.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  d.bias_type = KJIT_GEMM_F8_E4M3;
  EXPECT_STATUS(check(&d, kA, kB, kC, kD, kBias), KJIT_ERROR_UNSUPPORTED, "bias_type e4m3");
  // fp8 needs its output types spelled out.
  d = base_desc(KJIT_GEMM_F8_E4M3);
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->d_type must be set");
  d.d_type = KJIT_GEMM_F8_E4M3;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->c_type must be set");
}

TEST(GemmCheck, PointersNamed) {
  kjit_gemm_desc d = base_desc();
  EXPECT_STATUS(check(&d, nullptr), KJIT_ERROR_INVALID_ARGUMENT, "A is NULL");
  EXPECT_STATUS(check(&d, kA, nullptr), KJIT_ERROR_INVALID_ARGUMENT, "B is NULL");
  EXPECT_STATUS(check(&d, kA, kB, kC, nullptr), KJIT_ERROR_INVALID_ARGUMENT, "D is NULL");
  d.beta = 0.5;
  EXPECT_STATUS(check(&d, kA, kB, nullptr, kD), KJIT_ERROR_INVALID_ARGUMENT,
                "C is NULL but desc->beta is not 0");
  // Misaligned for the element type.
  d = base_desc(KJIT_GEMM_F32);
  EXPECT_STATUS(check(&d, ptr(0x7f0000000002)), KJIT_ERROR_INVALID_ARGUMENT,
                "A (0x7f0000000002) is misaligned: f32 needs 4-byte alignment");
  EXPECT_STATUS(check(&d, kA, ptr(0x7f0001000001)), KJIT_ERROR_INVALID_ARGUMENT, "B (");
  EXPECT_STATUS(check(&d, kA, kB, ptr(0x7f0002000006)), KJIT_ERROR_INVALID_ARGUMENT, "C (");
  EXPECT_STATUS(check(&d, kA, kB, kC, ptr(0x7f0003000003)), KJIT_ERROR_INVALID_ARGUMENT, "D (");
  d = base_desc(KJIT_GEMM_F64);
  EXPECT_STATUS(check(&d, ptr(0x7f0000000004)), KJIT_ERROR_INVALID_ARGUMENT, "8-byte alignment");
  d = base_desc(KJIT_GEMM_BF16);
  EXPECT_EQ(check(&d, ptr(0x7f0000000002)).status, KJIT_OK) << kjit_last_error();
  // Bias.
  d = base_desc(KJIT_GEMM_F16);
  d.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "bias is NULL but the epilogue (gelu+bias)");
  EXPECT_STATUS(check(&d, kA, kB, kC, kD, ptr(0x7f0004000001)), KJIT_ERROR_INVALID_ARGUMENT,
                "bias (");
  d.epilogue = KJIT_GEMM_EPILOGUE_RELU;
  EXPECT_STATUS(check(&d, kA, kB, kC, kD, kBias), KJIT_ERROR_INVALID_ARGUMENT,
                "bias is given but the epilogue (relu) has none");
  // Scales only for fp8, aligned for a float.
  d = base_desc(KJIT_GEMM_BF16);
  d.a_scale = ptr(0x7f0005000000);
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->a_scale is set but A is bf16");
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.d_type = KJIT_GEMM_BF16;
  d.d_scale = ptr(0x7f0005000000);
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->d_scale is set but D is bf16");
  d.d_scale = nullptr;
  d.b_scale = ptr(0x7f0005000002);
  EXPECT_STATUS(check(&d), KJIT_ERROR_INVALID_ARGUMENT, "desc->b_scale (");
  // C and D the same buffer with different layouts.
  d = base_desc();
  d.ldc = 80;
  EXPECT_STATUS(check(&d, kA, kB, kD, kD), KJIT_ERROR_INVALID_ARGUMENT, "same buffer");
  // C NULL with a C type that differs from D's (fp8 D): cuBLASLt rejects C == D with
  // different types (CUBLAS_STATUS_INVALID_VALUE on an H200), so a real C is required.
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.c_type = KJIT_GEMM_BF16;
  d.d_type = KJIT_GEMM_F8_E4M3;
  EXPECT_STATUS(check(&d, kA, kB, nullptr, kD), KJIT_ERROR_INVALID_ARGUMENT,
                "needs a real C buffer");
  EXPECT_EQ(check(&d, kA, kB, kC, kD).status, KJIT_OK) << kjit_last_error();
  d.beta = 1.0;
  EXPECT_STATUS(check(&d, kA, kB, nullptr, kD), KJIT_ERROR_INVALID_ARGUMENT,
                "C is NULL but desc->beta is not 0");
}

TEST(GemmPrepare, RowMajorBecomesColumnMajor) {
  kjit_gemm_desc d = base_desc(KJIT_GEMM_BF16);
  d.order = KJIT_GEMM_ROW_MAJOR;
  d.trans_b = KJIT_GEMM_OP_T;  // Y = X * W^T
  d.ldb = 40;
  d.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  const Problem p = kjit::blas::prepare(&d, kA, kB, kC, kD, kBias);
  EXPECT_TRUE(p.swapped);
  EXPECT_EQ(p.m, 48);
  EXPECT_EQ(p.n, 64);
  EXPECT_EQ(p.k, 32);
  EXPECT_EQ(p.op_a, KJIT_GEMM_OP_T);  // W, stored n x k row-major = k x n column-major
  EXPECT_EQ(p.op_b, KJIT_GEMM_OP_N);
  EXPECT_EQ(p.a, kB);
  EXPECT_EQ(p.b, kA);
  EXPECT_EQ(p.lda, 40);
  EXPECT_EQ(p.ldb, 32);
  EXPECT_EQ(p.ldc, 48);
  EXPECT_EQ(p.ldd, 48);
  EXPECT_EQ(p.d_type, KJIT_GEMM_BF16);
  EXPECT_EQ(p.bias_type, KJIT_GEMM_BF16);
  EXPECT_EQ(p.compute, KJIT_GEMM_COMPUTE_F32);

  // The same product asked column-major selects the same plan.
  kjit_gemm_desc c = base_desc(KJIT_GEMM_BF16);
  c.m = 48;
  c.n = 64;
  c.trans_a = KJIT_GEMM_OP_T;
  c.lda = 40;
  c.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  const Problem q = kjit::blas::prepare(&c, kB, kA, kC, kD, kBias);
  DeviceInfo dev;
  dev.cc_major = 9;
  dev.sm_count = 132;
  EXPECT_TRUE(kjit::blas::make_key(p, dev, 1 << 20) == kjit::blas::make_key(q, dev, 1 << 20));

  // Defaults: C NULL becomes D with D's layout; fp8 bias type follows cuBLASLt's rules.
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.d_type = KJIT_GEMM_F32;
  d.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  const Problem f = kjit::blas::prepare(&d, kA, kB, nullptr, kD, kBias);
  EXPECT_EQ(f.c, kD);
  EXPECT_EQ(f.c_type, KJIT_GEMM_F32);
  EXPECT_EQ(f.bias_type, KJIT_GEMM_BF16);
  d.d_type = KJIT_GEMM_F16;
  EXPECT_EQ(kjit::blas::prepare(&d, kA, kB, nullptr, kD, kBias).bias_type, KJIT_GEMM_F16);
  // fp8 with beta 0: D stands in for C even when C is given (C is not read).
  d.ldc = 100;
  const Problem f2 = kjit::blas::prepare(&d, kA, kB, kC, kD, kBias);
  EXPECT_EQ(f2.c, kD);
  EXPECT_EQ(f2.ldc, f2.ldd);
  EXPECT_EQ(f2.c_type, KJIT_GEMM_F16);
  d.beta = 1.0;
  const Problem f3 = kjit::blas::prepare(&d, kA, kB, kC, kD, kBias);
  EXPECT_EQ(f3.c, kC);
  EXPECT_EQ(f3.ldc, 100);
  // Other types keep their C when beta is 0.
  kjit_gemm_desc h = base_desc(KJIT_GEMM_F16);
  EXPECT_EQ(kjit::blas::prepare(&h, kA, kB, kC, kD, nullptr).c, kC);
  EXPECT_EQ(kjit::blas::prepare(&h, kA, kB, nullptr, kD, nullptr).c, kD);
  // Strides default to packed in a batch.
  d = base_desc();
  d.batch_count = 3;
  d.ldd = 70;
  const Problem b = kjit::blas::prepare(&d, kA, kB, kC, kD, nullptr);
  EXPECT_EQ(b.stride_a, 64 * 32);
  EXPECT_EQ(b.stride_b, 32 * 48);
  EXPECT_EQ(b.stride_c, 64 * 48);
  EXPECT_EQ(b.stride_d, 70 * 48);
}

DeviceInfo h100() {
  DeviceInfo d;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.name = "NVIDIA H100 80GB HBM3";
  d.driver_version = 13000;
  d.lt_version = 130100;
  return d;
}

TEST(GemmPlanKey, EveryFieldSelects) {
  const DeviceInfo dev = h100();
  const uint64_t cap = 32 << 20;
  std::vector<PlanKey> keys;
  std::vector<std::string> names;
  const auto add = [&](const std::string& name, const kjit_gemm_desc& d, const void* A,
                       const void* B, const void* C, const void* D, const void* bias,
                       const DeviceInfo& di = h100(), uint64_t c = 32 << 20) {
    keys.push_back(kjit::blas::make_key(kjit::blas::prepare(&d, A, B, C, D, bias), di, c));
    names.push_back(name);
  };
  const kjit_gemm_desc b = base_desc(KJIT_GEMM_F16);
  add("base", b, kA, kB, kC, kD, nullptr);
  kjit_gemm_desc d = b;
  d.m = 65; add("m", d, kA, kB, kC, kD, nullptr);
  d = b; d.n = 49; add("n", d, kA, kB, kC, kD, nullptr);
  d = b; d.k = 33; add("k", d, kA, kB, kC, kD, nullptr);
  d = b; d.trans_a = 1; add("trans_a", d, kA, kB, kC, kD, nullptr);
  d = b; d.trans_b = 1; add("trans_b", d, kA, kB, kC, kD, nullptr);
  d = b; d.order = KJIT_GEMM_ROW_MAJOR; add("order", d, kA, kB, kC, kD, nullptr);
  d = b; d.lda = 128; add("lda", d, kA, kB, kC, kD, nullptr);
  d = b; d.ldb = 128; add("ldb", d, kA, kB, kC, kD, nullptr);
  d = b; d.ldc = 128; add("ldc", d, kA, kB, kC, kD, nullptr);
  d = b; d.ldd = 128; add("ldd", d, kA, kB, kC, kD, nullptr);
  d = b; d.d_type = KJIT_GEMM_F32; add("d_type", d, kA, kB, kC, kD, nullptr);
  d = b; d.compute = KJIT_GEMM_COMPUTE_F16; add("compute", d, kA, kB, kC, kD, nullptr);
  d = base_desc(KJIT_GEMM_BF16); add("a_type", d, kA, kB, kC, kD, nullptr);
  d = b; d.epilogue = KJIT_GEMM_EPILOGUE_RELU; add("relu", d, kA, kB, kC, kD, nullptr);
  d = b; d.epilogue = KJIT_GEMM_EPILOGUE_GELU; add("gelu", d, kA, kB, kC, kD, nullptr);
  d = b; d.epilogue = KJIT_GEMM_EPILOGUE_BIAS; add("bias", d, kA, kB, kC, kD, kBias);
  d.bias_type = KJIT_GEMM_F32; add("bias_type", d, kA, kB, kC, kD, kBias);
  d.bias_type = 0; add("bias alignment", d, kA, kB, kC, kD, ptr(0x7f0004000002));
  d = b; d.epilogue = KJIT_GEMM_EPILOGUE_RELU_BIAS; add("relu+bias", d, kA, kB, kC, kD, kBias);
  d = b; d.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS; add("gelu+bias", d, kA, kB, kC, kD, kBias);
  d = b; d.batch_count = 2; add("batch", d, kA, kB, kC, kD, nullptr);
  d.stride_a = 4096; add("stride_a", d, kA, kB, kC, kD, nullptr);
  d.stride_a = 0; d.stride_b = 4096; add("stride_b", d, kA, kB, kC, kD, nullptr);
  d.stride_b = 0; d.stride_c = 4096; add("stride_c", d, kA, kB, kC, kD, nullptr);
  d.stride_c = 0; d.stride_d = 4096; add("stride_d", d, kA, kB, kC, kD, nullptr);
  d.stride_d = 0; d.epilogue = KJIT_GEMM_EPILOGUE_BIAS; d.stride_bias = 64;
  add("stride_bias", d, kA, kB, kC, kD, kBias);
  add("align A", b, ptr(0x7f0000000010), kB, kC, kD, nullptr);
  add("align B", b, kA, ptr(0x7f0001000002), kC, kD, nullptr);
  add("align C", b, kA, kB, ptr(0x7f0002000040), kD, nullptr);
  add("align D", b, kA, kB, kC, ptr(0x7f0003000080), nullptr);
  add("in place", b, kA, kB, kD, kD, nullptr);
  DeviceInfo other = dev;
  other.cc_minor = 1; add("cc", b, kA, kB, kC, kD, nullptr, other);
  other = dev;
  other.sm_count = 114; add("sm count", b, kA, kB, kC, kD, nullptr, other);
  add("workspace cap", b, kA, kB, kC, kD, nullptr, dev, cap / 2);
  d = base_desc(KJIT_GEMM_F8_E4M3);
  d.d_type = KJIT_GEMM_BF16;
  add("fp8", d, kA, kB, kC, kD, nullptr);
  d.a_scale = ptr(0x7f0005000000); add("a_scale", d, kA, kB, kC, kD, nullptr);
  d.b_scale = ptr(0x7f0005000000); add("b_scale", d, kA, kB, kC, kD, nullptr);
  d.b_type = KJIT_GEMM_F8_E5M2; add("b_type", d, kA, kB, kC, kD, nullptr);
  d.c_type = KJIT_GEMM_F16; d.d_type = KJIT_GEMM_F8_E4M3; add("c_type", d, kA, kB, kC, kD, nullptr);
  d.d_scale = ptr(0x7f0005000000); add("d_scale", d, kA, kB, kC, kD, nullptr);

  const std::string vals = kjit::blas::validators(dev);
  std::set<std::string> persisted;
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i].f[PlanKey::kKind], int64_t(kjit::blas::PlanKind::kGemm));
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(keys[i] == keys[j]) << names[i] << " collides with " << names[j];
    persisted.insert(kjit::blas::persist_key(keys[i], vals));
  }
  EXPECT_EQ(persisted.size(), keys.size());

  // Equal problems give equal keys and hashes; alignment beyond 256 does not matter.
  const auto key_of = [&](const void* A) {
    return kjit::blas::make_key(kjit::blas::prepare(&b, A, kB, kC, kD, nullptr), dev, cap);
  };
  EXPECT_TRUE(key_of(ptr(0x7f0000000100)) == key_of(ptr(0x7f0000010000)));
  EXPECT_EQ(kjit::blas::PlanKeyHash()(key_of(kA)), kjit::blas::PlanKeyHash()(key_of(kA)));
  // Another kind with the same fields is another key.
  PlanKey k = keys[0];
  k.f[PlanKey::kKind] = 2;
  EXPECT_FALSE(k == keys[0]);
  EXPECT_NE(kjit::blas::persist_key(k, vals), kjit::blas::persist_key(keys[0], vals));
}

TEST(GemmPlanKey, ValidatorsScopePersistedKeys) {
  const DeviceInfo dev = h100();
  kjit_gemm_desc d = base_desc(KJIT_GEMM_BF16);
  const PlanKey key = kjit::blas::make_key(kjit::blas::prepare(&d, kA, kB, kC, kD, nullptr), dev, 1);
  std::set<std::string> seen{kjit::blas::persist_key(key, kjit::blas::validators(dev))};
  DeviceInfo o = dev;
  o.lt_version = 130101;
  seen.insert(kjit::blas::persist_key(key, kjit::blas::validators(o)));
  o = dev;
  o.driver_version = 13010;
  seen.insert(kjit::blas::persist_key(key, kjit::blas::validators(o)));
  o = dev;
  o.name = "NVIDIA H200";
  seen.insert(kjit::blas::persist_key(key, kjit::blas::validators(o)));
  o = dev;
  o.cc_major = 10;
  seen.insert(kjit::blas::persist_key(key, kjit::blas::validators(o)));
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_NE(kjit::blas::validators(dev).find("cublasLt=130100"), std::string::npos);
  EXPECT_NE(kjit::blas::validators(dev).find("driver=13000"), std::string::npos);
  EXPECT_NE(kjit::blas::validators(dev).find("device=NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(kjit::blas::validators(dev).find("cc=9.0"), std::string::npos);
  EXPECT_NE(kjit::blas::validators(dev).find("kjit-gemm-plan/1"), std::string::npos);
}

PersistedPlan sample_plan() {
  PersistedPlan p;
  for (size_t i = 0; i < p.algo.size(); ++i) p.algo[i] = uint8_t(i * 7 + 3);
  p.config.algo_id = 66;
  p.config.tile = 18;
  p.config.stages = 21;
  p.config.split_k = 1;
  p.config.reduction = 0;
  p.config.swizzle = 1;
  p.config.custom = 3;
  p.config.inner_shape = 0;
  p.config.cluster_shape = 2;
  p.workspace = 4 << 20;
  p.tuned = true;
  p.tuned_us = 123.5;
  return p;
}

TEST(GemmPersist, RoundTrip) {
  const DeviceInfo dev = h100();
  kjit_gemm_desc d = base_desc(KJIT_GEMM_BF16);
  const PlanKey key = kjit::blas::make_key(kjit::blas::prepare(&d, kA, kB, kC, kD, nullptr), dev, 1);
  const std::string vals = kjit::blas::validators(dev);
  const PersistedPlan in = sample_plan();
  const std::string blob = kjit::blas::encode_plan(key, vals, in);
  std::string why;
  const auto out = kjit::blas::decode_plan(blob, key, vals, &why);
  ASSERT_TRUE(out.has_value()) << why;
  EXPECT_EQ(out->algo, in.algo);
  EXPECT_EQ(out->config.algo_id, 66);
  EXPECT_EQ(out->config.tile, 18u);
  EXPECT_EQ(out->config.stages, 21u);
  EXPECT_EQ(out->config.swizzle, 1u);
  EXPECT_EQ(out->config.custom, 3u);
  EXPECT_EQ(out->config.cluster_shape, 2u);
  EXPECT_EQ(out->workspace, uint64_t(4) << 20);
  EXPECT_TRUE(out->tuned);
  EXPECT_DOUBLE_EQ(out->tuned_us, 123.5);
  // Deterministic encoding.
  EXPECT_EQ(kjit::blas::encode_plan(key, vals, in), blob);
}

// The record's bytes are pinned (docs/formats.md, "GEMM plan record"): a change of codec
// that changes them without a new format version would misread the records already stored.
TEST(GemmPersist, BytesArePinned) {
  DeviceInfo dev = h100();
  kjit_gemm_desc d = base_desc(KJIT_GEMM_BF16);
  const PlanKey key = kjit::blas::make_key(kjit::blas::prepare(&d, kA, kB, kC, kD, nullptr), dev, 1);
  const std::string blob = kjit::blas::encode_plan(key, "vals", sample_plan());
  EXPECT_EQ(blob.substr(0, 8), std::string("KJGP\x01\0\0\0", 8));
  EXPECT_EQ(kjit::to_hex(kjit::sha256(blob)), "bccb6dad13eb99b9e09483e322978f7de9300a129c61597e07857c20085f9ecf");
}

TEST(GemmPersist, DamageIsDetected) {
  const DeviceInfo dev = h100();
  kjit_gemm_desc d = base_desc(KJIT_GEMM_BF16);
  const PlanKey key = kjit::blas::make_key(kjit::blas::prepare(&d, kA, kB, kC, kD, nullptr), dev, 1);
  const std::string vals = kjit::blas::validators(dev);
  const std::string blob = kjit::blas::encode_plan(key, vals, sample_plan());
  std::string why;
  // Every truncation.
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_FALSE(kjit::blas::decode_plan(blob.substr(0, n), key, vals, &why)) << n;
  // Every single-byte flip.
  for (size_t i = 0; i < blob.size(); ++i) {
    std::string bad = blob;
    bad[i] = char(bad[i] ^ 0x40);
    EXPECT_FALSE(kjit::blas::decode_plan(bad, key, vals, &why)) << i;
  }
  EXPECT_FALSE(kjit::blas::decode_plan(blob + "x", key, vals, &why));
  // Other validators or another key (a record stored under the wrong key).
  DeviceInfo o = dev;
  o.lt_version = 130200;
  EXPECT_FALSE(kjit::blas::decode_plan(blob, key, kjit::blas::validators(o), &why));
  EXPECT_EQ(why, "other validators");
  PlanKey k2 = key;
  k2.f[PlanKey::kM] += 1;
  EXPECT_FALSE(kjit::blas::decode_plan(blob, k2, vals, &why));
  EXPECT_EQ(why, "other key");
  // A well-formed record with a valid checksum but another magic is rejected too.
  std::string body = blob.substr(0, blob.size() - 32);
  body[0] = 'X';
  const kjit::Digest sum = kjit::sha256(body);
  body.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  EXPECT_FALSE(kjit::blas::decode_plan(body, key, vals, &why));
  EXPECT_EQ(why, "bad magic");
}

TEST(GemmHandle, BadHandlesAndOptions) {
  kjit_gemm_desc d = base_desc();
  EXPECT_EQ(kjit_gemm_run(nullptr, &d, kA, kB, kC, const_cast<void*>(kD), nullptr, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(kjit_last_error()).find("invalid gemm handle"), std::string::npos);
  kjit_gemm_stats st{};
  st.struct_size = sizeof st;
  EXPECT_EQ(kjit_gemm_stats_get(nullptr, &st), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_gemm_clear_plans(nullptr), KJIT_ERROR_INVALID_HANDLE);
  kjit_gemm_destroy(nullptr);

  // A handle of another kind is not a GEMM handle.
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.memory_only = 1;
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
  kjit_gemm* fake = reinterpret_cast<kjit_gemm*>(cache);
  EXPECT_EQ(kjit_gemm_run(fake, &d, kA, kB, kC, const_cast<void*>(kD), nullptr, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_gemm_stats_get(fake, &st), KJIT_ERROR_INVALID_HANDLE);
  kjit_gemm_destroy(fake);  // not ours: ignored, the cache stays usable
  kjit_cache_stats cs{};
  cs.struct_size = sizeof cs;
  EXPECT_EQ(kjit_cache_stats_get(cache, &cs), KJIT_OK) << kjit_last_error();

  kjit_gemm* g = reinterpret_cast<kjit_gemm*>(0x1);
  EXPECT_EQ(kjit_gemm_create(nullptr, 0, nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_gemm_create(reinterpret_cast<kjit_cache*>(&d), 0, nullptr, &g),
            KJIT_ERROR_INVALID_HANDLE);
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.struct_size = 4;
  EXPECT_EQ(kjit_gemm_create(cache, 0, &o, &g), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("options->struct_size"), std::string::npos);
  o = KJIT_GEMM_OPTIONS_INIT;
  o.autotune_candidates = 1000;
  EXPECT_EQ(kjit_gemm_create(cache, 0, &o, &g), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("autotune_candidates"), std::string::npos);
  EXPECT_EQ(kjit_gemm_create(cache, -1, nullptr, &g), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("negative"), std::string::npos);
  // No such device: CUDA unavailable, with or without a GPU on this machine.
  EXPECT_EQ(kjit_gemm_create(cache, 4096, nullptr, &g), KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_STRNE(kjit_last_error(), "");
  EXPECT_EQ(g, reinterpret_cast<kjit_gemm*>(0x1));  // untouched on failure
  kjit_cache_close(cache);
}

TEST(GemmHandle, NoGpuStatusAndNoCrash) {
  const std::string why = kjit::test::gpu_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present; the no-GPU path is tested without one";
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
  for (int i = 0; i < 20; ++i) {
    kjit_gemm* g = nullptr;
    kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
    o.autotune = i % 2;
    const kjit_status s = kjit_gemm_create(i % 3 ? cache : nullptr, i % 2, &o, &g);
    EXPECT_EQ(s, KJIT_ERROR_CUDA_UNAVAILABLE) << kjit_last_error();
    EXPECT_NE(std::string(kjit_last_error()).find("CUDA"), std::string::npos) << kjit_last_error();
    EXPECT_EQ(g, nullptr);
    kjit_gemm_destroy(g);
  }
  // Validation still works without a GPU.
  kjit_gemm_desc d = base_desc();
  EXPECT_EQ(kjit_gemm_check(&d, kA, kB, kC, kD, nullptr), KJIT_OK);
  kjit_cache_close(cache);
}

// ---- cuBLASLt is loaded only when GEMM is used (checked in a fresh process) -----------

bool maps_contain(const char* needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

// Runs this test binary with one test selected and KJIT_GEMM_TEST_CHILD set; returns the
// file the child writes ("ok" when every check there passed).
std::string run_child(const std::string& test, const std::string& report,
                      const std::vector<std::pair<std::string, std::string>>& env) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "readlink failed";
  self[n] = '\0';
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("KJIT_GEMM_TEST_CHILD", report.c_str(), 1);
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    const std::string filter = "--gtest_filter=" + test;
    execl(self, self, filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(report);
  std::stringstream s;
  s << in.rdbuf();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "child failed (status " + std::to_string(status) + "): " + s.str();
  return s.str();
}

TEST(GemmLoad, CublasLtNotLoadedUntilUsed) {
  kjit::test::TempDir dir;
  const std::string report = dir.file("report");
  EXPECT_EQ(run_child("GemmLoadChild.Sequence", report, {}), "ok");
}

TEST(GemmLoadChild, Sequence) {
  const char* report = std::getenv("KJIT_GEMM_TEST_CHILD");
  if (!report) GTEST_SKIP() << "runs in a child process of GemmLoad.CublasLtNotLoadedUntilUsed";
  std::ofstream out(report, std::ios::trunc);
  ASSERT_FALSE(maps_contain("libcublasLt")) << "loaded at start";
  // Everything short of a GEMM handle leaves it unloaded: versions, caches, checks, and a
  // handle creation that fails on the device.
  EXPECT_GT(kjit_version(), 0);
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.memory_only = 1;
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK);
  kjit_gemm_desc d = base_desc();
  EXPECT_EQ(kjit_gemm_check(&d, kA, kB, kC, kD, nullptr), KJIT_OK);
  kjit_gemm* g = nullptr;
  EXPECT_EQ(kjit_gemm_create(cache, 4096, nullptr, &g), KJIT_ERROR_CUDA_UNAVAILABLE);
  EXPECT_FALSE(maps_contain("libcublasLt"));
  EXPECT_FALSE(kjit::blas::lt_loaded());
  // Asking for it loads it (or says why it cannot).
  size_t version = 0;
  const kjit_status s = kjit_cublaslt_version(&version);
  if (s == KJIT_OK) {
    EXPECT_GE(version, 130000u);
    EXPECT_TRUE(maps_contain("libcublasLt"));
    EXPECT_TRUE(kjit::blas::lt_loaded());
  } else {
    EXPECT_EQ(s, KJIT_ERROR_CUBLAS);
    EXPECT_NE(std::string(kjit_last_error()).find("libcublasLt.so.13"), std::string::npos);
    EXPECT_FALSE(maps_contain("libcublasLt"));
  }
  EXPECT_EQ(kjit_cublaslt_version(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_cache_close(cache);
  if (!::testing::Test::HasFailure()) out << "ok";
}

}  // namespace
