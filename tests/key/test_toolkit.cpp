// The CUDA toolkit's headers without include options, and precompiled headers: through the
// public C API, no GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compile/process_state.h"
#include "key/toolchain.h"
#include "key/toolkit.h"
#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/facts.h"
#include "support/test_support.h"

namespace {

struct Options {
  kjit_options* o = nullptr;
  Options() {
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(o, "sm_90"), KJIT_OK);
  }
  ~Options() { kjit_options_destroy(o); }
};

struct Compiler {
  kjit_compiler* c = nullptr;
  explicit Compiler(kjit_cache* cache = nullptr) {
    EXPECT_EQ(kjit_compiler_create(cache, 4, &c), KJIT_OK);
  }
  ~Compiler() { kjit_compiler_destroy(c); }
};

// A cache in a directory of its own; compilers bound to it go out of scope first.
struct Cache {
  kjit::test::TempDir dir;
  kjit_cache* c = nullptr;
  Cache() {
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = dir.path().c_str();
    EXPECT_EQ(kjit_cache_open(&co, &c), KJIT_OK);
  }
  ~Cache() { kjit_cache_close(c); }
  kjit_cache_stats stats() const {
    kjit_cache_stats st = KJIT_CACHE_STATS_INIT;
    EXPECT_EQ(kjit_cache_stats_get(c, &st), KJIT_OK);
    return st;
  }
};

struct Binary {
  kjit_binary* b = nullptr;
  ~Binary() { kjit_binary_destroy(b); }
  std::string data(int kind) const {
    size_t n = 0;
    const void* p = kjit_binary_data(b, kind, &n);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }
  std::string log() const { return b ? kjit_binary_log(b) : ""; }
};

std::string program(const std::string& header) {
  return "#include <" + header + ">\nextern \"C\" __global__ void k(int* p) { *p = 1; }\n";
}

const char* const kHeaders[] = {"cuda_fp16.h",  "cuda_bf16.h",
                                "cuda_fp8.h",   "cooperative_groups.h",
                                "mma.h",        "cuda/std/cstdint",
                                "cuda/atomic",  "cuda/std/complex",
                                "cuda/barrier", "cub/block/block_reduce.cuh"};

// The toolchain record (docs/formats.md): a round trip; a record of the text format of
// before (version 2), a truncated or a damaged one reads as none (the facts are probed
// again), never as other facts.
TEST(ToolchainRecord, RoundTripAndOldOrDamagedRecordsAreMisses) {
  kjit::ToolchainFacts f;
  f.id = "nvrtc 13.0.88 CL-36424714";
  f.version = "13.0";
  f.archs = {75, 80, 90, 100};
  const std::string rec = kjit::encode_toolchain_record(f);
  kjit::ToolchainFacts back;
  ASSERT_TRUE(kjit::decode_toolchain_record(rec, &back));
  EXPECT_EQ(back.id, f.id);
  EXPECT_EQ(back.version, f.version);
  EXPECT_EQ(back.archs, f.archs);
  kjit::ToolchainFacts untouched;
  untouched.id = "kept";
  EXPECT_FALSE(kjit::decode_toolchain_record(
      "kjit-toolchain-2\nnvrtc 13.0.88 CL-36424714\n13.0\n75 80 90 ", &untouched));
  for (size_t n = 0; n < rec.size(); ++n)
    EXPECT_FALSE(kjit::decode_toolchain_record(rec.substr(0, n), &untouched)) << n;
  EXPECT_FALSE(kjit::decode_toolchain_record(rec + "x", &untouched));
  std::string other_version = rec;
  other_version[8 + std::strlen(kjit::kToolchainMagic)] ^= 1;  // the u32 after the magic
  EXPECT_FALSE(kjit::decode_toolchain_record(other_version, &untouched));
  kjit::ToolchainFacts no_arch = f;
  no_arch.archs.clear();
  EXPECT_FALSE(kjit::decode_toolchain_record(kjit::encode_toolchain_record(no_arch), &untouched));
  EXPECT_EQ(untouched.id, "kept");
}

// The toolkit record (docs/formats.md): a round trip; a record of the text format of
// before (version 1), a truncated or a damaged one reads as none (the toolkit is
// discovered again), never as another toolkit.
TEST(ToolkitRecord, RoundTripAndOldOrDamagedRecordsAreMisses) {
  kjit::Toolkit t;
  t.root = "/opt/cuda";
  t.found_by = "libnvrtc";
  t.fingerprint = std::string(64, 'f');
  t.include_dirs = {"/opt/cuda/include/cccl", "/opt/cuda/include"};
  kjit::PathStamp a, b;
  a.path = "/opt/cuda/version.json";
  a.kind = 1;
  a.dev = 2049;
  a.ino = 77;
  a.size = 512;
  a.mtime_ns = 1700000000123456789;
  a.ctime_ns = -5;
  b.path = "/opt/cuda/version.txt";
  const std::string rec = kjit::encode_toolkit_record(t, {a, b});
  kjit::Toolkit back;
  std::vector<kjit::PathStamp> looked;
  ASSERT_TRUE(kjit::decode_toolkit_record(rec, &back, &looked));
  EXPECT_EQ(back.root, t.root);
  EXPECT_EQ(back.found_by, t.found_by);
  EXPECT_EQ(back.fingerprint, t.fingerprint);
  EXPECT_EQ(back.include_dirs, t.include_dirs);
  ASSERT_EQ(looked.size(), 2u);
  EXPECT_EQ(looked[0].path, a.path);
  EXPECT_EQ(looked[0].kind, 1);
  EXPECT_EQ(looked[0].dev, 2049u);
  EXPECT_EQ(looked[0].ino, 77u);
  EXPECT_EQ(looked[0].size, 512u);
  EXPECT_EQ(looked[0].mtime_ns, a.mtime_ns);
  EXPECT_EQ(looked[0].ctime_ns, -5);
  EXPECT_EQ(looked[1].kind, 0);
  kjit::Toolkit untouched;
  untouched.root = "kept";
  std::vector<kjit::PathStamp> none;
  const std::string version_1 =
      "kjit-toolkit-record-19:/opt/cuda8:libnvrtc64:" + std::string(64, 'f') + "1:0" + "1:0";
  EXPECT_FALSE(kjit::decode_toolkit_record(version_1, &untouched, &none));
  for (size_t n = 0; n < rec.size(); ++n)
    EXPECT_FALSE(kjit::decode_toolkit_record(rec.substr(0, n), &untouched, &none)) << n;
  EXPECT_FALSE(kjit::decode_toolkit_record(rec + "x", &untouched, &none));
  kjit::PathStamp odd = a;
  odd.kind = 9;
  EXPECT_FALSE(
      kjit::decode_toolkit_record(kjit::encode_toolkit_record(t, {odd}), &untouched, &none));
  EXPECT_EQ(untouched.root, "kept");
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(kjit::toolkit_record_name("/opt/cuda").rfind("toolkit-2:", 0), 0u);
}

// The toolchain facts are a process memo learnt from the first cache given; after
// reset_process_state() they are learnt from the next one, not kept from the first.
TEST(ProcessState, ResetUnbindsTheToolchainFactsFromTheFirstCache) {
  kjit::test::TempDir d;
  kjit::CacheConfig a_cfg, b_cfg;
  a_cfg.directory = d.file("a");
  b_cfg.directory = d.file("b");
  kjit::Cache a(a_cfg), b(b_cfg);
  kjit::reset_process_state();
  const kjit::ToolchainFacts real = kjit::toolchain_facts(&a.facts());
  const std::string name = kjit::toolchain_record_name();
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(a.facts().get(name)) << "the facts were not recorded in the first cache";
  kjit::ToolchainFacts forged = real;
  forged.id = "nvrtc 99.9.9 recorded in the second cache";
  b.facts().set(name, kjit::encode_toolchain_record(forged));
  // Without a reset the memo answers, whatever cache is given.
  EXPECT_EQ(kjit::toolchain_facts(&b.facts()).id, real.id);
  kjit::reset_process_state();
  EXPECT_EQ(kjit::toolchain_facts(&b.facts()).id, forged.id);
  kjit::reset_process_state();
  EXPECT_EQ(kjit::toolchain_facts(&a.facts()).id, real.id);
  kjit::reset_process_state();  // the real facts for the tests that follow
}

// Likewise the automatic toolkit: after a reset it is found again (the same toolkit here),
// a new object, while references handed out before stay valid.
TEST(ProcessState, ResetForgetsTheAutomaticToolkit) {
  kjit::reset_process_state();
  const kjit::Toolkit& first = kjit::find_toolkit("");
  EXPECT_EQ(&kjit::find_toolkit(""), &first);
  kjit::reset_process_state();
  const kjit::Toolkit& second = kjit::find_toolkit("");
  EXPECT_NE(&second, &first);
  EXPECT_EQ(second.fingerprint, first.fingerprint);
  EXPECT_EQ(second.root, first.root);
}

TEST(ToolkitHeaders, FoundWithoutIncludeOptions) {
  Compiler c;
  for (const char* h : kHeaders) {
    Options o;
    ASSERT_EQ(kjit_options_set_pch(o.o, 0), KJIT_OK);  // each header once: PCH would not pay
    Binary b;
    EXPECT_EQ(kjit_compile(c.c, program(h).c_str(), o.o, &b.b), KJIT_OK) << h << ": " << b.log();
  }
}

TEST(ToolkitHeaders, TurnedOffGivesTheMissingHeaderError) {
  Compiler c;
  for (const char* h : {"cuda_fp16.h", "cub/block/block_reduce.cuh"}) {
    Options o;
    ASSERT_EQ(kjit_options_set_toolkit(o.o, ""), KJIT_OK);
    Binary b;
    EXPECT_EQ(kjit_compile(c.c, program(h).c_str(), o.o, &b.b), KJIT_ERROR_COMPILE) << h;
    EXPECT_NE(b.log().find("open source file \"" + std::string(h) + "\""), std::string::npos)
        << b.log();
  }
}

TEST(ToolkitHeaders, HostStandardLibraryHeaderIsExplained) {
  Compiler c;
  Options o;
  Binary b;
  // <atomic> is not among the built-in standard headers (<cmath> is: builtin_std.h).
  EXPECT_EQ(kjit_compile(c.c, program("atomic").c_str(), o.o, &b.b), KJIT_ERROR_COMPILE);
  EXPECT_NE(b.log().find("no host C++ standard library"), std::string::npos) << b.log();
  EXPECT_NE(std::string(kjit_last_error()).find("<atomic>"), std::string::npos)
      << kjit_last_error();
}

TEST(ToolkitHeaders, DirectoriesAreReportedAndOverridable) {
  const std::string path = kjit_toolkit_include_path();
  ASSERT_FALSE(path.empty());
  EXPECT_NE(path.find("/cccl"), std::string::npos) << path;
  // The toolkit root named explicitly is the same toolkit: the same key.
  // The root above <root>/include or <root>/targets/<arch>-linux/include.
  const std::string first = path.substr(0, path.find(':'));
  const size_t targets = first.find("/targets/");
  const std::string root = targets != std::string::npos ? first.substr(0, targets)
                                                        : first.substr(0, first.rfind("/include"));
  Options automatic, named;
  ASSERT_EQ(kjit_options_set_toolkit(named.o, root.c_str()), KJIT_OK);
  char k1[65], k2[65];
  const std::string src = program("cuda_fp16.h");
  ASSERT_EQ(kjit_compute_key(src.c_str(), automatic.o, k1), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_compute_key(src.c_str(), named.o, k2), KJIT_OK) << kjit_last_error();
  EXPECT_STREQ(k1, k2);
  // Turning the headers off changes the key; a root without headers is refused.
  Options off, bogus;
  ASSERT_EQ(kjit_options_set_toolkit(off.o, ""), KJIT_OK);
  ASSERT_EQ(kjit_compute_key(src.c_str(), off.o, k2), KJIT_OK);
  EXPECT_STRNE(k1, k2);
  kjit::test::TempDir empty;
  ASSERT_EQ(kjit_options_set_toolkit(bogus.o, empty.path().c_str()), KJIT_OK);
  EXPECT_EQ(kjit_compute_key(src.c_str(), bogus.o, k2), KJIT_ERROR_INVALID_OPTION);
  EXPECT_NE(std::string(kjit_last_error()).find("cuda_fp16.h"), std::string::npos);
}

// A program that can read no file does not depend on the toolkit: its key is the same
// with the toolkit's headers on or off, while a program that includes one differs. A
// toolkit named in the options is still checked.
TEST(ToolkitHeaders, ProgramThatReadsNoFileDoesNotDependOnTheToolkit) {
  const char* alone = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  Options on, off;
  ASSERT_EQ(kjit_options_set_toolkit(off.o, ""), KJIT_OK);
  char k1[65], k2[65];
  ASSERT_EQ(kjit_compute_key(alone, on.o, k1), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_compute_key(alone, off.o, k2), KJIT_OK) << kjit_last_error();
  EXPECT_STREQ(k1, k2);
  const std::string with = program("cuda_fp16.h");
  ASSERT_EQ(kjit_compute_key(with.c_str(), on.o, k1), KJIT_OK);
  ASSERT_EQ(kjit_compute_key(with.c_str(), off.o, k2), KJIT_OK);
  EXPECT_STRNE(k1, k2);
  // Any include-like construct, an in-memory header's or a pre-included one, counts.
  const std::string probe = std::string("#if __has_include(<cuda_fp16.h>)\n#endif\n") + alone;
  ASSERT_EQ(kjit_compute_key(probe.c_str(), on.o, k1), KJIT_OK);
  ASSERT_EQ(kjit_compute_key(probe.c_str(), off.o, k2), KJIT_OK);
  EXPECT_STRNE(k1, k2) << "__has_include looks in the toolkit";
  Options pre_on, pre_off;
  ASSERT_EQ(kjit_options_set_toolkit(pre_off.o, ""), KJIT_OK);
  for (Options* o : {&pre_on, &pre_off}) {
    ASSERT_EQ(kjit_options_add(o->o, "--pre-include=cuda_fp16.h"), KJIT_OK);
  }
  ASSERT_EQ(kjit_compute_key(alone, pre_on.o, k1), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_compute_key(alone, pre_off.o, k2), KJIT_OK);
  EXPECT_STRNE(k1, k2) << "a pre-included header comes from the toolkit";
  kjit::test::TempDir empty;
  Options bogus;
  ASSERT_EQ(kjit_options_set_toolkit(bogus.o, empty.path().c_str()), KJIT_OK);
  EXPECT_EQ(kjit_compute_key(alone, bogus.o, k2), KJIT_ERROR_INVALID_OPTION);
  // And it compiles, is stored and hits without the toolkit's include directories.
  Cache cache;
  Compiler c(cache.c);
  Binary a, b;
  ASSERT_EQ(kjit_compile(c.c, alone, on.o, &a.b), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(kjit_binary_tier(a.b), KJIT_TIER_COMPILED);
  ASSERT_EQ(kjit_compile(c.c, alone, off.o, &b.b), KJIT_OK);
  EXPECT_EQ(kjit_binary_tier(b.b), KJIT_TIER_MEMORY) << "stored: nothing uncovered was read";
  EXPECT_EQ(cache.stats().not_stored, 0u);
}

// Programs that reach the toolkit, with PCH on and off: identical bytes, logs and keys.
std::vector<std::pair<std::string, std::vector<const char*>>> pch_programs() {
  return {
      {"#include <cub/block/block_reduce.cuh>\n"
       "extern \"C\" __global__ void r(const float* in, float* out) {\n"
       "  using R = cub::BlockReduce<float, 128>;\n  __shared__ typename R::TempStorage t;\n"
       "  float s = R(t).Sum(in[threadIdx.x]);\n  if (threadIdx.x == 0) *out = s;\n}\n",
       {}},
      {"#include <cub/block/block_scan.cuh>\n"
       "extern \"C\" __global__ void s(const int* in, int* out) {\n"
       "  using S = cub::BlockScan<int, 64>;\n  __shared__ typename S::TempStorage t;\n"
       "  int v;\n  S(t).ExclusiveSum(in[threadIdx.x], v);\n  out[threadIdx.x] = v;\n}\n",
       {}},
      {"#include <cuda/std/cstdint>\n"
       "template <typename T, int N> __global__ void scale(T* d, T f) { d[threadIdx.x] *= f + N; "
       "}\n",
       {"scale<float, 3>", "scale<cuda::std::int64_t, 7>"}},
      {"#include <cuda_fp16.h>\n"
       "extern \"C\" __global__ void saxpy_half(__half a, const __half* x, __half* y) {\n"
       "  y[threadIdx.x] = __hfma(a, x[threadIdx.x], y[threadIdx.x]);\n}\n",
       {}},
  };
}

TEST(Pch, ByteIdenticalAndKeyIndependent) {
  Compiler c;
  for (int round = 0; round < 2; ++round) {  // the first round creates, the second uses
    for (const auto& [src, names] : pch_programs()) {
      Options with, without;
      ASSERT_EQ(kjit_options_set_pch(without.o, 0), KJIT_OK);
      for (auto* o : {with.o, without.o}) {
        for (const char* n : names) ASSERT_EQ(kjit_options_add_name_expression(o, n), KJIT_OK);
      }
      Binary a, b;
      ASSERT_EQ(kjit_compile(c.c, src.c_str(), with.o, &a.b), KJIT_OK) << a.log();
      ASSERT_EQ(kjit_compile(c.c, src.c_str(), without.o, &b.b), KJIT_OK) << b.log();
      EXPECT_EQ(a.data(KJIT_OUTPUT_PTX), b.data(KJIT_OUTPUT_PTX));
      EXPECT_EQ(a.data(KJIT_OUTPUT_CUBIN), b.data(KJIT_OUTPUT_CUBIN));
      EXPECT_EQ(a.log(), b.log()) << "PCH messages must not reach the log";
      EXPECT_STREQ(kjit_binary_key(a.b), kjit_binary_key(b.b));
      for (const char* n : names) {
        EXPECT_STREQ(kjit_binary_lowered_name(a.b, n), kjit_binary_lowered_name(b.b, n)) << n;
      }
    }
  }
}

// Threads of one process compiling variants that start the same way: one creates the PCH and
// the others do not wait for it (they compile without); variants compiled after it was made
// use it. Every result equals the PCH-free one. In process: a PCH serves only the process
// that made it, so where the compiles go to several compile workers (KJIT_WORKER_PROCESSES,
// by default up to half the cores), each worker makes its own.
TEST(Pch, ConcurrentVariantsShareOnePch) {
  Cache cache;
  {
    Compiler c(cache.c), plain;
    ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
    auto variant = [](int i) {
      return "#include <cub/warp/warp_reduce.cuh>\n"
             "extern \"C\" __global__ void w(const float* in, float* out) {\n"
             "  using W = cub::WarpReduce<float, " +
             std::to_string(4 << (i % 4)) + ">;\n  // variant " + std::to_string(i) +
             "\n"
             "  __shared__ typename W::TempStorage t;\n"
             "  float s = W(t).Sum(in[threadIdx.x]);\n  if (threadIdx.x == 0) *out = s;\n}\n";
    };
    constexpr int kThreads = 4;
    std::vector<std::string> ptx(2 * kThreads);
    std::vector<kjit_status> status(2 * kThreads, KJIT_OK);
    auto round = [&](int first) {
      std::vector<std::thread> threads;
      for (int i = first; i < first + kThreads; ++i) {
        threads.emplace_back([&, i] {
          Options o;
          Binary b;
          status[i] = kjit_compile(c.c, variant(i).c_str(), o.o, &b.b);
          ptx[i] = b.data(KJIT_OUTPUT_PTX);
        });
      }
      for (auto& t : threads) t.join();
    };
    round(0);
    const kjit_cache_stats first = cache.stats();
    EXPECT_EQ(first.pch_created, 1u) << "one creator; the others did not make their own";
    round(kThreads);
    const kjit_cache_stats st = cache.stats();
    EXPECT_EQ(st.pch_created, 1u);
    EXPECT_EQ(st.pch_used - first.pch_used, uint64_t(kThreads)) << "made: every later one uses it";
    EXPECT_EQ(st.pch_failed, 0u);
    EXPECT_EQ(st.not_stored, 0u) << "PCH files must not count as inputs";
    EXPECT_EQ(st.stores, uint64_t(2 * kThreads));
    for (int i = 0; i < 2 * kThreads; ++i) {
      ASSERT_EQ(status[i], KJIT_OK) << i;
      Options o;
      ASSERT_EQ(kjit_options_set_pch(o.o, 0), KJIT_OK);
      Binary b;
      ASSERT_EQ(kjit_compile(plain.c, variant(i).c_str(), o.o, &b.b), KJIT_OK);
      EXPECT_EQ(ptx[i], b.data(KJIT_OUTPUT_PTX)) << i;
    }
  }
}

// A program whose own headers are large (as CUTLASS's are) gets no automatic PCH, even
// where its includes reach the toolkit; one with small headers does.
TEST(Pch, NoneForProgramsWithLargeOwnHeaders) {
  kjit::test::TempDir inc;
  const std::string big(3u << 20, ' ');  // 3 MB: past the 2 MB of own headers
  kjit::test::write_file(inc.file("big.h"), "#include <cuda_fp16.h>\n/*" + big + "*/\n");
  kjit::test::write_file(inc.file("small.h"), "#include <cuda_fp16.h>\n");
  for (const char* header : {"big.h", "small.h"}) {
    Cache cache;
    Compiler c(cache.c);
    ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
    Options o;
    ASSERT_EQ(kjit_options_add_include_path(o.o, inc.path().c_str()), KJIT_OK);
    Binary b;
    ASSERT_EQ(kjit_compile(c.c, program(header).c_str(), o.o, &b.b), KJIT_OK) << b.log();
    const kjit_cache_stats st = cache.stats();
    if (std::string(header) == "big.h") {
      EXPECT_EQ(st.pch_created + st.pch_used + st.pch_failed, 0u) << header;
    } else {
      EXPECT_EQ(st.pch_created + st.pch_used + st.pch_failed, 1u) << header;
    }
  }
}

TEST(Pch, OffMeansNone) {
  Cache cache;
  Compiler c(cache.c);
  Options o;
  ASSERT_EQ(kjit_options_set_pch(o.o, 0), KJIT_OK);
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kjit::test::kCubReduceSource, o.o, &b.b), KJIT_OK) << b.log();
  const kjit_cache_stats st = cache.stats();
  EXPECT_EQ(st.pch_created + st.pch_used + st.pch_failed, 0u);
  EXPECT_EQ(st.stores, 1u);
}

}  // namespace
