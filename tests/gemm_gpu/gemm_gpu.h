// The GEMM GPU tests' shared parts (tests/gemm_gpu/): host encodings of the element types,
// one problem's data, reference and check, the fixture, the type table and the plan-cache
// helpers, in one namespace (GoogleTest wants one fixture class for a suite in all files).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/handles.h"
#include "blas/gemm.h"
#include "blas/plan.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/gemm.h"
#include "kjit/kjit.h"
#include "support/bf16.h"
#include "support/device_buffer.h"
#include "support/test_support.h"

namespace kjit::test::gemm_gpu {

using kjit::cuda::check;
using kjit::cuda::driver;

// ---- host encodings of the element types ----------------------------------------------

inline uint16_t f32_to_f16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(abs >> 23);
    if (shift > 24) return uint16_t(sign);
    const uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    return uint16_t(sign | (h + ((rem > mid || (rem == mid && (h & 1u))) ? 1u : 0u)));
  }
  return uint16_t(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(float(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(float(mant | 0x400u), int(exp) - 25);
  return sign ? -v : v;
}

using kjit::test::bf16_to_f32;
using kjit::test::f32_to_bf16;

inline float fp8_to_f32(uint8_t v, bool e4m3) {
  const int ebits = e4m3 ? 4 : 5, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int sign = v >> 7, exp = (v >> mbits) & ((1 << ebits) - 1), mant = v & ((1 << mbits) - 1);
  float r;
  if (e4m3 && exp == 15 && mant == 7) return NAN;
  if (!e4m3 && exp == 31) return mant ? NAN : (sign ? -INFINITY : INFINITY);
  if (exp == 0)
    r = std::ldexp(float(mant), 1 - bias - mbits);
  else
    r = std::ldexp(float(mant + (1 << mbits)), exp - bias - mbits);
  return sign ? -r : r;
}

inline uint8_t f32_to_fp8(float f, bool e4m3) {
  // Nearest finite value, ties to even code (random data never sits on a tie).
  uint8_t best = 0;
  float best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_to_f32(uint8_t(c), e4m3);
    if (!std::isfinite(v)) continue;
    const float err = std::fabs(v - f);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = uint8_t(c);
      best_err = err;
    }
  }
  return best;
}

inline size_t esize(int32_t t) {
  return kjit::blas::dtype_size(t);
}

// Rounds `v` to type t; writes its bytes at `dst` and returns the value kept.
inline double store(int32_t t, double v, uint8_t* dst) {
  switch (t) {
    case KJIT_GEMM_F32: {
      const float f = float(v);
      std::memcpy(dst, &f, 4);
      return f;
    }
    case KJIT_GEMM_F64:
      std::memcpy(dst, &v, 8);
      return v;
    case KJIT_GEMM_F16: {
      const uint16_t h = f32_to_f16(float(v));
      std::memcpy(dst, &h, 2);
      return f16_to_f32(h);
    }
    case KJIT_GEMM_BF16: {
      const uint16_t b = f32_to_bf16(float(v));
      std::memcpy(dst, &b, 2);
      return bf16_to_f32(b);
    }
    default: {
      const bool e4 = t == KJIT_GEMM_F8_E4M3;
      *dst = f32_to_fp8(float(v), e4);
      return fp8_to_f32(*dst, e4);
    }
  }
}

inline double load(int32_t t, const uint8_t* src) {
  switch (t) {
    case KJIT_GEMM_F32: {
      float f;
      std::memcpy(&f, src, 4);
      return f;
    }
    case KJIT_GEMM_F64: {
      double d;
      std::memcpy(&d, src, 8);
      return d;
    }
    case KJIT_GEMM_F16: {
      uint16_t h;
      std::memcpy(&h, src, 2);
      return f16_to_f32(h);
    }
    case KJIT_GEMM_BF16: {
      uint16_t b;
      std::memcpy(&b, src, 2);
      return bf16_to_f32(b);
    }
    default:
      return fp8_to_f32(*src, t == KJIT_GEMM_F8_E4M3);
  }
}

// ---- device memory ---------------------------------------------------------------------

using DevMem = kjit::test::DeviceBuffer;

// ---- one problem: data, reference, check ------------------------------------------------

struct Case {
  std::string name;
  int32_t a = KJIT_GEMM_F32, b = 0, c = 0, d = 0, compute = 0, bias_type = 0;
  int64_t m = 1, n = 1, k = 1;
  int32_t order = KJIT_GEMM_COL_MAJOR, ta = 0, tb = 0;
  int64_t pad = 0;  // added to every leading dimension
  int64_t batch = 1;
  int64_t gap = 0;  // elements between consecutive matrices of a batch
  int32_t epilogue = KJIT_GEMM_EPILOGUE_NONE;
  double alpha = 1.25, beta = 0.5;
  bool c_null = false;                          // beta = 0 and C passed as NULL
  bool in_place = false;                        // C and D are one buffer
  float a_scale = 0, b_scale = 0, d_scale = 0;  // 0 = none
  double tol = 1e-5;
  // cuBLASLt documents no support matrix for this combination: KJIT_ERROR_UNSUPPORTED
  // saying so is an accepted answer (anything else is checked as usual).
  bool may_be_unsupported = false;
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 r = [] {
    const uint64_t seed = std::random_device{}();
    std::printf("gemm gpu test seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

// A stored operand: `count` matrices of rows x cols (as stored) in `order`.
struct Operand {
  int32_t type = 0;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0, count = 1;
  bool row_major = false;
  std::vector<uint8_t> bytes;
  std::vector<double> val;  // the values the device sees, per element of the span
  int64_t span() const { return (count - 1) * stride + (row_major ? rows * ld : cols * ld); }
  int64_t index(int64_t b, int64_t i, int64_t j) const {
    return b * stride + (row_major ? i * ld + j : i + j * ld);
  }
  double at(int64_t b, int64_t i, int64_t j) const { return val[size_t(index(b, i, j))]; }
};

inline Operand make_operand(int32_t type, int64_t rows, int64_t cols, bool row_major, int64_t pad,
                            int64_t count, int64_t gap, double lo, double hi) {
  Operand o;
  o.type = type;
  o.rows = rows;
  o.cols = cols;
  o.row_major = row_major;
  o.ld = (row_major ? cols : rows) + pad;
  o.count = count;
  o.stride = count > 1 ? (row_major ? rows : cols) * o.ld + gap : 0;
  const size_t n = size_t(o.span());
  o.bytes.resize(n * esize(type));
  o.val.resize(n);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (size_t i = 0; i < n; ++i) o.val[i] = store(type, dist(rng()), &o.bytes[i * esize(type)]);
  return o;
}

inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Runs the case on `g` (after poisoning D) and checks every element of D; returns the
// number of elements out of tolerance.
inline void run_case(kjit_gemm* g, const Case& cs, void* stream = nullptr) {
  SCOPED_TRACE(cs.name);
  const bool row = cs.order == KJIT_GEMM_ROW_MAJOR;
  const int32_t bt = cs.b ? cs.b : cs.a;
  const int32_t dt = cs.d ? cs.d : cs.a;
  const int32_t ct = cs.c ? cs.c : dt;
  const bool fp8 = kjit::blas::is_fp8(cs.a);
  const bool has_bias = kjit::blas::epilogue_has_bias(cs.epilogue);
  const int32_t biast =
      cs.bias_type
          ? cs.bias_type
          : (fp8 ? (ct == KJIT_GEMM_F16 || ct == KJIT_GEMM_BF16 ? ct : int32_t(KJIT_GEMM_BF16))
                 : dt);
  const double beta = cs.c_null ? 0.0 : cs.beta;

  const Operand A = make_operand(cs.a, cs.ta ? cs.k : cs.m, cs.ta ? cs.m : cs.k, row, cs.pad,
                                 cs.batch, cs.gap, -1, 1);
  const Operand B = make_operand(bt, cs.tb ? cs.n : cs.k, cs.tb ? cs.k : cs.n, row, cs.pad,
                                 cs.batch, cs.gap, -1, 1);
  const Operand C = make_operand(ct, cs.m, cs.n, row, cs.pad, cs.batch, cs.gap, -1, 1);
  const Operand Dl = make_operand(dt, cs.m, cs.n, row, cs.pad, cs.batch, cs.gap, -1, 1);
  const int64_t bias_len = row ? cs.n : cs.m;
  const int64_t bias_stride = cs.batch > 1 ? bias_len : 0;
  const Operand bias = make_operand(biast, bias_len * cs.batch, 1, false, 0, 1, 0, -1, 1);

  DevMem dA(A.bytes.size()), dB(B.bytes.size()), dC(C.bytes.size()), dD(Dl.bytes.size()),
      dBias(bias.bytes.size());
  DevMem dScale[3] = {DevMem(4), DevMem(4), DevMem(4)};  // each on its own allocation
  dA.upload(A.bytes);
  dB.upload(B.bytes);
  if (cs.in_place) {
    ASSERT_EQ(ct, dt);
    dD.upload(C.bytes);
  } else {
    dC.upload(C.bytes);
    dD.poison();
  }
  dBias.upload(bias.bytes);
  const float sv[3] = {cs.a_scale, cs.b_scale, cs.d_scale};
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &sv[i], 4);
    dScale[i].upload(bytes);
  }

  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.order = cs.order;
  d.trans_a = cs.ta;
  d.trans_b = cs.tb;
  d.m = cs.m;
  d.n = cs.n;
  d.k = cs.k;
  d.lda = A.ld;
  d.ldb = B.ld;
  d.ldc = C.ld;
  d.ldd = Dl.ld;
  d.a_type = cs.a;
  d.b_type = cs.b;
  d.c_type = cs.c;
  d.d_type = cs.d;
  d.compute = cs.compute;
  d.epilogue = cs.epilogue;
  d.bias_type = cs.bias_type;
  d.batch_count = cs.batch;
  d.stride_a = A.stride;
  d.stride_b = B.stride;
  d.stride_c = C.stride;
  d.stride_d = Dl.stride;
  d.stride_bias = bias_stride;
  d.alpha = cs.alpha;
  d.beta = beta;
  d.a_scale = cs.a_scale != 0 ? dScale[0].get() : nullptr;
  d.b_scale = cs.b_scale != 0 ? dScale[1].get() : nullptr;
  d.d_scale = cs.d_scale != 0 ? dScale[2].get() : nullptr;
  const void* cptr = cs.c_null ? nullptr : (cs.in_place ? dD.get() : dC.get());
  const kjit_status st = kjit_gemm_run(g, &d, dA.get(), dB.get(), cptr, dD.get(),
                                       has_bias ? dBias.get() : nullptr, stream);
  if (st == KJIT_ERROR_UNSUPPORTED && cs.may_be_unsupported &&
      std::string(kjit_last_error()).find("cuBLASLt") != std::string::npos) {
    std::printf("note: %s: %s\n", cs.name.c_str(), kjit_last_error());
    return;
  }
  ASSERT_EQ(st, KJIT_OK) << kjit_last_error();
  if (stream) check(driver().cuStreamSynchronize(static_cast<CUstream>(stream)), "sync");
  const std::vector<uint8_t> out = dD.download(Dl.bytes.size());

  // Reference in float64 on the values the device saw.
  const double sa = cs.a_scale != 0 ? cs.a_scale : 1.0, sb = cs.b_scale != 0 ? cs.b_scale : 1.0;
  const double sd = cs.d_scale != 0 ? cs.d_scale : 1.0;
  const bool is_gelu =
      cs.epilogue == KJIT_GEMM_EPILOGUE_GELU || cs.epilogue == KJIT_GEMM_EPILOGUE_GELU_BIAS;
  const bool is_relu =
      cs.epilogue == KJIT_GEMM_EPILOGUE_RELU || cs.epilogue == KJIT_GEMM_EPILOGUE_RELU_BIAS;
  std::vector<char> logical(size_t(Dl.span()), 0);
  std::vector<double> err_sq(size_t(cs.batch * cs.m), 0), ref_sq(size_t(cs.batch * cs.m), 0);
  std::vector<int64_t> bad(size_t(cs.batch * cs.m), 0);
  std::vector<std::string> first_bad(size_t(cs.batch * cs.m));
  const auto rows_job = [&](int64_t lo, int64_t hi) {
    std::vector<double> arow(size_t(cs.k)), bcol(size_t(cs.k));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t bi = r / cs.m, i = r % cs.m;
      for (int64_t p = 0; p < cs.k; ++p) arow[size_t(p)] = cs.ta ? A.at(bi, p, i) : A.at(bi, i, p);
      for (int64_t j = 0; j < cs.n; ++j) {
        double acc = 0, acc_abs = 0;
        for (int64_t p = 0; p < cs.k; ++p) {
          const double bv = cs.tb ? B.at(bi, j, p) : B.at(bi, p, j);
          acc += arow[size_t(p)] * bv;
          acc_abs += std::fabs(arow[size_t(p)] * bv);
        }
        const int64_t ci = C.index(bi, i, j);
        const double cval = cs.in_place || !cs.c_null ? C.val[size_t(ci)] : 0.0;
        double x = cs.alpha * sa * sb * acc + beta * cval;
        double x_abs = std::fabs(cs.alpha * sa * sb) * acc_abs + std::fabs(beta * cval);
        if (has_bias) {
          const double bv = bias.val[size_t(bi * bias_stride + (row ? j : i))];
          x += bv;
          x_abs += std::fabs(bv);
        }
        double ref = x;
        if (is_relu) ref = std::max(x, 0.0);
        if (is_gelu) ref = gelu(x);
        ref *= sd;
        // Bound: the precision's tolerance times the sum of the magnitudes that entered the
        // result (derivative of GELU <= 1.13), plus for GELU the difference between the
        // device's fast tanh and ours.
        const double bound =
            (cs.tol * x_abs * (is_gelu ? 1.13 : 1.0) + (is_gelu ? 1e-3 * std::fabs(x) : 0.0)) * sd +
            1e-30;
        const int64_t di = Dl.index(bi, i, j);
        logical[size_t(di)] = 1;
        const double got = load(dt, &out[size_t(di) * esize(dt)]);
        const double err = std::fabs(got - ref);
        err_sq[size_t(r)] += err * err;
        ref_sq[size_t(r)] += ref * ref;
        if (!(err <= bound)) {
          if (bad[size_t(r)]++ == 0) {
            std::ostringstream s;
            s << "D[" << bi << "](" << i << "," << j << ") = " << got << ", expected " << ref
              << " (bound " << bound << ")";
            first_bad[size_t(r)] = s.str();
          }
        }
      }
    }
  };
  const int64_t rows = cs.batch * cs.m;
  const int64_t threads = std::min<int64_t>(16, std::max<int64_t>(1, rows / 8));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(rows_job, rows * t / threads, rows * (t + 1) / threads);
  for (auto& t : pool) t.join();

  int64_t nbad = 0;
  double e2 = 0, r2 = 0;
  std::string example;
  for (size_t r = 0; r < size_t(rows); ++r) {
    nbad += bad[r];
    e2 += err_sq[r];
    r2 += ref_sq[r];
    if (example.empty() && bad[r]) example = first_bad[r];
  }
  EXPECT_EQ(nbad, 0) << nbad << " of " << rows * cs.n << " elements out of tolerance, e.g. "
                     << example;
  const double rel = std::sqrt(e2) / std::max(std::sqrt(r2), 1e-300);
  EXPECT_LE(rel, cs.tol + (is_gelu ? 1e-3 : 0.0)) << "normwise relative error";
  // Nothing outside the logical matrices (ld padding, batch gaps) was written.
  if (!cs.in_place) {
    int64_t touched = 0;
    for (size_t e = 0; e < logical.size(); ++e) {
      if (logical[e]) continue;
      for (size_t byte = 0; byte < esize(dt); ++byte)
        if (out[e * esize(dt) + byte] != 0xff) ++touched;
    }
    EXPECT_EQ(touched, 0) << "bytes written outside D's matrices";
  }
}

// ---- fixture ---------------------------------------------------------------------------

class GemmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
    char arch[32] = {0};
    ASSERT_EQ(kjit_device_arch(0, arch, sizeof arch), KJIT_OK);
    cc_ = std::atoi(arch + 3);
  }
  kjit_gemm* create(kjit_cache* cache = nullptr, const kjit_gemm_options* o = nullptr) {
    kjit_gemm* g = nullptr;
    EXPECT_EQ(kjit_gemm_create(cache, 0, o, &g), KJIT_OK) << kjit_last_error();
    return g;
  }
  static kjit_gemm_stats stats(const kjit_gemm* g) {
    kjit_gemm_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK);
    return s;
  }
  int cc_ = 0;
};

struct TypeConfig {
  const char* name;
  int32_t a, d, compute;
  double tol;
};

const TypeConfig kTypes[] = {
    {"f32", KJIT_GEMM_F32, 0, KJIT_GEMM_COMPUTE_F32, 1e-5},
    {"tf32", KJIT_GEMM_F32, 0, KJIT_GEMM_COMPUTE_TF32, 3e-3},
    {"f16", KJIT_GEMM_F16, 0, KJIT_GEMM_COMPUTE_F32, 1e-2},
    {"f16-acc16", KJIT_GEMM_F16, 0, KJIT_GEMM_COMPUTE_F16, 1e-2},
    {"bf16", KJIT_GEMM_BF16, 0, KJIT_GEMM_COMPUTE_F32, 1e-2},
    {"bf16-out-f32", KJIT_GEMM_BF16, KJIT_GEMM_F32, KJIT_GEMM_COMPUTE_F32, 1e-4},
    {"f16-out-f32", KJIT_GEMM_F16, KJIT_GEMM_F32, KJIT_GEMM_COMPUTE_F32, 1e-4},
};

const char* const kEpilogueNames[] = {"none", "bias", "relu", "relu+bias", "gelu", "gelu+bias"};

inline Case typed(const TypeConfig& t, const std::string& what) {
  Case c;
  c.name = std::string(t.name) + " " + what;
  c.a = t.a;
  c.d = t.d;
  c.compute = t.compute;
  c.tol = t.tol;
  return c;
}

// The problem the plan-cache tests use.
inline Case plan_case() {
  Case c;
  c.name = "bf16 127x255x63 row-major";
  c.a = KJIT_GEMM_BF16;
  c.tol = 1e-2;
  c.m = 127;
  c.n = 255;
  c.k = 63;
  c.order = KJIT_GEMM_ROW_MAJOR;
  return c;
}

inline kjit_cache* open_cache(const std::string& dir) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  kjit_cache* c = nullptr;
  EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_OK) << kjit_last_error();
  return c;
}

// The persisted key of `cs` as the handles compute it (device 0, default options), for
// reading and damaging the stored record.
inline std::string persisted_key_of(const Case& cs, const void* a, const void* b, const void* cptr,
                                    const void* dptr) {
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.order = cs.order;
  d.m = cs.m;
  d.n = cs.n;
  d.k = cs.k;
  d.a_type = cs.a;
  const kjit::blas::Problem p = kjit::blas::prepare(&d, a, b, cptr, dptr, nullptr);
  const kjit::blas::DeviceInfo dev = kjit::blas::query_device(0);
  const kjit::blas::GemmOptions opts;
  return kjit::blas::persist_key(kjit::blas::make_key(p, dev, opts.max_workspace),
                                 kjit::blas::validators(dev));
}

inline std::string self_exe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return self;
}

}  // namespace kjit::test::gemm_gpu
