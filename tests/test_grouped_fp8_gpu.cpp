// fp8 e4m3 grouped GEMM on a GPU against a float64 CPU reference per group (the e4m3 values
// decoded on the host with ldexp, independently of the kernels' conversion): row-wise scales
// and none, G = 1 and 128, empty and single-row groups, K not a multiple of the 128 tile,
// every epilogue piece and the gated SwiGLU form, the sm_90a kernel (B order NK) and the
// portable one (B order KN, unaligned K, portable_only). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/kjit.h"
#include "support/bf16.h"
#include "support/device_buffer.h"
#include "support/test_support.h"

namespace {

using kjit::cuda::check;
using kjit::cuda::driver;
using DevBuf = kjit::test::DeviceBuffer;

constexpr uint16_t kPoison = 0x7fa1;  // a NaN no kernel writes

// e4m3 ("fn": bias 7, no infinities; 0x7f and 0xff are NaN, never generated here).
double e4m3(uint8_t x) {
  const int e = (x >> 3) & 15, m = x & 7;
  const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (x & 0x80) ? -mag : mag;
}

// A random e4m3 byte of magnitude 2^-3 .. 2^2 (or zero now and then), either sign.
uint8_t random_e4m3(std::mt19937& rng) {
  const uint32_t r = uint32_t(rng());
  if ((r & 63) == 0) return 0;
  const uint32_t e = 4 + (r >> 8) % 6, m = (r >> 16) & 7, s = (r >> 20) & 1;
  return uint8_t((s << 7) | (e << 3) | m);
}

double act_ref(double v, int act) {
  switch (act) {
    case KJIT_GROUPED_ACT_RELU:
      return v > 0 ? v : 0;
    case KJIT_GROUPED_ACT_GELU:
      return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case KJIT_GROUPED_ACT_SILU:
      return v / (1 + std::exp(-v));
    default:
      return v;
  }
}

struct Case {
  std::vector<int> sizes;
  int n = 64, k = 128;
  int b_order = KJIT_GROUPED_B_NK;
  int act = KJIT_GROUPED_ACT_NONE;
  bool bias = false, scaled = true;
  bool block = false;  // DeepSeek-style 128 x 128 block scales instead of row-wise ones
  double alpha = 1.0, beta = 0.0;
  int tail = 0;
  bool portable = false;
  int tile_n = 0, schedule = 0;
};

bool hopper() {
  return kjit::cuda::compute_capability(0) == 90;
}

class GroupedFp8Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(kjit_compiler_create(nullptr, 1, &compiler_), KJIT_OK) << kjit_last_error();
    check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  }
  void TearDown() override { kjit_compiler_destroy(compiler_); }

  std::string run(const Case& c, std::mt19937& rng) {
    const int G = int(c.sizes.size());
    std::vector<int32_t> offs;
    int rows = 0;
    for (int s : c.sizes) offs.push_back(rows += s);
    const int total = rows + c.tail;
    const bool kn = c.b_order == KJIT_GROUPED_B_KN;
    const int ldb = kn ? c.n : c.k;
    const long long stride_b = (long long)(kn ? c.k : c.n) * ldb;
    const bool glu = c.act == KJIT_GROUPED_ACT_SWIGLU;
    const int no = glu ? c.n / 2 : c.n;
    std::uniform_real_distribution<float> sdist(0.5f, 2.0f);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint8_t> a(size_t(total) * c.k), b(size_t(G) * stride_b);
    for (auto& x : a) x = random_e4m3(rng);
    for (auto& x : b) x = random_e4m3(rng);
    const int KB = (c.k + 127) / 128, NB = (c.n + 127) / 128;
    std::vector<float> sa(static_cast<size_t>(total) * (c.block ? KB : 1)),
        sb(static_cast<size_t>(G) * (c.block ? size_t(NB) * KB : size_t(c.n)));
    for (auto& x : sa) x = c.scaled ? sdist(rng) : 1.0f;
    for (auto& x : sb) x = c.scaled ? sdist(rng) / 16.0f : 1.0f;
    std::vector<uint16_t> bias(size_t(G) * c.n), cm(size_t(total) * no),
        d(size_t(total) * no, kPoison);
    for (auto& x : bias) x = kjit::test::f32_to_bf16(dist(rng));
    for (auto& x : cm) x = kjit::test::f32_to_bf16(dist(rng));
    DevBuf da(a.size()), db(b.size()), dsa(sa.size() * 4), dsb(sb.size() * 4),
        dbias(bias.size() * 2), dc(cm.size() * 2), dd(d.size() * 2), doffs(offs.size() * 4);
    da.put(a);
    db.put(b);
    dsa.put(sa);
    dsb.put(sb);
    dbias.put(bias);
    dc.put(cm);
    dd.put(d);
    doffs.put(offs);

    kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    o.portable_only = c.portable;
    o.tile_n = uint32_t(c.tile_n);
    o.schedule = c.schedule;
    kjit_grouped_gemm* gg = nullptr;
    EXPECT_EQ(kjit_grouped_gemm_create(compiler_, 0, &o, &gg), KJIT_OK) << kjit_last_error();
    if (!gg) return "";
    kjit_grouped_gemm_desc desc;
    kjit_grouped_gemm_desc_init(&desc);
    desc.groups = G;
    desc.rows = total;
    desc.n = c.n;
    desc.k = c.k;
    desc.a_type = KJIT_GEMM_F8_E4M3;
    desc.b_order = c.b_order;
    desc.activation = c.act;
    desc.alpha = c.alpha;
    desc.beta = c.beta;
    desc.scale_mode = !c.scaled ? KJIT_GROUPED_SCALE_NONE
                      : c.block ? KJIT_GROUPED_SCALE_BLOCK128
                                : KJIT_GROUPED_SCALE_ROWWISE;
    const void* cptr = c.beta != 0 ? dc.ptr() : nullptr;
    const void* bptr = c.bias ? dbias.ptr() : nullptr;
    const float* sap = c.scaled ? static_cast<const float*>(dsa.ptr()) : nullptr;
    const float* sbp = c.scaled ? static_cast<const float*>(dsb.ptr()) : nullptr;
    char key[256] = {0};
    EXPECT_EQ(kjit_grouped_gemm_plan_key(gg, &desc, da.ptr(), db.ptr(), cptr, dd.ptr(), bptr, key,
                                         sizeof key, nullptr),
              KJIT_OK)
        << kjit_last_error();
    EXPECT_EQ(kjit_grouped_gemm_run_scaled(gg, &desc, da.ptr(), db.ptr(),
                                           reinterpret_cast<const int32_t*>(doffs.ptr()), cptr,
                                           dd.ptr(), bptr, sap, sbp, nullptr),
              KJIT_OK)
        << kjit_last_error();
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    kjit_grouped_gemm_destroy(gg);
    const std::vector<uint16_t> got = dd.get<uint16_t>(d.size());

    std::vector<double> ad(a.size()), bd(b.size());
    for (size_t i = 0; i < a.size(); ++i) ad[i] = e4m3(a[i]);
    for (size_t i = 0; i < b.size(); ++i) bd[i] = e4m3(b[i]);
    std::vector<double> ref(size_t(total) * no, 0.0);
    std::vector<char> in(size_t(total), 0);
    double ref2 = 0;
    size_t count = 0;
    int g = 0, start = 0;
    for (int r = 0; r < total; ++r) {
      while (g < G && r >= offs[g]) start = offs[g++];
      if (!(g < G && r >= start)) continue;
      in[r] = 1;
      auto linear = [&](int col) {
        double acc = 0;
        for (int q = 0; q < c.k; ++q) {
          double t = ad[size_t(r) * c.k + q] * (kn ? bd[g * stride_b + (long long)q * ldb + col]
                                                   : bd[g * stride_b + (long long)col * ldb + q]);
          if (c.block)
            t *= double(sa[size_t(r) * KB + q / 128]) *
                 sb[(size_t(g) * NB + size_t(col / 128)) * KB + q / 128];
          acc += t;
        }
        double v = c.block ? c.alpha * acc : c.alpha * acc * sa[r] * sb[size_t(g) * c.n + col];
        if (c.bias) v += kjit::test::bf16_to_f32(bias[size_t(g) * c.n + col]);
        return v;
      };
      for (int j = 0; j < no; ++j) {
        double v;
        if (glu) {
          v = act_ref(linear(j), KJIT_GROUPED_ACT_SILU) * linear(no + j);
          if (c.beta != 0) v += c.beta * kjit::test::bf16_to_f32(cm[size_t(r) * no + j]);
        } else {
          v = linear(j);
          if (c.beta != 0) v += c.beta * kjit::test::bf16_to_f32(cm[size_t(r) * no + j]);
          v = act_ref(v, c.act);
        }
        ref[size_t(r) * no + j] = v;
        ref2 += v * v;
        ++count;
      }
    }
    const double rms = count ? std::sqrt(ref2 / double(count)) : 0;
    double err2 = 0;
    size_t bad_unwritten = 0, bad_tol = 0;
    for (int r = 0; r < total; ++r) {
      for (int j = 0; j < no; ++j) {
        const uint16_t out = got[size_t(r) * no + j];
        if (!in[r]) {
          bad_unwritten += out != kPoison;
          continue;
        }
        const double v = ref[size_t(r) * no + j], ov = kjit::test::bf16_to_f32(out);
        // bf16 rounding of the output, and the tensor cores' fp8 accumulation.
        if (!(std::fabs(ov - v) <= 0.016 * std::fabs(v) + 0.01 * rms)) ++bad_tol;
        err2 += (ov - v) * (ov - v);
      }
    }
    EXPECT_EQ(bad_unwritten, 0u) << key << ": rows outside every group were written";
    EXPECT_EQ(bad_tol, 0u) << key << ": elements off by more than the tolerance";
    if (ref2 > 0) {
      EXPECT_LT(std::sqrt(err2 / ref2), 5e-3) << key;
    }
    const bool tma_able =
        !c.portable && !kn && c.k % 16 == 0 && !(c.block && glu && (c.n / 2) % 64 != 0);
    if (hopper()) {
      EXPECT_NE(std::string(key).find(tma_able ? " tma " : " simt "), std::string::npos) << key;
    }
    if (c.block) {
      EXPECT_NE(std::string(key).find("scale=block128"), std::string::npos) << key;
    }
    EXPECT_NE(std::string(key).find("in=e4m3"), std::string::npos) << key;
    return key;
  }

  kjit_compiler* compiler_ = nullptr;
};

TEST_F(GroupedFp8Gpu, SingleGroupBothOrders) {
  std::mt19937 rng(11);
  for (int order : {KJIT_GROUPED_B_NK, KJIT_GROUPED_B_KN}) {
    Case c;
    c.sizes = {300};
    c.n = 256;
    c.k = 256;
    c.b_order = order;
    run(c, rng);
  }
}

TEST_F(GroupedFp8Gpu, EmptyAndSingleRowGroupsRaggedK) {
  std::mt19937 rng(12);
  for (int tile_n : {128, 256, 0}) {
    Case c;
    c.schedule = tile_n == 0 ? KJIT_GROUPED_SCHEDULE_PINGPONG : KJIT_GROUPED_SCHEDULE_COOPERATIVE;
    c.sizes = {0, 1, 130, 0, 77, 128, 0};
    c.n = 200;  // not a multiple of the tile
    c.k = 208;  // 16-byte rows, not a multiple of the 128 K tile
    c.tail = 5;
    c.tile_n = tile_n;
    run(c, rng);
  }
}

TEST_F(GroupedFp8Gpu, EveryEpiloguePiece) {
  std::mt19937 rng(13);
  for (int act = 0; act <= KJIT_GROUPED_ACT_SILU; ++act) {
    Case c;
    c.sizes = {70, 0, 150, 33};
    c.n = 136;
    c.k = 256;
    c.act = act;
    c.bias = act % 2 == 1 || act == 2;
    c.alpha = 0.5;
    c.beta = act >= 2 ? -0.75 : 0.0;
    c.schedule = act >= 2 ? KJIT_GROUPED_SCHEDULE_PINGPONG : 0;
    c.tile_n = act >= 2 ? 0 : 128;
    run(c, rng);
  }
}

TEST_F(GroupedFp8Gpu, SwigluGatedEpilogue) {
  // The gate column j scaled by scale_b[g, j], the up column by scale_b[g, n/2 + j].
  std::mt19937 rng(14);
  struct V {
    int order, tile_n, schedule;
    bool portable;
  };
  const V vs[] = {{KJIT_GROUPED_B_NK, 0, KJIT_GROUPED_SCHEDULE_PINGPONG, false},
                  {KJIT_GROUPED_B_NK, 256, KJIT_GROUPED_SCHEDULE_COOPERATIVE, false},
                  {KJIT_GROUPED_B_KN, 0, 0, false},
                  {KJIT_GROUPED_B_NK, 0, 0, true}};
  int i = 0;
  for (const V& v : vs) {
    Case c;
    c.sizes = {70, 0, 150, 1, 64, 129};
    c.tail = 3;
    c.n = 2 * 150;
    c.k = 336;
    c.b_order = v.order;
    c.act = KJIT_GROUPED_ACT_SWIGLU;
    c.tile_n = v.tile_n;
    c.schedule = v.schedule;
    c.portable = v.portable;
    c.bias = i % 2 == 0;
    c.beta = i % 2 == 1 ? -0.75 : 0.0;
    EXPECT_NE(run(c, rng).find("swiglu"), std::string::npos);
    ++i;
  }
}

TEST_F(GroupedFp8Gpu, UnscaledPortableAndUnalignedK) {
  std::mt19937 rng(15);
  Case c;
  c.sizes = {40, 1, 0, 90};
  c.n = 128;
  c.k = 256;
  c.scaled = false;  // KJIT_GROUPED_SCALE_NONE: plain fp8
  EXPECT_EQ(run(c, rng).find("scale=row"), std::string::npos);
  c.scaled = true;
  c.k = 200;  // rows of 200 bytes: not TMA-able
  c.act = KJIT_GROUPED_ACT_SILU;
  c.bias = true;
  run(c, rng);
  c.k = 256;
  c.portable = true;
  run(c, rng);
}

TEST_F(GroupedFp8Gpu, ManyGroupsLongK) {
  // 128 groups of 0..9 rows (decode-like, the cooperative schedule) and a K of 9 tiles (more
  // k-blocks than stages; the pingpong consumers take turns over a wrapping ring).
  std::mt19937 rng(16);
  Case c;
  std::uniform_int_distribution<int> size(0, 9);
  for (int g = 0; g < 128; ++g) c.sizes.push_back(size(rng));
  c.n = 128;
  c.k = 1152;
  run(c, rng);
  Case p;
  p.sizes = {1000, 0, 1031, 990};
  p.n = 512;
  p.k = 1152;
  p.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  EXPECT_NE(run(p, rng).find(hopper() ? " pp " : "in=e4m3"), std::string::npos);
}

}  // namespace

namespace {

TEST_F(GroupedFp8Gpu, BlockScales) {
  // DeepSeek-style scales: per row and 128-wide K block for A, per 128 x 128 block for B,
  // applied as each K block is promoted into the main accumulator. Ragged and empty groups,
  // K and N not multiples of 128, several K blocks, every activation and SwiGLU, the
  // portable kernel (B order KN, portable_only).
  std::mt19937 rng(17);
  struct V {
    int order, act, n, k;
    bool portable, bias;
    double beta;
  };
  const V vs[] = {
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_NONE, 200, 208, false, false, 0.0},
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_SILU, 384, 1040, false, true, -0.5},
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_GELU, 136, 512, false, false, 0.75},
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_RELU, 256, 384, false, true, 0.0},
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_SWIGLU, 2 * 192, 400, false, true, 0.0},
      {KJIT_GROUPED_B_KN, KJIT_GROUPED_ACT_SWIGLU, 2 * 100, 272, false, false, 0.5},
      {KJIT_GROUPED_B_NK, KJIT_GROUPED_ACT_NONE, 200, 208, true, true, 0.0},
  };
  for (const V& v : vs) {
    Case c;
    c.sizes = {0, 1, 130, 0, 77, 128, 300};
    c.tail = 3;
    c.block = true;
    c.b_order = v.order;
    c.act = v.act;
    c.n = v.n;
    c.k = v.k;
    c.portable = v.portable;
    c.bias = v.bias;
    c.beta = v.beta;
    run(c, rng);
  }
}

}  // namespace
