// Grouped GEMM on a GPU against a float64 CPU reference per group: G = 1 and 256, empty and
// single-row groups, K not a multiple of the tile, N not a multiple of the tile or of 8,
// both B orders, every epilogue piece, the TMA kernel (sm_90) and the portable one, rows
// outside every group left untouched, bad offsets clamped. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

uint16_t f2bf(float f) {
  return kjit::test::f32_to_bf16(f);
}
float bf2f(uint16_t b) {
  return kjit::test::bf16_to_f32(b);
}

constexpr uint16_t kPoison = 0x7fa1;  // a NaN no kernel writes

using DevBuf = kjit::test::DeviceBuffer;

struct Case {
  std::vector<int> sizes;  // rows per group
  int n = 64, k = 64;
  int b_order = KJIT_GROUPED_B_NK;
  int act = KJIT_GROUPED_ACT_NONE;
  bool bias = false;
  double alpha = 1.0, beta = 0.0;
  int tail = 0;   // rows after the last group's end (never written)
  int pad_k = 0;  // extra elements per row of A and B (leading dimension > minimum)
  bool portable = false;
  int tile_n = 0;
  int schedule = 0;
  int cluster_m = 0;
};

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

class GroupedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(kjit_compiler_create(nullptr, 1, &compiler_), KJIT_OK) << kjit_last_error();
    kjit::cuda::primary_context(0);
    check(driver().cuCtxSetCurrent(kjit::cuda::primary_context(0)), "cuCtxSetCurrent");
  }
  void TearDown() override { kjit_compiler_destroy(compiler_); }

  // Runs `c` and compares every row with the reference; returns the plan key used.
  std::string run(const Case& c, std::mt19937& rng) {
    const int G = int(c.sizes.size());
    std::vector<int32_t> offs;
    int rows = 0;
    for (int s : c.sizes) offs.push_back(rows += s);
    const int total = rows + c.tail;
    const int lda = c.k + c.pad_k;
    const bool kn = c.b_order == KJIT_GROUPED_B_KN;
    const int ldb = kn ? c.n + c.pad_k : c.k + c.pad_k;
    const long long stride_b = (long long)(kn ? c.k : c.n) * ldb;
    // SwiGLU: B's columns [0, n/2) are the gate, [n/2, n) the up projection; D has n/2.
    const bool glu = c.act == KJIT_GROUPED_ACT_SWIGLU;
    const int no = glu ? c.n / 2 : c.n;
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint16_t> a(size_t(total) * lda), b(size_t(G) * stride_b), bias(size_t(G) * c.n),
        cm(size_t(total) * no), d(size_t(total) * no, kPoison);
    for (auto& x : a) x = f2bf(dist(rng));
    for (auto& x : b) x = f2bf(dist(rng) * 0.125f);
    for (auto& x : bias) x = f2bf(dist(rng));
    for (auto& x : cm) x = f2bf(dist(rng));
    DevBuf da(a.size() * 2), db(b.size() * 2), dbias(bias.size() * 2), dc(cm.size() * 2),
        dd(d.size() * 2), doffs(offs.size() * 4);
    da.put(a);
    db.put(b);
    dbias.put(bias);
    dc.put(cm);
    dd.put(d);
    doffs.put(offs);

    kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    o.portable_only = c.portable;
    o.tile_n = uint32_t(c.tile_n);
    o.schedule = c.schedule;
    o.cluster_m = uint32_t(c.cluster_m);
    kjit_grouped_gemm* gg = nullptr;
    EXPECT_EQ(kjit_grouped_gemm_create(compiler_, 0, &o, &gg), KJIT_OK) << kjit_last_error();
    if (!gg) return "";
    kjit_grouped_gemm_desc desc;
    kjit_grouped_gemm_desc_init(&desc);
    desc.groups = G;
    desc.rows = total;
    desc.n = c.n;
    desc.k = c.k;
    desc.b_order = c.b_order;
    desc.activation = c.act;
    desc.lda = lda;
    desc.ldb = ldb;
    desc.alpha = c.alpha;
    desc.beta = c.beta;
    const void* cptr = c.beta != 0 ? dc.ptr() : nullptr;
    const void* bptr = c.bias ? dbias.ptr() : nullptr;
    char key[256] = {0};
    EXPECT_EQ(kjit_grouped_gemm_plan_key(gg, &desc, da.ptr(), db.ptr(), cptr, dd.ptr(), bptr, key,
                                         sizeof key, nullptr),
              KJIT_OK);
    EXPECT_EQ(kjit_grouped_gemm_run(gg, &desc, da.ptr(), db.ptr(),
                                    reinterpret_cast<const int32_t*>(doffs.ptr()), cptr, dd.ptr(),
                                    bptr, nullptr),
              KJIT_OK)
        << kjit_last_error();
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    kjit_grouped_gemm_destroy(gg);
    const std::vector<uint16_t> got = dd.get<uint16_t>(d.size());

    double err2 = 0, ref2 = 0;
    size_t bad_unwritten = 0, bad_tol = 0;
    int g = 0, start = 0;
    for (int r = 0; r < total; ++r) {
      while (g < G && r >= offs[g]) start = offs[g++];
      const bool in_group = g < G && r >= start;
      for (int j = 0; j < no; ++j) {
        const uint16_t out = got[size_t(r) * no + j];
        if (!in_group) {
          bad_unwritten += out != kPoison;
          continue;
        }
        // alpha * (A B_g)[r, col] + bias[g, col]
        auto linear = [&](int col) {
          double acc = 0;
          for (int q = 0; q < c.k; ++q) {
            const double bv = kn ? bf2f(b[g * stride_b + (long long)q * ldb + col])
                                 : bf2f(b[g * stride_b + (long long)col * ldb + q]);
            acc += double(bf2f(a[size_t(r) * lda + q])) * bv;
          }
          double v = c.alpha * acc;
          if (c.bias) v += bf2f(bias[size_t(g) * c.n + col]);
          return v;
        };
        double v;
        if (glu) {
          v = act_ref(linear(j), KJIT_GROUPED_ACT_SILU) * linear(no + j);
          if (c.beta != 0) v += c.beta * bf2f(cm[size_t(r) * no + j]);
        } else {
          v = linear(j);
          if (c.beta != 0) v += c.beta * bf2f(cm[size_t(r) * no + j]);
          v = act_ref(v, c.act);
        }
        const double ov = bf2f(out);
        if (!(std::fabs(ov - v) <= 0.02 + 0.02 * std::fabs(v))) ++bad_tol;
        err2 += (ov - v) * (ov - v);
        ref2 += v * v;
      }
    }
    EXPECT_EQ(bad_unwritten, 0u) << key << ": rows outside every group were written";
    EXPECT_EQ(bad_tol, 0u) << key << ": elements off by more than bf16 rounding";
    if (ref2 > 0) {
      EXPECT_LT(std::sqrt(err2 / ref2), 1e-2) << key;
    }
    return key;
  }

  kjit_compiler* compiler_ = nullptr;
};

bool hopper() {
  return kjit::cuda::compute_capability(0) == 90;
}

TEST_F(GroupedGpu, SingleGroupBothOrders) {
  std::mt19937 rng(1);
  for (int order : {KJIT_GROUPED_B_KN, KJIT_GROUPED_B_NK}) {
    Case c;
    c.sizes = {300};
    c.n = 256;
    c.k = 192;
    c.b_order = order;
    const std::string key = run(c, rng);
    if (hopper()) {
      EXPECT_NE(key.find(" tma "), std::string::npos) << key;
    }
  }
}

TEST_F(GroupedGpu, EmptyAndSingleRowGroupsRaggedShapes) {
  std::mt19937 rng(2);
  for (int order : {KJIT_GROUPED_B_KN, KJIT_GROUPED_B_NK}) {
    for (int tile_n : {128, 256, 0}) {
      Case c;
      c.schedule = tile_n == 0 ? KJIT_GROUPED_SCHEDULE_PINGPONG : 0;
      c.sizes = {0, 1, 130, 0, 77, 128, 0};
      c.n = 200;  // not a multiple of the tile
      c.k = 200;  // not a multiple of 64
      c.b_order = order;
      c.tail = 5;
      c.tile_n = tile_n;
      const std::string key = run(c, rng);
      if (hopper()) {
        EXPECT_NE(key.find(" tma "), std::string::npos) << key;
      }
    }
  }
}

TEST_F(GroupedGpu, EveryEpiloguePiece) {
  std::mt19937 rng(3);
  // Each activation once, with the other pieces and both B orders spread over the runs
  // (every run is a configuration of its own: a compile).
  for (int act = 0; act <= KJIT_GROUPED_ACT_SILU; ++act) {
    Case c;
    c.sizes = {70, 0, 150, 33};
    c.n = 136;
    c.k = 128;
    c.b_order = act % 2 ? KJIT_GROUPED_B_KN : KJIT_GROUPED_B_NK;
    c.act = act;
    c.bias = act % 2 == 1 || act == 2;
    c.alpha = 0.5;
    c.beta = act >= 2 ? -0.75 : 0.0;
    c.tile_n = 128;
    c.schedule = act >= 2 ? KJIT_GROUPED_SCHEDULE_PINGPONG : 0;
    run(c, rng);
  }
}

TEST_F(GroupedGpu, PortableKernelAndUnalignedShapes) {
  std::mt19937 rng(4);
  Case c;
  c.sizes = {40, 1, 0, 90};
  c.n = 100;  // KN rows of 200 bytes: not TMA-able
  c.k = 60;   // A rows of 120 bytes: not TMA-able
  c.b_order = KJIT_GROUPED_B_KN;
  c.act = KJIT_GROUPED_ACT_SILU;
  c.bias = true;
  EXPECT_NE(run(c, rng).find(" simt "), std::string::npos);
  c.b_order = KJIT_GROUPED_B_NK;
  c.n = 37;  // odd N: the single-element stores
  c.k = 64;
  c.pad_k = 8;  // padded leading dimensions
  run(c, rng);
  c.portable = true;  // the same through the portable kernel on any device
  c.n = 200;
  c.k = 200;
  c.pad_k = 0;
  EXPECT_NE(run(c, rng).find(" simt "), std::string::npos);
}

TEST_F(GroupedGpu, ManyGroups) {
  std::mt19937 rng(5);
  Case c;
  std::uniform_int_distribution<int> size(0, 9);
  for (int g = 0; g < 256; ++g) c.sizes.push_back(size(rng));
  c.n = 128;
  c.k = 64;
  run(c, rng);
  c.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;  // odd tile counts per CTA, ragged groups
  c.k = 520;                                    // more k-blocks than stages
  run(c, rng);
}

TEST_F(GroupedGpu, PingpongManyTilesPerCtaAndLongK) {
  // Several tiles per CTA and more k-blocks than stages: the consumers take turns over a
  // ring that wraps many times (a consumer running ahead would read another tile's stage).
  std::mt19937 rng(6);
  Case c;
  c.sizes = {1000, 0, 1031, 990, 1003};
  c.n = 1024;
  c.k = 520;
  c.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  const std::string key = run(c, rng);
  if (hopper()) {
    EXPECT_NE(key.find(" pp "), std::string::npos) << key;
  }
}

TEST_F(GroupedGpu, SwigluGatedEpilogue) {
  // out = silu(gate) * up over B's two column halves, with alpha, beta * C and the per-group
  // bias (of both halves) around it: ragged and empty groups, K not a multiple of 64, an
  // output width (n/2) that is not a multiple of the tile nor even, both B orders, both
  // schedules and both tile widths, and the portable kernel.
  std::mt19937 rng(7);
  struct V {
    int order, tile_n, schedule, n, k;
    bool portable;
  };
  const V vs[] = {
      {KJIT_GROUPED_B_NK, 0, KJIT_GROUPED_SCHEDULE_PINGPONG, 2 * 150, 200, false},
      {KJIT_GROUPED_B_KN, 0, KJIT_GROUPED_SCHEDULE_PINGPONG, 2 * 200, 136, false},
      {KJIT_GROUPED_B_NK, 256, KJIT_GROUPED_SCHEDULE_COOPERATIVE, 2 * 147, 264, false},
      {KJIT_GROUPED_B_KN, 256, KJIT_GROUPED_SCHEDULE_COOPERATIVE, 2 * 136, 72, false},
      {KJIT_GROUPED_B_NK, 128, KJIT_GROUPED_SCHEDULE_COOPERATIVE, 2 * 131, 128, false},
      {KJIT_GROUPED_B_KN, 0, 0, 2 * 77, 100, true},
      // KN with n/2 not a multiple of 8: the up half cannot be copied by TMA from column
      // n/2 (it trapped), so the portable kernel takes it; n/2 = 104 stays on TMA.
      {KJIT_GROUPED_B_KN, 0, 0, 2 * 100, 136, false},
      {KJIT_GROUPED_B_KN, 256, KJIT_GROUPED_SCHEDULE_COOPERATIVE, 2 * 104, 136, false},
  };
  int i = 0;
  for (const V& v : vs) {
    Case c;
    c.sizes = {70, 0, 150, 1, 64, 129};
    c.tail = 3;
    c.n = v.n;
    c.k = v.k;
    c.b_order = v.order;
    c.act = KJIT_GROUPED_ACT_SWIGLU;
    c.tile_n = v.tile_n;
    c.schedule = v.schedule;
    c.portable = v.portable;
    c.bias = i % 2 == 0;
    c.alpha = i % 3 == 0 ? 1.0 : 0.5;
    c.beta = i % 2 == 1 ? -0.75 : 0.0;
    const std::string key = run(c, rng);
    EXPECT_NE(key.find("swiglu"), std::string::npos) << key;
    const bool tma_able = !v.portable && !(v.order == KJIT_GROUPED_B_KN && (v.n / 2) % 8 != 0);
    if (hopper() && tma_able) {
      EXPECT_NE(key.find(" tma "), std::string::npos) << key;
    }
    ++i;
  }
}

TEST_F(GroupedGpu, PartialTilesOfEverySizeBothSchedules) {
  // Groups whose last tile has 1..64 rows (the half without rows issues no wgmma) and 65..127
  // (both halves), in both schedules and both tile widths, many tiles per CTA.
  std::mt19937 rng(8);
  for (int schedule : {KJIT_GROUPED_SCHEDULE_COOPERATIVE, KJIT_GROUPED_SCHEDULE_PINGPONG}) {
    Case c;
    c.sizes = {1, 63, 64, 65, 127, 128, 129, 191, 192, 193, 0, 320};
    c.n = 264;
    c.k = 136;
    c.schedule = schedule;
    c.tile_n = schedule == KJIT_GROUPED_SCHEDULE_COOPERATIVE ? 256 : 0;
    c.bias = true;
    run(c, rng);
  }
}

TEST_F(GroupedGpu, TwoCtaClusterSharesB) {
  // The 2x1 cluster: a cluster's two CTAs take rows [r, r + 128) and [r + 128, r + 256) of
  // a group and multicast B's stages into each other. Groups whose rows leave the second
  // CTA empty (1..128 rows in the last cluster tile), or its tile partial, or both full;
  // empty groups; the last group ending at the last row (the second CTA's rows past every
  // row of A); K not a multiple of 64 with more k-blocks than stages; N not a multiple of
  // the tile; both B orders, both tile widths, plain with every piece and gated.
  std::mt19937 rng(10);
  struct V {
    int order, tile_n, act, n;
    bool pieces;
  };
  const V vs[] = {
      {KJIT_GROUPED_B_NK, 256, KJIT_GROUPED_ACT_NONE, 600, false},
      {KJIT_GROUPED_B_KN, 256, KJIT_GROUPED_ACT_SILU, 600, true},
      {KJIT_GROUPED_B_NK, 128, KJIT_GROUPED_ACT_GELU, 392, true},
      {KJIT_GROUPED_B_NK, 256, KJIT_GROUPED_ACT_SWIGLU, 2 * 328, true},
      {KJIT_GROUPED_B_KN, 256, KJIT_GROUPED_ACT_SWIGLU, 2 * 264, false},
  };
  for (const V& v : vs) {
    Case c;
    c.sizes = {1, 127, 128, 129, 255, 256, 0, 257, 384, 513, 64};
    c.n = v.n;
    c.k = 1000;
    c.b_order = v.order;
    c.act = v.act;
    c.tile_n = v.tile_n;
    c.cluster_m = 2;
    c.bias = v.pieces;
    c.alpha = v.pieces ? 0.5 : 1.0;
    c.beta = v.pieces ? -0.75 : 0.0;
    const std::string key = run(c, rng);
    if (hopper()) {
      EXPECT_NE(key.find(" c2x1"), std::string::npos) << key;
    }
  }
}

TEST_F(GroupedGpu, DecodeSixtyFourRowTile) {
  // Groups of fewer than 64 rows on average with the schedule left to the heuristic: the
  // 64-row tile with one consumer warpgroup. More tiles than SMs (several per CTA), K not a
  // multiple of 64 and more k-blocks than stages (the ring wraps many times), a group of 65
  // rows (two 64-row tiles), empty and single-row groups, N not a multiple of the tile, both
  // tile widths and B orders, the plain epilogue with every piece and the gated one.
  std::mt19937 rng(9);
  struct V {
    int order, tile_n, act, n;
    bool pieces;
  };
  const V vs[] = {
      {KJIT_GROUPED_B_NK, 0, KJIT_GROUPED_ACT_NONE, 600, false},
      {KJIT_GROUPED_B_KN, 0, KJIT_GROUPED_ACT_SILU, 600, true},
      {KJIT_GROUPED_B_NK, 128, KJIT_GROUPED_ACT_GELU, 648, true},
      {KJIT_GROUPED_B_KN, 128, KJIT_GROUPED_ACT_NONE, 520, false},
      {KJIT_GROUPED_B_NK, 0, KJIT_GROUPED_ACT_SWIGLU, 2 * 520, true},
  };
  for (const V& v : vs) {
    Case c;
    std::uniform_int_distribution<int> size(0, 8);
    for (int g = 0; g < 60; ++g) c.sizes.push_back(size(rng));
    c.sizes[3] = 65;
    c.sizes[7] = 1;
    c.sizes[8] = 0;
    c.tail = 2;
    c.n = v.n;
    c.k = 1000;
    c.b_order = v.order;
    c.act = v.act;
    c.tile_n = v.tile_n;
    c.bias = v.pieces;
    c.alpha = v.pieces ? 0.5 : 1.0;
    c.beta = v.pieces ? -0.75 : 0.0;
    const std::string key = run(c, rng);
    if (hopper()) {
      EXPECT_NE(key.find(" tma 64x"), std::string::npos) << key;
    }
  }
}

TEST_F(GroupedGpu, BadOffsetsAreClampedNotFollowed) {
  // Decreasing and too-large ends: rows stay inside [0, rows) and nothing faults.
  const int rows = 64, n = 64, k = 64, G = 3;
  std::vector<uint16_t> a(rows * k, f2bf(1.0f)), b(G * n * k, f2bf(1.0f)), d(rows * n, kPoison);
  const std::vector<int32_t> offs = {40, 10, 1 << 20};
  DevBuf da(a.size() * 2), db(b.size() * 2), dd(d.size() * 2), doffs(12);
  da.put(a);
  db.put(b);
  dd.put(d);
  doffs.put(offs);
  kjit_grouped_gemm* gg = nullptr;
  ASSERT_EQ(kjit_grouped_gemm_create(compiler_, 0, nullptr, &gg), KJIT_OK) << kjit_last_error();
  kjit_grouped_gemm_desc desc;
  kjit_grouped_gemm_desc_init(&desc);
  desc.groups = G;
  desc.rows = rows;
  desc.n = n;
  desc.k = k;
  desc.b_order = KJIT_GROUPED_B_NK;
  EXPECT_EQ(kjit_grouped_gemm_run(gg, &desc, da.ptr(), db.ptr(),
                                  reinterpret_cast<const int32_t*>(doffs.ptr()), nullptr, dd.ptr(),
                                  nullptr, nullptr),
            KJIT_OK)
      << kjit_last_error();
  EXPECT_EQ(driver().cuCtxSynchronize(), CUDA_SUCCESS);
  const std::vector<uint16_t> got = dd.get<uint16_t>(d.size());
  for (int r = 0; r < rows; ++r) EXPECT_EQ(bf2f(got[size_t(r) * n]), float(k)) << "row " << r;
  kjit_grouped_gemm_destroy(gg);
}

TEST_F(GroupedGpu, PrepareCompilesAheadAndZeroRowsLaunchNothing) {
  kjit_grouped_gemm* gg = nullptr;
  ASSERT_EQ(kjit_grouped_gemm_create(compiler_, 0, nullptr, &gg), KJIT_OK) << kjit_last_error();
  kjit_grouped_gemm_desc desc;
  kjit_grouped_gemm_desc_init(&desc);
  desc.groups = 8;
  desc.rows = 0;
  desc.n = 256;
  desc.k = 256;
  EXPECT_EQ(kjit_grouped_gemm_prepare(gg, &desc, 1), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(kjit_grouped_gemm_run(gg, &desc, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr),
            KJIT_OK);
  kjit_grouped_gemm_destroy(gg);
}

}  // namespace
