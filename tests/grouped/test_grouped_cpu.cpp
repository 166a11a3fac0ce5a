// Grouped GEMM without a GPU: problem checks through the C API, the configuration choice,
// rendering and plan keys, and the rendered kernels compiled by NVRTC through the compiler
// (sm_90a CUBIN for the TMA kernel, sm_80 for the portable one), their parameter layout read
// from the PTX, and a second compile served by the cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "api/handles.h"
#include "compile/compiler.h"
#include "grouped/grouped.h"
#include "grouped/grouped_compile.h"
#include "grouped/render.h"
#include "kjit/kjit.h"
#include "nvrtc/options.h"
#include "support/test_support.h"

using namespace kjit;
using namespace kjit::grouped;
using kjit::test::TempDir;
using kjit::test::grouped::expect_param_layout;

namespace {

kjit_grouped_gemm_desc good_desc() {
  kjit_grouped_gemm_desc d;
  EXPECT_EQ(kjit_grouped_gemm_desc_init(&d), KJIT_OK);
  d.groups = 4;
  d.rows = 100;
  d.n = 96;
  d.k = 64;
  d.b_order = KJIT_GROUPED_B_NK;
  return d;
}

// Aligned stand-in "device" pointers: the checks never dereference them.
const void* ptr(uintptr_t v) {
  return reinterpret_cast<const void*>(v);
}
const int32_t* offs_ptr() {
  return reinterpret_cast<const int32_t*>(uintptr_t(0x10000));
}

kjit_status check(const kjit_grouped_gemm_desc& d, const void* c = nullptr,
                  const void* bias = nullptr) {
  return kjit_grouped_gemm_check(&d, ptr(0x20000), ptr(0x30000), offs_ptr(), c, ptr(0x40000), bias);
}

Config tma(int tile_n, int stages, BOrder order) {
  Config c;
  c.path = Path::Tma;
  c.target = "sm_90a";
  c.tile_m = 128;
  c.tile_n = tile_n;
  c.tile_k = 64;
  c.stages = stages;
  c.b_order = order;
  return c;
}

Config simt(const std::string& target, BOrder order) {
  Config c;
  c.target = target;
  c.b_order = order;
  return c;
}

}  // namespace

// ---- problem checks ---------------------------------------------------------------------

TEST(GroupedCheck, GoodProblemPasses) {
  const kjit_grouped_gemm_desc d = good_desc();
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
}

TEST(GroupedCheck, BadFieldsAreNamed) {
  struct Case {
    const char* needle;
    void (*edit)(kjit_grouped_gemm_desc&);
  };
  const Case cases[] = {
      {"groups", [](kjit_grouped_gemm_desc& d) { d.groups = 0; }},
      {"rows", [](kjit_grouped_gemm_desc& d) { d.rows = -1; }},
      {"n is 0", [](kjit_grouped_gemm_desc& d) { d.n = 0; }},
      {"k is", [](kjit_grouped_gemm_desc& d) { d.k = 1ll << 32; }},
      {"b_order", [](kjit_grouped_gemm_desc& d) { d.b_order = 7; }},
      {"activation", [](kjit_grouped_gemm_desc& d) { d.activation = 9; }},
      {"reserved0", [](kjit_grouped_gemm_desc& d) { d.reserved0 = 1; }},
      {"lda", [](kjit_grouped_gemm_desc& d) { d.lda = 63; }},
      {"ldb", [](kjit_grouped_gemm_desc& d) { d.ldb = 10; }},  // NK: ldb >= k
      {"stride_b", [](kjit_grouped_gemm_desc& d) { d.stride_b = 64; }},
      {"ldd", [](kjit_grouped_gemm_desc& d) { d.ldd = 95; }},
      {"a_type", [](kjit_grouped_gemm_desc& d) { d.a_type = 77; }},
  };
  for (const Case& c : cases) {
    kjit_grouped_gemm_desc d = good_desc();
    c.edit(d);
    EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT) << c.needle;
    EXPECT_NE(std::string(kjit_last_error()).find(c.needle), std::string::npos)
        << c.needle << ": " << kjit_last_error();
  }
}

TEST(GroupedCheck, SwigluWritesHalfTheColumns) {
  kjit_grouped_gemm_desc d = good_desc();  // n = 96: 48 gate and 48 up columns
  d.activation = KJIT_GROUPED_ACT_SWIGLU;
  EXPECT_EQ(check(d), KJIT_OK) << kjit_last_error();
  d.ldd = 48;  // D has n / 2 columns
  d.ldc = 48;
  d.beta = 1.0;
  EXPECT_EQ(check(d, ptr(0x50000)), KJIT_OK) << kjit_last_error();
  d.ldd = 47;
  EXPECT_EQ(check(d, ptr(0x50000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("ldd"), std::string::npos) << kjit_last_error();
  d.ldd = 48;
  d.ldc = 47;
  EXPECT_EQ(check(d, ptr(0x50000)), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("ldc"), std::string::npos) << kjit_last_error();
  d = good_desc();
  d.activation = KJIT_GROUPED_ACT_SILU;  // without the gate the 48 columns are too few
  d.ldd = 48;
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  d = good_desc();
  d.activation = KJIT_GROUPED_ACT_SWIGLU;
  d.n = 95;  // no two equal halves
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("even n"), std::string::npos) << kjit_last_error();
  d.n = 96;
  d.activation = KJIT_GROUPED_ACT_SWIGLU + 1;
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  // The plan key names the gated epilogue, and the bias piece composes with it.
  d.activation = KJIT_GROUPED_ACT_SWIGLU;
  Problem p =
      grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), ptr(0x4000));
  EXPECT_EQ(p.act, Act::Swiglu);
  EXPECT_EQ(p.ldd, 48);
  const Config c = choose(p, 90, true, Options());
  EXPECT_NE(c.key().find("epi=alpha+bias+swiglu"), std::string::npos) << c.key();
}

TEST(GroupedCheck, OnlyBf16IsOffered) {
  kjit_grouped_gemm_desc d = good_desc();
  d.a_type = KJIT_GEMM_F16;
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(kjit_last_error()).find("a_type"), std::string::npos);
  d = good_desc();
  d.d_type = KJIT_GEMM_F32;
  EXPECT_EQ(check(d), KJIT_ERROR_UNSUPPORTED);
  d = good_desc();
  d.a_type = d.b_type = d.d_type = KJIT_GEMM_BF16;
  EXPECT_EQ(check(d), KJIT_OK);
}

TEST(GroupedCheck, PointersNullAndMisaligned) {
  kjit_grouped_gemm_desc d = good_desc();
  EXPECT_EQ(kjit_grouped_gemm_check(&d, nullptr, ptr(16), offs_ptr(), nullptr, ptr(16), nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("A is NULL"), std::string::npos);
  EXPECT_EQ(kjit_grouped_gemm_check(&d, ptr(16), ptr(16), nullptr, nullptr, ptr(16), nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("offs is NULL"), std::string::npos);
  EXPECT_EQ(kjit_grouped_gemm_check(&d, ptr(17), ptr(16), offs_ptr(), nullptr, ptr(16), nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("aligned"), std::string::npos);
  EXPECT_EQ(
      kjit_grouped_gemm_check(&d, ptr(16), ptr(16), reinterpret_cast<const int32_t*>(uintptr_t(18)),
                              nullptr, ptr(16), nullptr),
      KJIT_ERROR_INVALID_ARGUMENT);
  d.beta = 1.0;  // C is read
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("C is NULL"), std::string::npos);
  EXPECT_EQ(check(d, ptr(0x50000)), KJIT_OK);
  // rows == 0: nothing is read, NULL pointers are fine.
  d = good_desc();
  d.rows = 0;
  EXPECT_EQ(kjit_grouped_gemm_check(&d, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
            KJIT_OK);
}

TEST(GroupedCheck, VersionedStructs) {
  EXPECT_EQ(
      kjit_grouped_gemm_check(nullptr, ptr(16), ptr(16), offs_ptr(), nullptr, ptr(16), nullptr),
      KJIT_ERROR_INVALID_ARGUMENT);
  kjit_grouped_gemm_desc d = good_desc();
  d.struct_size = 8;
  EXPECT_EQ(check(d), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("struct_size"), std::string::npos);
  // A newer caller's struct with an unknown field set.
  struct Bigger {
    kjit_grouped_gemm_desc d;
    int64_t extra;
  } big{good_desc(), 5};
  big.d.struct_size = sizeof(Bigger);
  EXPECT_EQ(
      kjit_grouped_gemm_check(&big.d, ptr(16), ptr(16), offs_ptr(), nullptr, ptr(16), nullptr),
      KJIT_ERROR_UNSUPPORTED);
  big.extra = 0;
  EXPECT_EQ(
      kjit_grouped_gemm_check(&big.d, ptr(16), ptr(16), offs_ptr(), nullptr, ptr(16), nullptr),
      KJIT_OK);
  kjit_grouped_gemm_options o;
  EXPECT_EQ(kjit_grouped_gemm_options_init(&o), KJIT_OK);
  EXPECT_EQ(o.struct_size, sizeof(o));
  EXPECT_EQ(o.tile_n, 0u);
  EXPECT_EQ(kjit_grouped_gemm_desc_init_sized(nullptr, sizeof(d)), KJIT_ERROR_INVALID_ARGUMENT);
}

TEST(GroupedCheck, CreateChecksArgumentsFirst) {
  kjit_grouped_gemm* gg = nullptr;
  EXPECT_EQ(kjit_grouped_gemm_create(nullptr, 0, nullptr, &gg), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(gg, nullptr);
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(nullptr, 1, &comp), KJIT_OK);
  EXPECT_EQ(kjit_grouped_gemm_create(comp, 0, nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_grouped_gemm_create(comp, -1, nullptr, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_grouped_gemm_options o = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  o.tile_n = 96;
  EXPECT_EQ(kjit_grouped_gemm_create(comp, 0, &o, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("tile_n"), std::string::npos);
  o.tile_n = 256;
  o.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  EXPECT_EQ(kjit_grouped_gemm_create(comp, 0, &o, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  o.schedule = 3;
  o.tile_n = 0;
  EXPECT_EQ(kjit_grouped_gemm_create(comp, 0, &o, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("schedule"), std::string::npos);
  o.schedule = 0;
  o.stages = 1;
  EXPECT_EQ(kjit_grouped_gemm_create(comp, 0, &o, &gg), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gg, nullptr);
  kjit_grouped_gemm_destroy(nullptr);  // a no-op
  kjit_grouped_gemm_desc d = good_desc();
  EXPECT_EQ(kjit_grouped_gemm_run(nullptr, &d, ptr(16), ptr(16), offs_ptr(), nullptr,
                                  const_cast<void*>(ptr(16)), nullptr, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  kjit_compiler_destroy(comp);
}

// ---- configuration choice -------------------------------------------------------------------

TEST(GroupedChoose, TmaOnHopperWhenAligned) {
  kjit_grouped_gemm_desc d = good_desc();
  Problem p =
      grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  Config c = choose(p, 90, true, Options());
  EXPECT_EQ(c.path, Path::Tma);
  EXPECT_EQ(c.target, "sm_90a");
  EXPECT_EQ(c.tile_n, 128);  // n = 96
  EXPECT_EQ(choose(p, 80, true, Options()).path, Path::Simt);
  EXPECT_EQ(choose(p, 80, true, Options()).target, "sm_80");
  EXPECT_EQ(choose(p, 89, true, Options()).target, "sm_89");
  EXPECT_EQ(choose(p, 90, false, Options()).path, Path::Simt);  // no cuTensorMapEncodeTiled
  Options portable;
  portable.portable_only = true;
  EXPECT_EQ(choose(p, 90, true, portable).path, Path::Simt);
  Options pp;
  pp.schedule = KJIT_GROUPED_SCHEDULE_PINGPONG;
  c = choose(p, 90, true, pp);
  EXPECT_TRUE(c.pingpong);
  EXPECT_EQ(c.tile_n, 128);
  Options wide;
  wide.tile_n = 256;
  wide.stages = 3;
  c = choose(p, 90, true, wide);
  EXPECT_EQ(c.tile_n, 256);
  EXPECT_EQ(c.stages, 3);

  d.n = 4096;  // 25 rows per group on average: decode, the 64x256 tile
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  c = choose(p, 90, true, Options());
  EXPECT_EQ(c.tile_n, 256);
  EXPECT_EQ(c.tile_m, 64);
  EXPECT_FALSE(c.pingpong);
  EXPECT_EQ(threads(c), 256);
  EXPECT_TRUE(c.b_evict_first);
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 64x256x64 s5 l2b=ef c1x1 b=nk epi=alpha");
  {
    // The cooperative schedule asked for keeps the 128-row tile (both consumers).
    Options coop;
    coop.schedule = KJIT_GROUPED_SCHEDULE_COOPERATIVE;
    const Config old = choose(p, 90, true, coop);
    EXPECT_EQ(old.key(), "grouped-v1 sm_90a tma 128x256x64 s4 st=tma c1x1 b=nk epi=alpha");
    EXPECT_TRUE(old.tma_store);  // D 16-byte aligned, pitch a multiple of 8
    EXPECT_FALSE(old.b_evict_first);
    EXPECT_EQ(threads(old), 384);
  }
  d.rows = 4 * 64;  // prefill, N 4096: the cooperative 128x256 tile in 2x1 clusters
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  c = choose(p, 90, true, Options());
  EXPECT_FALSE(c.pingpong);
  EXPECT_EQ(c.cluster_m, 2);
  EXPECT_EQ(c.tile_n, 256);
  EXPECT_EQ(c.stages, 4);
  EXPECT_TRUE(c.tma_store);
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 128x256x64 s4 st=tma c2x1 b=nk epi=alpha");
  // One CTA per cluster asked for: pingpong 128x128.
  Options one_cta;
  one_cta.cluster_m = 1;
  c = choose(p, 90, true, one_cta);
  EXPECT_TRUE(c.pingpong);
  EXPECT_EQ(c.tile_n, 128);
  EXPECT_EQ(c.stages, 6);
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 128x128x64 s6 pp c1x1 b=nk epi=alpha");
  // fp8 inputs never take the cluster (never run on the GPU with one).
  {
    kjit_grouped_gemm_desc f = d;
    f.a_type = f.b_type = KJIT_GEMM_F8_E4M3;
    const Problem q =
        grouped::check(f, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
    EXPECT_EQ(choose(q, 90, true, Options()).cluster_m, 1);
  }
  Options coop;
  coop.schedule = KJIT_GROUPED_SCHEDULE_COOPERATIVE;
  EXPECT_FALSE(choose(p, 90, true, coop).pingpong);
  EXPECT_EQ(choose(p, 90, true, coop).tile_n, 256);
  EXPECT_FALSE(choose(p, 90, true, wide).pingpong);  // tile_n 256 asked for
  EXPECT_FALSE(c.vec_store);                         // N 4096: the pair stores

  // Narrow prefill (Qwen3 w1/w3, N 1536): the cooperative 128x256 tile with TMA stores;
  // pingpong where D cannot take a tensor map.
  {
    kjit_grouped_gemm_desc narrow = d;
    narrow.n = 1536;
    Problem q =
        grouped::check(narrow, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
    EXPECT_EQ(choose(q, 90, true, Options()).key(),
              "grouped-v1 sm_90a tma 128x256x64 s4 st=tma c1x1 b=nk epi=alpha");
    q = grouped::check(narrow, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3008), nullptr);
    EXPECT_TRUE(choose(q, 90, true, Options()).pingpong);
  }

  // Wide prefill (Mixtral w1/w3, N 28672): pingpong with the 16-byte store epilogue (one
  // CTA asked for or not); not with the cooperative schedule, nor for decode.
  d.n = 28672;
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, one_cta).key(), choose(p, 90, true, Options()).key());
  c = choose(p, 90, true, Options());
  EXPECT_TRUE(c.pingpong);
  EXPECT_TRUE(c.vec_store);
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 128x128x64 s6 pp st=v16 c1x1 b=nk epi=alpha");
  EXPECT_FALSE(choose(p, 90, true, coop).vec_store);
  EXPECT_TRUE(choose(p, 90, true, coop).tma_store);
  {
    // D at an 8-byte boundary, or a pitch not a multiple of 8: stores from registers.
    const Problem odd =
        grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3008), nullptr);
    EXPECT_FALSE(choose(odd, 90, true, coop).tma_store);
    kjit_grouped_gemm_desc pitched = d;
    pitched.ldd = d.n + 4;
    const Problem padded = grouped::check(pitched, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr,
                                          ptr(0x3000), nullptr);
    EXPECT_FALSE(choose(padded, 90, true, coop).tma_store);
    pitched.ldd = d.n + 8;
    const Problem padded8 = grouped::check(pitched, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr,
                                           ptr(0x3000), nullptr);
    EXPECT_TRUE(choose(padded8, 90, true, coop).tma_store);
    // A tuned pingpong configuration takes the pingpong store form.
    Config tuned = choose(p, 90, true, coop);
    tuned.pingpong = true;
    tuned.tile_n = 128;
    choose_store(tuned, p);
    EXPECT_FALSE(tuned.tma_store);
    EXPECT_TRUE(tuned.vec_store);
  }
  d.rows = 4;  // decode
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_FALSE(choose(p, 90, true, Options()).vec_store);
}

TEST(GroupedChoose, PortableKernelForWhatTmaCannotTake) {
  kjit_grouped_gemm_desc d = good_desc();
  d.k = 60;  // lda = 60: rows of A are 120 bytes apart, not a multiple of 16
  Problem p =
      grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Simt);
  d.lda = 64;  // padded rows: TMA again (K's tail is zero-filled by the copy engine)
  d.ldb = 64;
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Tma);
  d = good_desc();
  p = grouped::check(d, ptr(0x1008), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Simt);  // A 8-byte aligned only
  d.b_order = KJIT_GROUPED_B_KN;
  d.n = 100;  // KN rows of 200 bytes
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Simt);
  d.b_order = KJIT_GROUPED_B_NK;  // the same N is fine when B's rows run along K
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Tma);
  // SwiGLU, order KN: the up half starts at column n/2, a copy start that must be 16-byte
  // aligned (n/2 = 100: no; 104: yes); order NK starts it on a row, any n/2 is fine.
  d = good_desc();
  d.activation = KJIT_GROUPED_ACT_SWIGLU;
  d.b_order = KJIT_GROUPED_B_KN;
  d.n = 200;
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Simt);
  d.n = 208;
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Tma);
  d.n = 200;
  d.b_order = KJIT_GROUPED_B_NK;
  p = grouped::check(d, ptr(0x1000), ptr(0x2000), offs_ptr(), nullptr, ptr(0x3000), nullptr);
  EXPECT_EQ(choose(p, 90, true, Options()).path, Path::Tma);
}

// ---- rendering and keys -----------------------------------------------------------------

TEST(GroupedRender, EveryConfigurationClassRendersWithDistinctKeys) {
  std::vector<Config> all;
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    for (int act = 0; act <= int(Act::Swiglu); ++act) {
      for (int pieces = 0; pieces < 4; ++pieces) {
        for (int fam = 0; fam < 5; ++fam) {
          Config c = fam == 0   ? tma(128, 6, o)
                     : fam == 1 ? tma(256, 4, o)
                     : fam == 2 ? simt("sm_80", o)
                     : fam == 3 ? simt("sm_89", o)
                                : tma(128, 6, o);
          c.pingpong = fam == 4;
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
    sources.insert(c.target + "\n" + src);  // the target is an option, not in the text
    EXPECT_NE(src.find(kKernelName), std::string::npos);
    // Nothing in the text can make NVRTC open a file: the key is text and options alone.
    EXPECT_FALSE(may_read_files(src, compile_options(c))) << c.key();
  }
  EXPECT_EQ(keys.size(), all.size());
  EXPECT_EQ(sources.size(), all.size());
  // Stages and tiles are part of the key too.
  EXPECT_NE(tma(128, 6, BOrder::KN).key(), tma(128, 5, BOrder::KN).key());
  EXPECT_EQ(tma(256, 4, BOrder::NK).key(),
            "grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk epi=alpha");
  Config full = tma(256, 4, BOrder::NK);
  full.has_c = full.has_bias = true;
  full.act = Act::Silu;
  EXPECT_EQ(full.key(), "grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk epi=alpha+beta+bias+silu");
}

TEST(GroupedRender, SwigluTilesPairGateAndUpColumns) {
  // The tile holds tile_n / 2 gate and tile_n / 2 up columns: D's tile is half as wide, and
  // B's NK copies are per half.
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    for (int tn : {128, 256}) {
      Config c = tma(tn, tn == 256 ? 4 : 6, o);
      EXPECT_EQ(out_tile_n(c), tn);
      EXPECT_EQ(b_box(c).outer, o == BOrder::KN ? 64u : unsigned(tn));
      c.act = Act::Swiglu;
      EXPECT_EQ(out_tile_n(c), tn / 2);
      EXPECT_EQ(b_box(c).outer, o == BOrder::KN ? 64u : unsigned(tn / 2));
      EXPECT_EQ(b_box(c).inner, 64u);
      const std::string src = render(c);
      EXPECT_NE(src.find("#define OUT_N " + std::to_string(tn / 2)), std::string::npos);
      EXPECT_NE(src.find("epilogue_glu("), std::string::npos);
      EXPECT_NE(src.find("NO + tile.n0"), std::string::npos);  // the up half's copy
      EXPECT_EQ(src.find("float epilogue("), std::string::npos);
    }
  }
  Config s = simt("sm_80", BOrder::NK);
  s.act = Act::Swiglu;
  EXPECT_EQ(out_tile_n(s), 64);  // the portable tile is in D's columns: it reads 2 x 64 of B
  EXPECT_NE(render(s).find("sU[k][n]"), std::string::npos);
  Config bad = tma(128, 6, BOrder::KN);
  bad.act = Act(5);
  EXPECT_THROW(render(bad), Error);
}

TEST(GroupedRender, PartialTileHalvesIssueNoWgmma) {
  // Cooperative: consumer 1 skips the wgmma of a 64-row half without a row of the group, in
  // a main loop of its own. Pingpong keeps one loop over both halves (measured faster).
  const std::string skip = "if (cw == 0 || tile.row0 + 64 < tile.row_end) {";
  Config c = tma(256, 4, BOrder::NK);
  EXPECT_NE(render(c).find(skip), std::string::npos);
  c = tma(128, 6, BOrder::KN);
  c.pingpong = true;
  EXPECT_EQ(render(c).find(skip), std::string::npos);
}

// The 64-row tile: one consumer warpgroup (256 threads) owns the tile, no half to skip, the
// stage holds 64 rows of A; a key of its own. The L2 evict-first hint on B's copies too.
TEST(GroupedRender, SixtyFourRowTileAndEvictFirstHaveKeysAndSourcesOfTheirOwn) {
  const std::string skip = "if (cw == 0 || tile.row0 + 64 < tile.row_end) {";
  Config old = tma(256, 4, BOrder::NK);
  Config c = old;
  c.tile_m = 64;
  c.stages = 5;
  EXPECT_EQ(c.key(), "grouped-v1 sm_90a tma 64x256x64 s5 c1x1 b=nk epi=alpha");
  EXPECT_EQ(threads(c), 256);
  EXPECT_EQ(threads(old), 384);
  EXPECT_EQ(shared_bytes(c), size_t(5 * (8192 + 32768) + 5 * 16 + 16 + 1024));
  const std::string src = render(c);
  EXPECT_EQ(src.find(skip), std::string::npos);
  EXPECT_NE(src.find("__launch_bounds__(256, 1)"), std::string::npos);
  EXPECT_NE(src.find("mbar_init(empty + 8 * s, 4);"), std::string::npos);  // one consumer: 4 warps
  EXPECT_NE(src.find("#define A_STAGE 8192u"), std::string::npos);
  const std::string old_src = render(old);
  EXPECT_NE(old_src.find("__launch_bounds__(384, 1)"), std::string::npos);
  EXPECT_NE(old_src.find("mbar_init(empty + 8 * s, PINGPONG ? 4 : 8);"), std::string::npos);
  EXPECT_EQ(old_src.find("tma_load_3d_ef"), std::string::npos);

  Config ef = c;
  ef.b_evict_first = true;
  EXPECT_EQ(ef.key(), "grouped-v1 sm_90a tma 64x256x64 s5 l2b=ef c1x1 b=nk epi=alpha");
  const std::string ef_src = render(ef);
  EXPECT_NE(ef_src.find("createpolicy.fractional.L2::evict_first"), std::string::npos);
  // Every B copy carries the hint, A's none.
  EXPECT_NE(ef_src.find("tma_load_3d_ef(sB + stage * B_STAGE"), std::string::npos);
  EXPECT_EQ(ef_src.find("tma_load_3d(sB"), std::string::npos);
  EXPECT_NE(ef_src.find("tma_load_2d(sA"), std::string::npos);
  Config kn = ef;
  kn.b_order = BOrder::KN;
  kn.act = Act::Swiglu;
  EXPECT_EQ(render(kn).find("tma_load_3d(sB"), std::string::npos);

  // Refused: the 64-row tile with pingpong or fp8, the hint on the portable kernel.
  Config bad = c;
  bad.pingpong = true;
  bad.tile_n = 128;
  EXPECT_THROW(render(bad), Error);
  bad = c;
  bad.in = DType::E4m3;
  bad.tile_k = 128;
  EXPECT_THROW(render(bad), Error);
  bad = c;
  bad.tile_m = 32;
  EXPECT_THROW(render(bad), Error);
  bad = simt("sm_80", BOrder::KN);
  bad.b_evict_first = true;
  EXPECT_THROW(render(bad), Error);
}

TEST(GroupedRender, InvalidConfigurationsAreRefused) {
  Config c = tma(128, 6, BOrder::KN);
  c.cluster_m = 3;
  EXPECT_THROW(render(c), Error);
  c.cluster_m = 1;
  c.cluster_n = 2;
  EXPECT_THROW(render(c), Error);
  c = tma(128, 6, BOrder::KN);
  c.cluster_m = 2;
  c.pingpong = true;  // the cluster is the cooperative schedule's
  EXPECT_THROW(render(c), Error);
  c.pingpong = false;
  c.tile_m = 64;
  EXPECT_THROW(render(c), Error);
  c.tile_m = 128;
  c.b_evict_first = true;
  EXPECT_THROW(render(c), Error);
  c = simt("sm_80", BOrder::KN);
  c.cluster_m = 2;
  EXPECT_THROW(render(c), Error);
  c = tma(64, 4, BOrder::KN);
  EXPECT_THROW(render(c), Error);
  c = tma(256, 6, BOrder::KN);  // 6 x 48 KiB does not fit
  EXPECT_THROW(render(c), Error);
  c = tma(128, 9, BOrder::KN);
  EXPECT_THROW(render(c), Error);
  c = tma(128, 4, BOrder::KN);
  c.target = "sm_90";  // wgmma needs sm_90a
  EXPECT_THROW(render(c), Error);
  c = simt("sm_80", BOrder::KN);
  c.tile_n = 128;
  EXPECT_THROW(render(c), Error);
  c = tma(256, 4, BOrder::KN);
  c.pingpong = true;  // pingpong has the 128x128 tile only
  EXPECT_THROW(render(c), Error);
  c = simt("sm_80", BOrder::KN);
  c.vec_store = true;  // the 16-byte store epilogue is the TMA kernel's
  EXPECT_THROW(render(c), Error);
  EXPECT_NE(tma(128, 6, BOrder::KN).key(), [] {
    Config p = tma(128, 6, BOrder::KN);
    p.pingpong = true;
    return p.key();
  }());
  EXPECT_LE(shared_bytes(tma(256, 4, BOrder::KN)), size_t(232448));
  EXPECT_LE(shared_bytes(tma(128, 7, BOrder::KN)), size_t(232448));
}

// ---- NVRTC -----------------------------------------------------------------------------------

class GroupedCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    kjit_cache_options o;
    kjit_cache_options_init(&o);
    o.directory = dir_.path().c_str();
    ASSERT_EQ(kjit_cache_open(&o, &cache_), KJIT_OK) << kjit_last_error();
  }
  void TearDown() override { kjit_cache_close(cache_); }

  // Compiles `c` as the handle does, with PTX (and CUBIN for an exact target) kept.
  Outcome compile(const Config& c, unsigned outputs) {
    Compiler compiler(cache_->cache.get(), 1);
    CompileOptions o = compile_options(c);
    o.outputs = outputs;
    return compiler.compile(render(c), o);
  }

  void expect_layout(const Config& c, const Outcome& out) {
    ASSERT_TRUE(out.entry);
    expect_param_layout(c, out.entry->ptx.str());
  }

  TempDir dir_;
  kjit_cache* cache_ = nullptr;
};

TEST_F(GroupedCompile, TmaKernelBuildsForSm90aAndHitsTheCache) {
  Config c = tma(128, 6, BOrder::KN);
  c.has_bias = true;
  c.act = Act::Relu;
  const Outcome first = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
  ASSERT_EQ(first.status, KJIT_OK) << first.message << (first.entry ? first.entry->log : "");
  EXPECT_EQ(first.tier, KJIT_TIER_COMPILED);
  EXPECT_FALSE(first.entry->cubin.empty());
  const std::string ptx = first.entry->ptx.str();
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.bulk.tensor.3d"), std::string::npos);
  EXPECT_NE(ptx.find("setmaxnreg"), std::string::npos);
  EXPECT_EQ(first.entry->log.find("serializ"), std::string::npos) << first.entry->log;
  expect_layout(c, first);
  // Another compiler on the same cache (as another process would be): no NVRTC run.
  const Outcome second = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
  ASSERT_EQ(second.status, KJIT_OK);
  EXPECT_NE(second.tier, KJIT_TIER_COMPILED);
}

TEST_F(GroupedCompile, PingpongKernelOtherOrderAndFullEpilogue) {
  Config c = tma(128, 6, BOrder::NK);
  c.pingpong = true;
  c.has_c = c.has_bias = true;
  c.act = Act::Silu;
  const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
  ASSERT_EQ(out.status, KJIT_OK) << out.message << (out.entry ? out.entry->log : "");
  EXPECT_FALSE(out.entry->cubin.empty());
  const std::string ptx = out.entry->ptx.str();
  EXPECT_NE(ptx.find("m64n128k16"), std::string::npos);
  EXPECT_NE(ptx.find("ex2.approx"), std::string::npos);  // the SiLU piece
  expect_layout(c, out);
}

// The 16-byte store epilogue: its own key and source, every schedule and tile, the gated and
// the full epilogue, and ptxas keeps the consumers within the registers setmaxnreg gives.
TEST_F(GroupedCompile, VectorStoreEpilogueBuildsForEverySchedule) {
  struct Case {
    int tile_n, stages;
    bool pingpong;
    Act act;
    bool pieces;
  };
  const Case cases[] = {{128, 6, true, Act::None, false},
                        {256, 4, false, Act::None, false},
                        {128, 6, false, Act::Swiglu, true},
                        {128, 6, true, Act::Silu, true}};
  for (const Case& k : cases) {
    Config c = tma(k.tile_n, k.stages, BOrder::NK);
    c.pingpong = k.pingpong;
    c.act = k.act;
    c.has_c = c.has_bias = k.pieces;
    Config old = c;
    c.vec_store = true;
    EXPECT_NE(c.key(), old.key());
    EXPECT_NE(c.key().find(" st=v16"), std::string::npos) << c.key();
    EXPECT_NE(render(c), render(old));
    const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
    ASSERT_EQ(out.status, KJIT_OK) << c.key() << out.message << (out.entry ? out.entry->log : "");
    EXPECT_FALSE(out.entry->cubin.empty());
    const std::string ptx = out.entry->ptx.str();
    EXPECT_NE(ptx.find("shfl.sync.bfly.b32"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("st.global.v4.u32"), std::string::npos) << c.key();
    EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << out.entry->log;
    expect_layout(c, out);
  }
}

// The 64-row tile (one consumer warpgroup) at both widths and B orders, plain and gated,
// with and without the evict-first hint: NVRTC builds it for sm_90a, the wgmma is the
// tile's width, no wgmma is serialised, the parameters are the TMA kernel's.
TEST_F(GroupedCompile, SixtyFourRowTileBuildsForSm90a) {
  struct Case {
    int tile_n, stages;
    BOrder order;
    Act act;
    bool evict_first;
  };
  const Case cases[] = {{256, 5, BOrder::NK, Act::None, false},
                        {256, 5, BOrder::NK, Act::None, true},
                        {128, 8, BOrder::KN, Act::Silu, true},
                        {256, 5, BOrder::KN, Act::Swiglu, false}};
  for (const Case& k : cases) {
    Config c = tma(k.tile_n, k.stages, k.order);
    c.tile_m = 64;
    c.act = k.act;
    c.has_bias = k.act == Act::Swiglu;
    c.b_evict_first = k.evict_first;
    const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
    ASSERT_EQ(out.status, KJIT_OK) << c.key() << out.message << (out.entry ? out.entry->log : "");
    EXPECT_FALSE(out.entry->cubin.empty());
    const std::string ptx = out.entry->ptx.str();
    EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(k.tile_n) +
                       "k16.f32.bf16.bf16"),
              std::string::npos)
        << c.key();
    EXPECT_NE(ptx.find(".maxntid 256"), std::string::npos) << c.key();
    EXPECT_EQ(ptx.find(".L2::cache_hint") != std::string::npos, k.evict_first) << c.key();
    EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << out.entry->log;
    expect_layout(c, out);
  }
}

// The 2x1 cluster (cooperative tile): both B orders, plain and gated, both tile widths.
// NVRTC builds it for sm_90a; B's copies are multicast, stages are released in both CTAs
// (mapa and remote arrivals), the CTAs meet at a cluster barrier; its own key and source;
// B's box is half the tile's rows of N for order NK (each CTA copies half).
TEST_F(GroupedCompile, TwoCtaClusterBuildsForSm90a) {
  struct Case {
    int tile_n, stages;
    BOrder order;
    Act act;
    unsigned box_outer;
  };
  const Case cases[] = {{256, 4, BOrder::NK, Act::None, 128},
                        {128, 6, BOrder::NK, Act::Swiglu, 64},
                        {256, 4, BOrder::KN, Act::None, 64},
                        {256, 4, BOrder::KN, Act::Swiglu, 64}};
  for (const Case& k : cases) {
    Config c = tma(k.tile_n, k.stages, k.order);
    c.act = k.act;
    c.has_bias = k.act == Act::Swiglu;
    c.vec_store = k.order == BOrder::NK;
    const Config single = c;
    c.cluster_m = 2;
    EXPECT_NE(c.key(), single.key());
    EXPECT_NE(c.key().find(" c2x1"), std::string::npos) << c.key();
    EXPECT_NE(render(c), render(single));
    EXPECT_EQ(b_box(c).outer, k.box_outer) << c.key();
    EXPECT_EQ(b_box(c).inner, b_box(single).inner) << c.key();
    const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
    ASSERT_EQ(out.status, KJIT_OK) << c.key() << out.message << (out.entry ? out.entry->log : "");
    EXPECT_FALSE(out.entry->cubin.empty());
    const std::string ptx = out.entry->ptx.str();
    EXPECT_NE(ptx.find(".multicast::cluster"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("mapa.shared::cluster"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("barrier.cluster.wait"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("%cluster_ctarank"), std::string::npos) << c.key();
    EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << out.entry->log;
    expect_layout(c, out);
  }
}

// The TMA store epilogue: both schedules, both widths, plain with every piece and gated,
// with the 2x1 cluster; NVRTC builds it for sm_90a with D's tensor map as the third
// parameter, bulk tensor stores, named barriers and the proxy fence; its own key and
// source; the staging buffers count in the shared memory; no wgmma serialised.
TEST_F(GroupedCompile, TmaStoreEpilogueBuildsForSm90a) {
  struct Case {
    int tile_n, stages;
    bool pingpong;
    BOrder order;
    Act act;
    int cluster_m;
  };
  const Case cases[] = {{256, 4, false, BOrder::NK, Act::None, 1},
                        {128, 6, false, BOrder::KN, Act::Swiglu, 1},
                        {128, 6, true, BOrder::NK, Act::Gelu, 1},
                        {256, 4, false, BOrder::NK, Act::Silu, 2}};
  for (const Case& k : cases) {
    Config c = tma(k.tile_n, k.stages, k.order);
    c.pingpong = k.pingpong;
    c.act = k.act;
    c.has_c = c.has_bias = k.act != Act::None;
    c.cluster_m = k.cluster_m;
    const Config plain = c;
    c.tma_store = true;
    EXPECT_NE(c.key(), plain.key());
    EXPECT_NE(c.key().find(" st=tma"), std::string::npos) << c.key();
    EXPECT_NE(render(c), render(plain));
    EXPECT_EQ(shared_bytes(c), shared_bytes(plain) + 32768) << c.key();
    EXPECT_LE(shared_bytes(c), kMaxShared) << c.key();
    ASSERT_EQ(params(c).size(), params(plain).size() + 1);
    EXPECT_STREQ(params(c)[2].name, "tma_d");
    const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
    ASSERT_EQ(out.status, KJIT_OK) << c.key() << out.message << (out.entry ? out.entry->log : "");
    EXPECT_FALSE(out.entry->cubin.empty());
    const std::string ptx = out.entry->ptx.str();
    EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), std::string::npos)
        << c.key();
    EXPECT_NE(ptx.find("cp.async.bulk.wait_group.read 1"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("fence.proxy.async.shared::cta"), std::string::npos) << c.key();
    EXPECT_NE(ptx.find("bar.sync"), std::string::npos) << c.key();
    EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << out.entry->log;
    expect_layout(c, out);
  }
  Config both = tma(256, 4, BOrder::NK);
  both.tma_store = both.vec_store = true;
  EXPECT_THROW(render(both), Error);
  Config portable = simt("sm_80", BOrder::KN);
  portable.tma_store = true;
  EXPECT_THROW(render(portable), Error);
  Config deep = tma(256, 4, BOrder::NK);
  deep.stages = 5;  // 5 x 48 KiB and the buffers do not fit
  deep.tma_store = true;
  EXPECT_THROW(render(deep), Error);
}

TEST_F(GroupedCompile, SwigluKernelsBuildForSm90aAndSm80) {
  // Both schedules, both B orders, with every other epilogue piece around the gate.
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    for (bool pp : {false, true}) {
      Config c = tma(pp ? 128 : 256, pp ? 6 : 4, o);
      c.pingpong = pp;
      c.act = Act::Swiglu;
      c.has_c = o == BOrder::KN;
      c.has_bias = pp;
      const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
      ASSERT_EQ(out.status, KJIT_OK) << out.message << (out.entry ? out.entry->log : "");
      EXPECT_FALSE(out.entry->cubin.empty());
      const std::string ptx = out.entry->ptx.str();
      EXPECT_NE(ptx.find(pp ? "m64n128k16" : "m64n256k16"), std::string::npos);
      EXPECT_NE(ptx.find("ex2.approx"), std::string::npos);  // the gate's SiLU
      // No wgmma serialised by the conditional halves (ptxas says so in its log).
      EXPECT_EQ(out.entry->log.find("serializ"), std::string::npos) << out.entry->log;
      expect_layout(c, out);
    }
  }
  Config s = simt("sm_80", BOrder::KN);
  s.act = Act::Swiglu;
  s.has_bias = true;
  const Outcome out = compile(s, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
  ASSERT_EQ(out.status, KJIT_OK) << out.message << (out.entry ? out.entry->log : "");
  expect_layout(s, out);
}

TEST_F(GroupedCompile, PortableKernelBuildsForSm80) {
  for (BOrder o : {BOrder::KN, BOrder::NK}) {
    Config c = simt("sm_80", o);
    c.has_c = true;
    c.act = Act::Gelu;
    const Outcome out = compile(c, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN);
    ASSERT_EQ(out.status, KJIT_OK) << out.message << (out.entry ? out.entry->log : "");
    EXPECT_FALSE(out.entry->cubin.empty());
    expect_layout(c, out);
  }
}
