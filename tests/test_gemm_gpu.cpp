// GEMM on a GPU: every dtype and epilogue against a float64 CPU reference, plan-cache
// tiers, persistence across processes, self-healing of damaged plans, autotuning and
// concurrent use. Skips cleanly without a GPU.
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

namespace {

using kjit::cuda::check;
using kjit::cuda::driver;

// ---- host encodings of the element types ----------------------------------------------

uint16_t f32_to_f16(float f) {
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

float f16_to_f32(uint16_t h) {
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

float fp8_to_f32(uint8_t v, bool e4m3) {
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

uint8_t f32_to_fp8(float f, bool e4m3) {
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

size_t esize(int32_t t) {
  return kjit::blas::dtype_size(t);
}

// Rounds `v` to type t; writes its bytes at `dst` and returns the value kept.
double store(int32_t t, double v, uint8_t* dst) {
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

double load(int32_t t, const uint8_t* src) {
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

std::mt19937_64& rng() {
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

Operand make_operand(int32_t type, int64_t rows, int64_t cols, bool row_major, int64_t pad,
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

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Runs the case on `g` (after poisoning D) and checks every element of D; returns the
// number of elements out of tolerance.
void run_case(kjit_gemm* g, const Case& cs, void* stream = nullptr) {
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

const char* kEpilogueNames[] = {"none", "bias", "relu", "relu+bias", "gelu", "gelu+bias"};

Case typed(const TypeConfig& t, const std::string& what) {
  Case c;
  c.name = std::string(t.name) + " " + what;
  c.a = t.a;
  c.d = t.d;
  c.compute = t.compute;
  c.tol = t.tol;
  return c;
}

TEST_F(GemmGpu, EveryTypeAndEpilogue) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (const TypeConfig& t : kTypes) {
    Case one = typed(t, "1x1x1");
    run_case(g, one);
    for (int32_t e = KJIT_GEMM_EPILOGUE_NONE; e <= KJIT_GEMM_EPILOGUE_GELU_BIAS; ++e) {
      Case c = typed(t, std::string("127x255x63 ") + kEpilogueNames[e]);
      c.m = 127;
      c.n = 255;
      c.k = 63;
      c.epilogue = e;
      // Vary layouts across the epilogues: row/column-major, transposes, padded ld.
      c.order = e % 2 ? KJIT_GEMM_ROW_MAJOR : KJIT_GEMM_COL_MAJOR;
      c.ta = (e / 2) % 2;
      c.tb = e >= 3 ? 1 : 0;
      c.pad = e == 2 ? 5 : 0;
      run_case(g, c);
    }
  }
  // f64: plain and with C omitted.
  Case f64;
  f64.name = "f64 127x255x63";
  f64.a = KJIT_GEMM_F64;
  f64.m = 127;
  f64.n = 255;
  f64.k = 63;
  f64.tol = 1e-12;
  run_case(g, f64);
  f64.name = "f64 1x1x1 C NULL";
  f64.m = f64.n = f64.k = 1;
  f64.c_null = true;
  run_case(g, f64);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Large1024Cubed) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (const TypeConfig& t : kTypes) {
    if (t.compute == KJIT_GEMM_COMPUTE_F16 || t.d) continue;
    Case c = typed(t, "1024^3 row-major bias");
    c.m = c.n = c.k = 1024;
    c.order = KJIT_GEMM_ROW_MAJOR;
    c.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
    run_case(g, c);
  }
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, TransposesAndOrders) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (int32_t type : {KJIT_GEMM_F32, KJIT_GEMM_BF16})
    for (int32_t order : {KJIT_GEMM_COL_MAJOR, KJIT_GEMM_ROW_MAJOR})
      for (int32_t ta = 0; ta < 2; ++ta)
        for (int32_t tb = 0; tb < 2; ++tb) {
          Case c;
          c.a = type;
          c.tol = type == KJIT_GEMM_F32 ? 1e-5 : 1e-2;
          c.m = 33;
          c.n = 65;
          c.k = 17;
          c.order = order;
          c.ta = ta;
          c.tb = tb;
          c.pad = 3 * (ta + tb);
          c.name = std::string(kjit::blas::dtype_name(type)) + (order ? " row" : " col") +
                   (ta ? " T" : " N") + (tb ? "T" : "N");
          run_case(g, c);
        }
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Batched) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.name = "bf16 batch 3 row-major gelu+bias, per-batch bias";
  c.a = KJIT_GEMM_BF16;
  c.tol = 1e-2;
  c.m = 64;
  c.n = 48;
  c.k = 40;
  c.batch = 3;
  c.order = KJIT_GEMM_ROW_MAJOR;
  c.tb = 1;
  c.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  run_case(g, c);
  c.name = "f32 batch 4 col-major, padded ld and gaps between matrices";
  c.a = KJIT_GEMM_F32;
  c.tol = 1e-5;
  c.m = 31;
  c.n = 17;
  c.k = 9;
  c.batch = 4;
  c.order = KJIT_GEMM_COL_MAJOR;
  c.tb = 0;
  c.ta = 1;
  c.pad = 4;
  c.gap = 8;
  c.epilogue = KJIT_GEMM_EPILOGUE_RELU;
  run_case(g, c);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, CNullAndInPlace) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.a = KJIT_GEMM_F16;
  c.tol = 1e-2;
  c.m = 96;
  c.n = 80;
  c.k = 72;
  c.name = "f16 C NULL";
  c.c_null = true;
  run_case(g, c);
  c.name = "f16 C == D, beta 0.5";
  c.c_null = false;
  c.in_place = true;
  run_case(g, c);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Fp8) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.a = KJIT_GEMM_F8_E4M3;
  c.d = KJIT_GEMM_BF16;
  c.m = 128;
  c.n = 256;
  c.k = 64;
  c.order = KJIT_GEMM_ROW_MAJOR;  // Y = X * W^T: the layout fp8 kernels take
  c.tb = 1;
  c.a_scale = 0.5f;
  c.b_scale = 2.0f;
  c.tol = 1e-2;
  if (cc_ < 89) {
    // Before Ada/Hopper: a clear unsupported status, never a crash.
    DevMem m(1 << 20);
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.m = 128;
    d.n = 256;
    d.k = 64;
    d.order = KJIT_GEMM_ROW_MAJOR;
    d.trans_b = 1;
    d.a_type = KJIT_GEMM_F8_E4M3;
    d.d_type = KJIT_GEMM_BF16;
    EXPECT_EQ(kjit_gemm_run(g, &d, m.get(), m.get(), nullptr, m.get(), nullptr, nullptr),
              KJIT_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kjit_last_error()).find("8.9"), std::string::npos);
    kjit_gemm_destroy(g);
    return;
  }
  // The configuration PyTorch's scaled_mm and Transformer Engine run: beta 0, D in C's
  // place (C NULL here, or given and then not read).
  c.beta = 0;
  c.c_null = true;
  c.name = "e4m3 x e4m3 -> bf16 with scales";
  run_case(g, c);
  c.name = "e4m3 x e4m3 -> bf16 gelu+bias";
  c.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  c.may_be_unsupported = true;
  run_case(g, c);
  c.may_be_unsupported = false;
  c.name = "e4m3 x e5m2 -> f16 bias";
  c.b = KJIT_GEMM_F8_E5M2;
  c.d = KJIT_GEMM_F16;
  c.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  run_case(g, c);
  c.name = "e4m3 x e4m3 -> f32, C given with beta 0";
  c.b = 0;
  c.d = KJIT_GEMM_F32;
  c.epilogue = KJIT_GEMM_EPILOGUE_NONE;
  c.c_null = false;
  run_case(g, c);
  // fp8 output: C has a 16-bit type, so it must be a real buffer (C == D needs equal
  // types); with beta 0 it is not read.
  c.name = "e4m3 x e4m3 -> e4m3 (C bf16 given, beta 0) with a D scale";
  c.c_null = false;
  c.c = KJIT_GEMM_BF16;
  c.d = KJIT_GEMM_F8_E4M3;
  c.d_scale = 0.25f;
  c.tol = 0.07;  // 3 mantissa bits in the output
  run_case(g, c);
  // Accumulation: in place (Transformer Engine's wgrad), and out of place, which cuBLASLt
  // may refuse; either way a result or a clear unsupported status, never a wrong result.
  c.c = 0;
  c.d = KJIT_GEMM_BF16;
  c.d_scale = 0;
  c.tol = 1e-2;
  c.c_null = false;
  c.beta = 1.0;
  c.in_place = true;
  c.may_be_unsupported = true;
  c.name = "e4m3 x e4m3 -> bf16, C == D, beta 1";
  run_case(g, c);
  c.in_place = false;
  c.beta = 0.5;
  c.name = "e4m3 x e4m3 -> bf16, C != D, beta 0.5";
  run_case(g, c);
  kjit_gemm_destroy(g);
}

// The problem the plan-cache tests use.
Case plan_case() {
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

TEST_F(GemmGpu, MemoryTierCounts) {
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.plan_capacity = 2;
  kjit_gemm* g = create(nullptr, &o);
  ASSERT_NE(g, nullptr);
  Case c = plan_case();
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 0u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.plans, 1u);
  EXPECT_EQ(s.disk_hits + s.disk_writes + s.disk_rejected + s.autotunes, 0u);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  // Another shape, then a third: the least recently used plan goes.
  c.k = 64;
  run_case(g, c);
  c.k = 65;
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.plans, 2u);
  EXPECT_EQ(s.evictions, 1u);
  c.k = 63;  // evicted
  run_case(g, c);
  c.k = 65;  // still there
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.memory_hits, 2u);
  EXPECT_EQ(s.heuristic_queries, 4u);
  EXPECT_EQ(s.runs, 6u);
  EXPECT_EQ(kjit_gemm_clear_plans(g), KJIT_OK);
  EXPECT_EQ(stats(g).plans, 0u);
  run_case(g, c);
  EXPECT_EQ(stats(g).misses, 5u);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, PointerAlignmentSelectsPlans) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  DevMem A(64 * 64 * 2 + 512), B(64 * 64 * 2 + 512), D(64 * 64 * 2 + 512);
  std::vector<uint8_t> zeros(64 * 64 * 2 + 512, 0);
  A.upload(zeros);
  B.upload(zeros);
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.m = d.n = d.k = 64;
  d.a_type = KJIT_GEMM_BF16;
  char* a = static_cast<char*>(A.get());
  ASSERT_EQ(kjit_gemm_run(g, &d, a, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  ASSERT_EQ(kjit_gemm_run(g, &d, a + 2, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  ASSERT_EQ(kjit_gemm_run(g, &d, a + 256, B.get(), nullptr, D.get(), nullptr, nullptr), KJIT_OK)
      << kjit_last_error();
  const kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.misses, 2u);       // 256-aligned and 2-aligned A
  EXPECT_EQ(s.memory_hits, 1u);  // a + 256 is as aligned as a
  // A misaligned pointer is refused before the device sees it.
  EXPECT_EQ(kjit_gemm_run(g, &d, a + 1, B.get(), nullptr, D.get(), nullptr, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  kjit_gemm_destroy(g);
}

kjit_cache* open_cache(const std::string& dir) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  kjit_cache* c = nullptr;
  EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_OK) << kjit_last_error();
  return c;
}

// The persisted key of `cs` as the handles compute it (device 0, default options), for
// reading and damaging the stored record.
std::string persisted_key_of(const Case& cs, const void* a, const void* b, const void* cptr,
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

TEST_F(GemmGpu, DiskTierInProcess) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  kjit_gemm* g1 = create(cache);
  ASSERT_NE(g1, nullptr);
  run_case(g1, c);
  kjit_gemm_stats s = stats(g1);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  // Memory tier dropped: the same handle reads the plan back from disk.
  ASSERT_EQ(kjit_gemm_clear_plans(g1), KJIT_OK);
  run_case(g1, c);
  s = stats(g1);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  kjit_gemm_destroy(g1);
  // A new handle on the same cache: no heuristic query at all.
  kjit_gemm* g2 = create(cache);
  ASSERT_NE(g2, nullptr);
  run_case(g2, c);
  run_case(g2, c);
  s = stats(g2);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  EXPECT_EQ(s.disk_writes, 0u);
  kjit_gemm_destroy(g2);
  kjit_cache_close(cache);
}

std::string self_exe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return self;
}

TEST_F(GemmGpu, SecondProcessReusesPersistedPlan) {
  kjit::test::TempDir dir;
  {
    kjit_cache* cache = open_cache(dir.path());
    ASSERT_NE(cache, nullptr);
    kjit_gemm* g = create(cache);
    ASSERT_NE(g, nullptr);
    run_case(g, plan_case());
    EXPECT_EQ(stats(g).disk_writes, 1u);
    kjit_gemm_destroy(g);
    kjit_cache_close(cache);
  }
  const std::string report = dir.file("report");
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("KJIT_GEMM_TEST_CHILD", report.c_str(), 1);
    setenv("KJIT_GEMM_TEST_CACHE", dir.path().c_str(), 1);
    execl(exe.c_str(), exe.c_str(), "--gtest_filter=GemmGpuChild.ReusePersistedPlan",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(report);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "ok heuristic_queries=0 disk_hits=1 misses=0");
}

TEST(GemmGpuChild, ReusePersistedPlan) {
  const char* report = std::getenv("KJIT_GEMM_TEST_CHILD");
  const char* dir = std::getenv("KJIT_GEMM_TEST_CACHE");
  if (!report || !dir)
    GTEST_SKIP() << "runs in a child of GemmGpu.SecondProcessReusesPersistedPlan";
  std::ofstream out(report, std::ios::trunc);
  check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  kjit_cache* cache = open_cache(dir);
  ASSERT_NE(cache, nullptr);
  kjit_gemm* g = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 0, nullptr, &g), KJIT_OK) << kjit_last_error();
  run_case(g, plan_case());
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
  if (!::testing::Test::HasFailure())
    out << "ok heuristic_queries=" << s.heuristic_queries << " disk_hits=" << s.disk_hits
        << " misses=" << s.misses;
}

TEST_F(GemmGpu, DamagedRecordIsHealed) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  kjit_gemm* g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_destroy(g);

  // Find the record the handle wrote (device buffers from cuMemAlloc are 256-aligned,
  // as the ones run_case allocates).
  DevMem probe(256), probe_d(256);  // distinct C and D, as in run_case
  const std::string key = persisted_key_of(c, probe.get(), probe.get(), probe.get(), probe_d.get());
  kjit::Cache& kv = *cache->cache;
  std::optional<std::string> rec = kv.facts().get_value(kjit::blas::kPlanNamespace, key);
  ASSERT_TRUE(rec.has_value()) << "record not found under the computed key";
  std::string bad = *rec;
  bad[bad.size() / 2] = char(bad[bad.size() / 2] ^ 0x10);
  kv.facts().put_value(kjit::blas::kPlanNamespace, key, bad);

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.disk_rejected, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);  // overwritten
  kjit_gemm_destroy(g);
  const auto healed = kv.facts().get_value(kjit::blas::kPlanNamespace, key);
  ASSERT_TRUE(healed.has_value());
  EXPECT_NE(*healed, bad);
  std::string why;
  const kjit::blas::PlanKey pk = [&] {
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.order = c.order;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.a_type = c.a;
    const auto dev = kjit::blas::query_device(0);
    return kjit::blas::make_key(
        kjit::blas::prepare(&d, probe.get(), probe.get(), probe.get(), probe_d.get(), nullptr), dev,
        kjit::blas::GemmOptions().max_workspace);
  }();
  EXPECT_TRUE(kjit::blas::decode_plan(*healed, pk,
                                      kjit::blas::validators(kjit::blas::query_device(0)), &why))
      << why;

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.disk_rejected, 0u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, AlgorithmFailingAlgoCheckIsHealed) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  const Case c = plan_case();
  Case f64 = c;
  f64.name = "f64 127x255x63 row-major";
  f64.a = KJIT_GEMM_F64;
  f64.tol = 1e-12;
  kjit_gemm* g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  run_case(g, f64);
  kjit_gemm_destroy(g);

  // A well-formed record (right key, validators and checksum) whose algorithm is one
  // cuBLASLt picked for another problem (an f64 GEMM): only cublasLtMatmulAlgoCheck can
  // tell, and the handle must re-plan instead of running it.
  DevMem probe(256), probe_d(256);  // distinct C and D, as in run_case
  const void* p = probe.get();
  const void* pd_ptr = probe_d.get();
  const kjit::blas::DeviceInfo dev = kjit::blas::query_device(0);
  const std::string vals = kjit::blas::validators(dev);
  const auto key_of = [&](int32_t type) {
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.order = c.order;
    d.m = c.m;
    d.n = c.n;
    d.k = c.k;
    d.a_type = type;
    return kjit::blas::make_key(kjit::blas::prepare(&d, p, p, p, pd_ptr, nullptr), dev,
                                kjit::blas::GemmOptions().max_workspace);
  };
  const kjit::blas::PlanKey kb = key_of(KJIT_GEMM_BF16), kd = key_of(KJIT_GEMM_F64);
  kjit::Cache& kv = *cache->cache;
  const auto rb =
      kv.facts().get_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kb, vals));
  const auto rd =
      kv.facts().get_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kd, vals));
  ASSERT_TRUE(rb && rd);
  std::string why;
  auto pb = kjit::blas::decode_plan(*rb, kb, vals, &why);
  const auto pd = kjit::blas::decode_plan(*rd, kd, vals, &why);
  ASSERT_TRUE(pb && pd) << why;
  ASSERT_NE(pb->algo, pd->algo);
  pb->algo = pd->algo;
  kv.facts().put_value(kjit::blas::kPlanNamespace, kjit::blas::persist_key(kb, vals),
                       kjit::blas::encode_plan(kb, vals, *pb));

  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.disk_rejected, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  kjit_gemm_destroy(g);
  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, AutotuneKeepsTheCallersDataIntact) {
  kjit::test::TempDir dir;
  kjit_cache* cache = open_cache(dir.path());
  ASSERT_NE(cache, nullptr);
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.autotune = 1;
  o.autotune_candidates = 4;
  o.autotune_reps = 3;
  kjit_gemm* g = create(cache, &o);
  ASSERT_NE(g, nullptr);
  // D = alpha*A*B + 1*D: trial runs that wrote D would accumulate into the result.
  Case c;
  c.name = "bf16 256^3 autotuned, C == D, beta 1";
  c.a = KJIT_GEMM_BF16;
  c.tol = 1e-2;
  c.m = c.n = c.k = 256;
  c.beta = 1.0;
  c.in_place = true;
  run_case(g, c);
  kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.autotunes, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.heuristic_queries, 1u);
  EXPECT_EQ(s.disk_writes, 1u);
  run_case(g, c);
  EXPECT_EQ(stats(g).autotunes, 1u);
  kjit_gemm_destroy(g);
  // A heuristic handle takes the tuned plan from disk.
  g = create(cache);
  ASSERT_NE(g, nullptr);
  run_case(g, c);
  s = stats(g);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.heuristic_queries, 0u);
  // ... and its own heuristic plans are re-tuned by an autotuning handle.
  Case h = plan_case();
  run_case(g, h);
  kjit_gemm_destroy(g);
  g = create(cache, &o);
  ASSERT_NE(g, nullptr);
  run_case(g, h);
  s = stats(g);
  EXPECT_EQ(s.autotunes, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.disk_writes, 1u);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
}

TEST_F(GemmGpu, ThreadsAndStreamsShareOneHandle) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  const CUcontext ctx = kjit::cuda::primary_context(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
      CUstream s = nullptr;
      check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      for (int i = 0; i < 6; ++i) {
        Case c;
        c.a = i % 2 ? KJIT_GEMM_BF16 : KJIT_GEMM_F32;
        c.tol = i % 2 ? 1e-2 : 1e-5;
        c.m = 64 + 32 * (i % 3);
        c.n = 96;
        c.k = 128;
        c.epilogue = i % 2 ? KJIT_GEMM_EPILOGUE_BIAS : KJIT_GEMM_EPILOGUE_NONE;
        c.name = "thread " + std::to_string(t) + " run " + std::to_string(i);
        run_case(g, c, s);
      }
      driver().cuStreamDestroy(s);
    });
  }
  for (auto& th : threads) th.join();
  const kjit_gemm_stats s = stats(g);
  EXPECT_EQ(s.runs, 24u);
  EXPECT_EQ(s.memory_hits + s.misses, 24u);
  EXPECT_LE(s.plans, 6u);
  kjit_gemm_destroy(g);
}

// ---- plans through the fleet tier (Redis) ------------------------------------------------

// The shapes node A autotunes and node B then runs.
std::vector<Case> fleet_cases() {
  std::vector<Case> cases;
  for (int i = 0; i < 3; ++i) {
    Case c;
    c.name = "fleet bf16 " + std::to_string(i);
    c.a = KJIT_GEMM_BF16;
    c.tol = 1e-2;
    c.m = 128 + 64 * i;
    c.n = 192;
    c.k = 96 + 32 * i;
    cases.push_back(c);
  }
  return cases;
}

kjit_gemm_options autotuned() {
  kjit_gemm_options o = KJIT_GEMM_OPTIONS_INIT;
  o.autotune = 1;
  o.autotune_candidates = 4;
  o.autotune_reps = 3;
  return o;
}

// Node A (this process, its own cache directory) autotunes the shapes and publishes the
// plans; node B (a child process with another directory, same server) runs them with no
// heuristic query and no autotune, and its results match the reference.
TEST_F(GemmGpu, FleetNodeTakesTunedPlansFromRedis) {
  if (std::system("command -v redis-server >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "redis-server not installed";
  kjit::test::TempDir redis_dir, a_dir, b_dir;
  const std::string sock = redis_dir.file("redis.sock");
  const pid_t redis = fork();
  if (redis == 0) {
    execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock.c_str(), "--save",
           "", "--appendonly", "no", "--dir", redis_dir.path().c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 300 && access(sock.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  setenv("KJIT_REMOTE", ("unix://" + sock).c_str(), 1);
  {
    kjit_cache* cache = open_cache(a_dir.path());
    ASSERT_NE(cache, nullptr);
    const kjit_gemm_options o = autotuned();
    kjit_gemm* g = create(cache, &o);
    ASSERT_NE(g, nullptr);
    for (const Case& c : fleet_cases()) run_case(g, c);
    const kjit_gemm_stats s = stats(g);
    EXPECT_EQ(s.autotunes, fleet_cases().size());
    EXPECT_EQ(s.disk_writes, fleet_cases().size());
    kjit_gemm_destroy(g);
    kjit_cache_close(cache);
  }
  const std::string report = b_dir.file("report");
  const std::string exe = self_exe();
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("KJIT_GEMM_TEST_FLEET_CHILD", report.c_str(), 1);
    setenv("KJIT_GEMM_TEST_CACHE", b_dir.path().c_str(), 1);
    execl(exe.c_str(), exe.c_str(), "--gtest_filter=GemmGpuChild.FleetNodeB",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unsetenv("KJIT_REMOTE");
  kill(redis, SIGKILL);
  waitpid(redis, nullptr, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(report);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(),
            "ok heuristic_queries=0 autotunes=0 disk_hits=" + std::to_string(fleet_cases().size()));
}

TEST(GemmGpuChild, FleetNodeB) {
  const char* report = std::getenv("KJIT_GEMM_TEST_FLEET_CHILD");
  const char* dir = std::getenv("KJIT_GEMM_TEST_CACHE");
  if (!report || !dir)
    GTEST_SKIP() << "runs in a child of GemmGpu.FleetNodeTakesTunedPlansFromRedis";
  std::ofstream out(report, std::ios::trunc);
  check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  kjit_cache* cache = open_cache(dir);
  ASSERT_NE(cache, nullptr);
  const kjit_gemm_options o = autotuned();
  kjit_gemm* g = nullptr;
  ASSERT_EQ(kjit_gemm_create(cache, 0, &o, &g), KJIT_OK) << kjit_last_error();
  for (const Case& c : fleet_cases()) run_case(g, c);
  kjit_gemm_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(kjit_gemm_stats_get(g, &s), KJIT_OK);
  kjit_gemm_destroy(g);
  kjit_cache_close(cache);
  if (!::testing::Test::HasFailure())
    out << "ok heuristic_queries=" << s.heuristic_queries << " autotunes=" << s.autotunes
        << " disk_hits=" << s.disk_hits;
}

}  // namespace
