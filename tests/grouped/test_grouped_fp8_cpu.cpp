// fp8 e4m3 grouped GEMM without a GPU: the checks of types and row-wise scales (through the C
// API: kjit_grouped_gemm_check and kjit_grouped_gemm_run_scaled, which checks its arguments
// before its handle), the configuration choice, rendering and keys of every fp8 configuration
// class, plan keys by type and scale form, and the fp8 kernels compiled by NVRTC (sm_90a
// CUBIN for the TMA kernel, sm_80 for the portable one) with their parameter layout.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "api/handles.h"
#include "compile/compiler.h"
#include "grouped/grouped.h"
#include "grouped/grouped_compile.h"
#include "grouped/plan.h"
#include "grouped/render.h"
#include "kjit/kjit.h"
#include "nvrtc/options.h"
#include "support/test_support.h"

using namespace kjit;
using namespace kjit::grouped;
using kjit::test::TempDir;
using kjit::test::grouped::expect_param_layout;

namespace {

kjit_grouped_gemm_desc fp8_desc() {
  kjit_grouped_gemm_desc d;
  EXPECT_EQ(kjit_grouped_gemm_desc_init(&d), KJIT_OK);
  d.groups = 4;
  d.rows = 100;
  d.n = 96;
  d.k = 128;
  d.b_order = KJIT_GROUPED_B_NK;
  d.a_type = KJIT_GEMM_F8_E4M3;
  d.scale_mode = KJIT_GROUPED_SCALE_ROWWISE;
  return d;
}

const void* ptr(uintptr_t v) {
  return reinterpret_cast<const void*>(v);
}
const float* fptr(uintptr_t v) {
  return reinterpret_cast<const float*>(v);
}
const int32_t* offs_ptr() {
  return reinterpret_cast<const int32_t*>(uintptr_t(0x10000));
}

kjit_status check(const kjit_grouped_gemm_desc& d) {
  return kjit_grouped_gemm_check(&d, ptr(0x20000), ptr(0x30000), offs_ptr(), nullptr, ptr(0x40000),
                                 nullptr);
}

// run_scaled without a handle: its argument checks, then KJIT_ERROR_INVALID_HANDLE.
kjit_status run_scaled(const kjit_grouped_gemm_desc& d, const float* sa, const float* sb,
                       const void* a = ptr(0x20000)) {
  return kjit_grouped_gemm_run_scaled(nullptr, &d, a, ptr(0x30000), offs_ptr(), nullptr,
                                      const_cast<void*>(ptr(0x40000)), nullptr, sa, sb, nullptr);
}

bool says(const char* needle) {
  return std::string(kjit_last_error()).find(needle) != std::string::npos;
}

Problem problem(const kjit_grouped_gemm_desc& d, uintptr_t a = 0x1000) {
  Scales s;
  s.check = true;
  s.a = fptr(0x5000);
  s.b = fptr(0x6000);
  if (d.scale_mode == KJIT_GROUPED_SCALE_NONE) s.a = s.b = nullptr;
  return grouped::check(d, ptr(a), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr, true, s);
}

Config tma8(int tile_n, int stages, bool pingpong) {
  Config c;
  c.path = Path::Tma;
  c.target = "sm_90a";
  c.tile_m = 128;
  c.tile_n = tile_n;
  c.tile_k = 128;
  c.stages = stages;
  c.pingpong = pingpong;
  c.b_order = BOrder::NK;
  c.in = DType::E4m3;
  c.scale = Scale::Row;
  return c;
}

Config simt8(const std::string& target, BOrder order) {
  Config c;
  c.target = target;
  c.b_order = order;
  c.in = DType::E4m3;
  c.scale = Scale::Row;
  return c;
}

}  // namespace

// ---- checks -----------------------------------------------------------------------------------

TEST(GroupedFp8Check, TypesAndScaleForms) {
  kjit_grouped_gemm_desc d = fp8_desc();
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
  d.b_type = KJIT_GEMM_F8_E4M3;
  d.d_type = KJIT_GEMM_BF16;
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
  d.scale_mode = KJIT_GROUPED_SCALE_NONE;  // unscaled fp8 is offered too
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
  // A 1-byte type: A and B need no 2-byte alignment.
  EXPECT_EQ(kjit_grouped_gemm_check(&d, ptr(0x20001), ptr(0x30003), offs_ptr(), nullptr,
                                    ptr(0x40000), nullptr),
            KJIT_OK)
      << kjit_last_error();

  d = fp8_desc();
  d.b_type = KJIT_GEMM_BF16;
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  EXPECT_TRUE(says("one type")) << kjit_last_error();
  d = fp8_desc();
  d.d_type = KJIT_GEMM_F8_E4M3;
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  EXPECT_TRUE(says("d_type is fp8 e4m3")) << kjit_last_error();
  d = fp8_desc();
  d.a_type = KJIT_GEMM_F8_E5M2;
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  EXPECT_TRUE(says("a_type is fp8 e5m2")) << kjit_last_error();
  d = fp8_desc();
  d.a_type = KJIT_GEMM_BF16;  // scales with bf16
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  EXPECT_TRUE(says("scale_mode")) << kjit_last_error();
  d = fp8_desc();
  d.scale_mode = 3;
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_mode is 3")) << kjit_last_error();
  d.scale_mode = KJIT_GROUPED_SCALE_BLOCK128;
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
  d.a_type = KJIT_GEMM_BF16;  // block scales with bf16
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  d = fp8_desc();
  d.reserved1 = 1;
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("reserved1")) << kjit_last_error();
}

TEST(GroupedFp8Check, ScalePointersAreCheckedBeforeTheHandle) {
  const kjit_grouped_gemm_desc d = fp8_desc();
  EXPECT_EQ(run_scaled(d, fptr(0x5000), fptr(0x6000)), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(run_scaled(d, nullptr, fptr(0x6000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_a is NULL")) << kjit_last_error();
  EXPECT_EQ(run_scaled(d, fptr(0x5000), nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_b is NULL")) << kjit_last_error();
  EXPECT_EQ(run_scaled(d, fptr(0x5002), fptr(0x6000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_a is not aligned to 4 bytes")) << kjit_last_error();
  EXPECT_EQ(run_scaled(d, fptr(0x5000), fptr(0x6001)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_b is not aligned to 4 bytes")) << kjit_last_error();
  // The problem's own checks come first too.
  kjit_grouped_gemm_desc bad = d;
  bad.groups = 0;
  EXPECT_EQ(run_scaled(bad, fptr(0x5000), fptr(0x6000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("groups")) << kjit_last_error();
  // Scales given where the desc has none.
  kjit_grouped_gemm_desc none = d;
  none.scale_mode = KJIT_GROUPED_SCALE_NONE;
  EXPECT_EQ(run_scaled(none, fptr(0x5000), nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_a is given")) << kjit_last_error();
  EXPECT_EQ(run_scaled(none, nullptr, fptr(0x6000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_b is given")) << kjit_last_error();
  EXPECT_EQ(run_scaled(none, nullptr, nullptr), KJIT_ERROR_INVALID_HANDLE);
  kjit_grouped_gemm_desc block = d;
  block.scale_mode = KJIT_GROUPED_SCALE_BLOCK128;
  EXPECT_EQ(run_scaled(block, fptr(0x5000), fptr(0x6000)), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(run_scaled(block, fptr(0x5000), nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_b is NULL but scale_mode is KJIT_GROUPED_SCALE_BLOCK128"))
      << kjit_last_error();
  EXPECT_EQ(run_scaled(block, fptr(0x5001), fptr(0x6000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(says("scale_a is not aligned")) << kjit_last_error();
  // kjit_grouped_gemm_run() has no scales: a scaled desc is refused with a pointer to
  // run_scaled().
  EXPECT_EQ(kjit_grouped_gemm_run(nullptr, &d, ptr(16), ptr(16), offs_ptr(), nullptr,
                                  const_cast<void*>(ptr(16)), nullptr, nullptr),
            KJIT_ERROR_INVALID_HANDLE);  // run() checks the handle first, as in 0.2
  // No rows: nothing is read, NULL scales are fine.
  kjit_grouped_gemm_desc empty = d;
  empty.rows = 0;
  EXPECT_EQ(kjit_grouped_gemm_run_scaled(nullptr, &empty, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, nullptr, nullptr, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
}

TEST(GroupedFp8Check, TheInternalCheckRefusesMissingScalesForRun) {
  const kjit_grouped_gemm_desc d = fp8_desc();
  Scales none;
  none.check = true;
  EXPECT_THROW(grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000),
                              nullptr, true, none),
               Error);
  const Problem p = problem(d);
  EXPECT_EQ(p.in, DType::E4m3);
  EXPECT_EQ(p.scale, Scale::Row);
  EXPECT_EQ(p.scale_a, fptr(0x5000));
  EXPECT_EQ(p.scale_b, fptr(0x6000));
}

// ---- configuration choice ---------------------------------------------------------------------

TEST(GroupedFp8Choose, TmaForOrderNkPortableOtherwise) {
  kjit_grouped_gemm_desc d = fp8_desc();
  Config c = choose(problem(d), 90, true, Options());
  EXPECT_EQ(c.path, Path::Tma);
  EXPECT_EQ(c.tile_k, 128);
  EXPECT_EQ(c.in, DType::E4m3);
  EXPECT_NE(c.key().find(" in=e4m3 scale=row epi=alpha"), std::string::npos) << c.key();
  EXPECT_NE(c.key().find("x128 "), std::string::npos) << c.key();
  validate(c);
  // B order KN: the fp8 wgmma reads B K-major only, so the portable kernel takes it.
  d.b_order = KJIT_GROUPED_B_KN;
  c = choose(problem(d), 90, true, Options());
  EXPECT_EQ(c.path, Path::Simt);
  EXPECT_EQ(c.target, "sm_90");
  EXPECT_NE(c.key().find(" simt 64x64x16 s1 c1x1 b=kn in=e4m3 scale=row"), std::string::npos)
      << c.key();
  // K rows of 8 bytes (K not a multiple of 16): no TMA.
  d = fp8_desc();
  d.k = 200;
  EXPECT_EQ(choose(problem(d), 90, true, Options()).path, Path::Simt);
  d.k = 208;  // 16-byte rows, K not a multiple of the 128 tile: TMA
  EXPECT_EQ(choose(problem(d), 90, true, Options()).path, Path::Tma);
  // A not 16-byte aligned: no TMA.
  EXPECT_EQ(choose(problem(d, 0x1008), 90, true, Options()).path, Path::Simt);
  // sm_80 and sm_89 (no fp8 wgmma): the portable kernel.
  d = fp8_desc();
  EXPECT_EQ(choose(problem(d), 80, true, Options()).path, Path::Simt);
  EXPECT_EQ(choose(problem(d), 89, true, Options()).target, "sm_89");
  // Every autotune candidate of an fp8 class keeps the fp8 tile and validates.
  DeviceInfo dev;
  dev.cc = 90;
  dev.sm_count = 132;
  dev.max_shared = 232448;
  const std::vector<Config> cands = candidates(choose(problem(d), 90, true, Options()), dev);
  EXPECT_GT(cands.size(), 3u);
  for (const Config& k : cands) {
    EXPECT_EQ(k.tile_k, 128) << k.key();
    EXPECT_EQ(k.in, DType::E4m3) << k.key();
    validate(k);
  }
}

// fp8 prefill takes the cooperative 128x128 tile with the TMA store epilogue where D suits
// a tensor map; pingpong (5 stages) where it does not, or when the options ask for it.
TEST(GroupedFp8Choose, PrefillTakesTheCooperativeTileWithTmaStores) {
  kjit_grouped_gemm_desc d = fp8_desc();
  d.rows = 100000;
  Config c = choose(problem(d), 90, true, Options());
  EXPECT_NE(c.key().find("tma 128x128x128 s6 st=tma c1x1 b=nk in=e4m3 scale=row"),
            std::string::npos)
      << c.key();
  validate(c);
  const Problem odd = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3008),
                                     nullptr, true, [] {
                                       Scales s;
                                       s.check = true;
                                       s.a = fptr(0x5000);
                                       s.b = fptr(0x6000);
                                       return s;
                                     }());
  c = choose(odd, 90, true, Options());  // D 8-byte aligned: no tensor map for it
  EXPECT_NE(c.key().find("tma 128x128x128 s5 pp c1x1"), std::string::npos) << c.key();
  Options pp;
  pp.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  c = choose(problem(d), 90, true, pp);
  EXPECT_NE(c.key().find("tma 128x128x128 s5 pp c1x1"), std::string::npos) << c.key();
}

TEST(GroupedFp8Choose, BlockScalesTakeTheCooperative128Tile) {
  kjit_grouped_gemm_desc d = fp8_desc();
  d.scale_mode = KJIT_GROUPED_SCALE_BLOCK128;
  d.rows = 100000;  // prefill-sized: the pingpong schedule for other forms
  Options forced;
  forced.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  for (const Options& o : {Options(), forced}) {
    const Config c = choose(problem(d), 90, true, o);
    EXPECT_EQ(c.path, Path::Tma);
    EXPECT_FALSE(c.pingpong);
    EXPECT_EQ(c.tile_n, 128);
    EXPECT_NE(c.key().find("128x128x128 s6 st=tma c1x1 b=nk in=e4m3 scale=block128"),
              std::string::npos)
        << c.key();
    validate(c);
  }
  // SwiGLU: the up half of a 64-column gated tile must lie in one 128-column block.
  d.activation = KJIT_GROUPED_ACT_SWIGLU;
  d.n = 2 * 192;
  EXPECT_EQ(choose(problem(d), 90, true, Options()).path, Path::Tma);
  d.n = 2 * 96;
  EXPECT_EQ(choose(problem(d), 90, true, Options()).path, Path::Simt);
  // Autotune candidates of a block-scaled class: only cooperative 128x128 ones.
  DeviceInfo dev;
  dev.cc = 90;
  dev.sm_count = 132;
  dev.max_shared = 232448;
  d = fp8_desc();
  d.scale_mode = KJIT_GROUPED_SCALE_BLOCK128;
  for (const Config& k : candidates(choose(problem(d), 90, true, Options()), dev)) {
    EXPECT_FALSE(k.pingpong) << k.key();
    EXPECT_EQ(k.tile_n, 128) << k.key();
  }
}

// ---- rendering and keys -------------------------------------------------------------------------

TEST(GroupedFp8Render, EveryConfigurationClassRendersWithDistinctKeys) {
  std::vector<Config> all;
  for (int scaled = 0; scaled < 2; ++scaled) {
    for (int act = 0; act <= int(Act::Swiglu); ++act) {
      for (int pieces = 0; pieces < 4; ++pieces) {
        for (int fam = 0; fam < 6; ++fam) {
          Config c = fam == 0   ? tma8(128, 6, false)
                     : fam == 1 ? tma8(256, 4, false)
                     : fam == 2 ? tma8(128, 6, true)
                     : fam == 3 ? simt8("sm_80", BOrder::KN)
                     : fam == 4 ? simt8("sm_80", BOrder::NK)
                                : simt8("sm_89", BOrder::NK);
          c.scale = scaled ? Scale::Row : Scale::None;
          c.act = Act(act);
          c.has_c = pieces & 1;
          c.has_bias = pieces & 2;
          all.push_back(c);
        }
      }
    }
  }
  std::set<std::string> keys, sources;
  for (const Config& c : all) {
    const std::string src = render(c);
    keys.insert(c.key());
    sources.insert(c.target + "\n" + src);
    EXPECT_FALSE(may_read_files(src, compile_options(c))) << c.key();
    EXPECT_EQ(src.find("bf16_t* __restrict__ A"), std::string::npos) << c.key();
    EXPECT_NE(src.find("const unsigned char* __restrict__ A"), std::string::npos) << c.key();
    EXPECT_EQ(src.find("scale_a") != std::string::npos, c.scale == Scale::Row) << c.key();
    if (c.path == Path::Tma) {
      EXPECT_NE(src.find("k32.f32.e4m3.e4m3"), std::string::npos) << c.key();
      EXPECT_NE(src.find("kk < TILE_K / 32"), std::string::npos) << c.key();
      EXPECT_EQ(src.find("f82f"), std::string::npos) << c.key();
    } else {
      EXPECT_NE(src.find("f82f(A["), std::string::npos) << c.key();
      EXPECT_NE(src.find("f82f(Bg["), std::string::npos) << c.key();
      EXPECT_EQ(src.find("bf2f(A["), std::string::npos) << c.key();
    }
  }
  EXPECT_EQ(keys.size(), all.size());
  EXPECT_EQ(sources.size(), all.size());
  EXPECT_EQ(tma8(256, 4, false).key(),
            "grouped-v1 sm_90a tma 128x256x128 s4 c1x1 b=nk in=e4m3 scale=row epi=alpha");
  // The bf16 configuration of the same tile keeps its 0.2 key and source.
  Config bf = tma8(256, 4, false);
  bf.in = DType::Bf16;
  bf.scale = Scale::None;
  bf.tile_k = 64;
  EXPECT_EQ(bf.key(), "grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk epi=alpha");
  EXPECT_EQ(render(bf).find("e4m3"), std::string::npos);
  // Same shared memory as bf16: 128 bytes of K per row either way.
  EXPECT_EQ(shared_bytes(tma8(256, 4, false)), shared_bytes(bf));
  EXPECT_EQ(b_box(tma8(256, 4, false)).inner, 128u);
  Config glu = tma8(256, 4, false);
  glu.act = Act::Swiglu;
  EXPECT_EQ(b_box(glu).outer, 128u);
}

TEST(GroupedFp8Render, BlockScaleConfigurations) {
  std::set<std::string> keys;
  for (int act = 0; act <= int(Act::Swiglu); ++act) {
    for (int fam = 0; fam < 3; ++fam) {
      Config c =
          fam == 0 ? tma8(128, 6, false) : simt8("sm_80", fam == 1 ? BOrder::KN : BOrder::NK);
      c.scale = Scale::Block128;
      c.act = Act(act);
      c.has_bias = act % 2;
      const std::string src = render(c);
      keys.insert(c.key());
      EXPECT_NE(c.key().find("scale=block128"), std::string::npos);
      if (c.path == Path::Tma) {
        EXPECT_NE(src.find("main_acc[4 * j] += acc[4 * j]"), std::string::npos) << c.key();
        EXPECT_NE(src.find("#define GLU " + std::string(act == 4 ? "1" : "0")), std::string::npos);
      } else {
        EXPECT_NE(src.find("__ldg(scale_a + (long long)r * KB + kk / 128)"), std::string::npos);
        EXPECT_NE(src.find("__ldg(sbg + (long long)(col / 128) * KB + kk / 128)"),
                  std::string::npos)
            << c.key();
        if (act == 4) {
          EXPECT_NE(src.find("__ldg(sbg + (long long)((NO + col) / 128) * KB + kk / 128)"),
                    std::string::npos);
        }
      }
    }
  }
  EXPECT_EQ(keys.size(), 15u);
  Config c = tma8(128, 6, true);  // pingpong holds two accumulators: no room for the main one
  c.scale = Scale::Block128;
  EXPECT_THROW(render(c), Error);
  c = tma8(256, 4, false);
  c.scale = Scale::Block128;
  EXPECT_THROW(render(c), Error);
}

TEST(GroupedFp8Render, InvalidConfigurationsAreRefused) {
  Config c = tma8(128, 6, false);
  c.b_order = BOrder::KN;  // fp8 wgmma needs B K-major
  EXPECT_THROW(render(c), Error);
  c = tma8(128, 6, false);
  c.tile_k = 64;
  EXPECT_THROW(render(c), Error);
  c = tma8(256, 6, false);  // 6 x 48 KiB does not fit
  EXPECT_THROW(render(c), Error);
  c = tma8(128, 6, false);
  c.in = DType::Bf16;  // scales with bf16
  c.tile_k = 64;
  EXPECT_THROW(render(c), Error);
  c = simt8("sm_80", BOrder::KN);
  c.scale = Scale(3);
  EXPECT_THROW(render(c), Error);
  c = simt8("sm_80", BOrder::KN);
  c.in = DType(2);
  EXPECT_THROW(render(c), Error);
  c = tma8(256, 4, false);
  c.cluster_m = 2;  // the 2x1 cluster is bf16's
  EXPECT_THROW(render(c), Error);
  // ... and the option leaves fp8 with one CTA.
  kjit_grouped_gemm_desc d = fp8_desc();
  d.rows = 100000;
  Options o;
  o.cluster_m = 2;
  EXPECT_EQ(choose(problem(d), 90, true, o).cluster_m, 1);
  validate(choose(problem(d), 90, true, o));
}

TEST(GroupedFp8Plan, KeysDifferByTypeAndScaleForm) {
  DeviceInfo dev;
  dev.cc = 90;
  dev.sm_count = 132;
  dev.name = "H";
  kjit_grouped_gemm_desc d = fp8_desc();
  const PlanKey scaled = make_key(problem(d), dev);
  d.scale_mode = KJIT_GROUPED_SCALE_NONE;
  const PlanKey unscaled = make_key(problem(d), dev);
  d.a_type = KJIT_GEMM_BF16;
  const PlanKey bf16 = make_key(problem(d), dev);
  EXPECT_FALSE(scaled == unscaled);
  EXPECT_FALSE(scaled == bf16);
  EXPECT_FALSE(unscaled == bf16);
  const std::string v = validators(dev);
  const std::set<std::string> persisted = {persist_key(scaled, v), persist_key(unscaled, v),
                                           persist_key(bf16, v)};
  EXPECT_EQ(persisted.size(), 3u);
  EXPECT_NE(scaled.text().find("e4m3/e4m3/bf16 scale=row b=nk"), std::string::npos)
      << scaled.text();
  EXPECT_NE(bf16.text().find("bf16/bf16/bf16 b=nk epi"), std::string::npos) << bf16.text();
  // A plan persisted for one form is not read back for another.
  PersistedPlan plan;
  plan.config = tma8(256, 4, false);
  const std::string value = encode_plan(scaled, v, plan);
  std::string why;
  EXPECT_TRUE(decode_plan(value, scaled, v, &why)) << why;
  EXPECT_FALSE(decode_plan(value, unscaled, v, &why));
  EXPECT_FALSE(decode_plan(value, bf16, v, &why));
}

// ---- NVRTC --------------------------------------------------------------------------------------

class GroupedFp8Compile : public ::testing::Test {
 protected:
  void SetUp() override {
    kjit_cache_options o;
    kjit_cache_options_init(&o);
    o.directory = dir_.path().c_str();
    ASSERT_EQ(kjit_cache_open(&o, &cache_), KJIT_OK) << kjit_last_error();
  }
  void TearDown() override { kjit_cache_close(cache_); }

  void build(const Config& c, const char* instr) {
    Compiler compiler(cache_->cache.get(), 1);
    CompileOptions o = compile_options(c);
    o.outputs = KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN;
    const Outcome out = compiler.compile(render(c), o);
    ASSERT_EQ(out.status, KJIT_OK)
        << c.key() << ": " << out.message << (out.entry ? out.entry->log : "");
    ASSERT_TRUE(out.entry);
    EXPECT_FALSE(out.entry->cubin.empty()) << c.key();
    const std::string ptx = out.entry->ptx.str();
    if (instr) {
      EXPECT_NE(ptx.find(instr), std::string::npos) << c.key();
    }
    EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << c.key() << out.entry->log;
    expect_param_layout(c, ptx);
  }

  TempDir dir_;
  kjit_cache* cache_ = nullptr;
};

TEST_F(GroupedFp8Compile, TmaKernelsBuildForSm90a) {
  Config coop = tma8(256, 4, false);
  coop.has_bias = true;
  coop.act = Act::Silu;
  build(coop, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3");
  Config pp = tma8(128, 6, true);
  pp.has_c = true;
  pp.act = Act::Swiglu;
  build(pp, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3");
  Config unscaled = tma8(128, 6, false);
  unscaled.scale = Scale::None;
  build(unscaled, "m64n128k32.f32.e4m3.e4m3");
}

TEST_F(GroupedFp8Compile, BlockScaleKernelsBuildForSm90aAndSm80) {
  Config plain = tma8(128, 6, false);
  plain.scale = Scale::Block128;
  build(plain, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3");
  Config glu = plain;
  glu.act = Act::Swiglu;
  glu.has_bias = glu.has_c = true;
  build(glu, "m64n128k32.f32.e4m3.e4m3");
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    Config s = simt8("sm_80", o);
    s.scale = Scale::Block128;
    s.act = o == BOrder::KN ? Act::Swiglu : Act::Relu;
    build(s, nullptr);
  }
}

TEST_F(GroupedFp8Compile, PortableKernelsBuildForSm80) {
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    Config c = simt8("sm_80", o);
    c.has_bias = o == BOrder::NK;
    c.act = o == BOrder::KN ? Act::Swiglu : Act::Gelu;
    build(c, nullptr);
  }
}
