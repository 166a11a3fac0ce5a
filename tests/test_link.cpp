// The link step: LTO-IR, PTX and CUBIN of separately compiled sources linked by nvJitLink,
// cached; bad input and the key. The GPU part (linked kernels against the CPU and against
// the same code compiled as one program) skips without a driver.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/kjit.h"
#include "link/elf.h"
#include "link/linker.h"
#include "link/nvjitlink.h"
#include "support/cuda_checks.h"
#include "support/test_support.h"

namespace {

std::string last_error() {
  return kjit_last_error();
}

// One program calls a device function another defines.
const char* const kCaller = R"(
extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
template <int N>
__global__ void scaled(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i] * N, y[i]);
}
)";

const char* const kCallee = R"(
__device__ float combine(float a, float b) { return a * 3.0f + b * 0.5f; }
)";

float combine_ref(float a, float b) {
  return a * 3.0f + b * 0.5f;
}

std::string whole_program() {
  return std::string(kCallee) +
         std::string(kCaller).replace(
             std::string(kCaller).find("extern __device__ float combine(float a, float b);"),
             std::strlen("extern __device__ float combine(float a, float b);"), "");
}

struct Bin {
  kjit_binary* b = nullptr;
  Bin() = default;
  explicit Bin(kjit_binary* x) : b(x) {}
  ~Bin() { kjit_binary_destroy(b); }
  Bin(const Bin&) = delete;
  Bin& operator=(const Bin&) = delete;
  std::string data(int kind) const {
    size_t n = 0;
    const void* p = kjit_binary_data(b, kind, &n);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }
};

struct Linker {
  kjit_linker* l = nullptr;
  explicit Linker(kjit_cache* cache) {
    EXPECT_EQ(kjit_linker_create(cache, &l), KJIT_OK) << last_error();
  }
  ~Linker() { kjit_linker_destroy(l); }
  Linker(const Linker&) = delete;
  Linker& operator=(const Linker&) = delete;
  std::string key() {
    char hex[65] = {};
    EXPECT_EQ(kjit_linker_key(l, hex), KJIT_OK) << last_error();
    return hex;
  }
};

std::vector<std::string> kernels_of(const kjit_binary* b) {
  std::vector<std::string> out;
  for (size_t i = 0; i < kjit_binary_kernel_count(b); ++i)
    out.push_back(kjit_binary_kernel_name(b, i));
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

class LinkTest : public ::testing::Test {
 protected:
  void SetUp() override { open(); }
  void TearDown() override { close(); }

  void open() {
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = dir_.path().c_str();
    ASSERT_EQ(kjit_cache_open(&co, &cache_), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_compiler_create(cache_, 2, &compiler_), KJIT_OK) << last_error();
  }
  void close() {
    kjit_compiler_destroy(compiler_);
    kjit_cache_close(cache_);
    compiler_ = nullptr;
    cache_ = nullptr;
  }

  // Compiles `source` for `target` with `outputs` and -rdc=true.
  kjit_binary* compile(const char* source, const char* target, unsigned outputs,
                       const char* name_expression = nullptr) {
    kjit_options* o = nullptr;
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    kjit_options_set_target(o, target);
    kjit_options_set_outputs(o, outputs);
    kjit_options_add(o, "-rdc=true");
    if (name_expression) kjit_options_add_name_expression(o, name_expression);
    kjit_binary* b = nullptr;
    const kjit_status st = kjit_compile(compiler_, source, o, &b);
    EXPECT_EQ(st, KJIT_OK) << last_error() << (b ? kjit_binary_log(b) : "");
    kjit_options_destroy(o);
    return b;
  }

  kjit::test::TempDir dir_;
  kjit_cache* cache_ = nullptr;
  kjit_compiler* compiler_ = nullptr;
};

TEST_F(LinkTest, LtoIrOfTwoSourcesLinksToACubin) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR, "scaled<2>"));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  ASSERT_FALSE(caller.data(KJIT_OUTPUT_LTOIR).empty());
  Linker l(cache_);
  ASSERT_EQ(kjit_linker_add_binary(l.l, caller.b, "caller.cu"), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_linker_add_binary(l.l, callee.b, nullptr), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_linker_add_option(l.l, "-lto"), KJIT_OK);
  const uint64_t runs = kjit::link::link_runs();
  Bin out;
  ASSERT_EQ(kjit_link(l.l, &out.b), KJIT_OK) << last_error();
  EXPECT_EQ(kjit::link::link_runs(), runs + 1);
  EXPECT_EQ(kjit_binary_status(out.b), KJIT_OK);
  EXPECT_EQ(kjit_binary_tier(out.b), KJIT_TIER_COMPILED);
  EXPECT_STREQ(kjit_binary_target(out.b), "sm_90");  // taken from the binaries
  const std::string cubin = out.data(KJIT_OUTPUT_CUBIN);
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(cubin.compare(0, 4,
                          "\x7f"
                          "ELF"),
            0);
  EXPECT_TRUE(kjit::link::is_cubin(cubin));
  EXPECT_TRUE(out.data(KJIT_OUTPUT_PTX).empty());
  // The kernel symbols are in the CUBIN, and the name expression came along.
  const char* lowered = kjit_binary_lowered_name(out.b, "scaled<2>");
  ASSERT_NE(lowered, nullptr);
  EXPECT_STREQ(lowered, kjit_binary_lowered_name(caller.b, "scaled<2>"));
  const auto kernels = kernels_of(out.b);
  EXPECT_TRUE(contains(kernels, "apply")) << ::testing::PrintToString(kernels);
  EXPECT_TRUE(contains(kernels, lowered)) << ::testing::PrintToString(kernels);
  EXPECT_EQ(kjit::link::cubin_kernels(cubin), kernels);
  EXPECT_NE(cubin.find("apply"), std::string::npos);
  EXPECT_EQ(std::string(kjit_binary_key(out.b)), l.key());
  EXPECT_NE(std::string(kjit_binary_key(out.b)), std::string(kjit_binary_key(caller.b)));
  EXPECT_NE(std::string(kjit_binary_metadata_json(out.b)).find("nvJitLink"), std::string::npos);
}

TEST_F(LinkTest, TheSecondLinkIsAHitWithoutNvJitLink) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  std::string cubin, key;
  {
    Linker l(cache_);
    kjit_linker_add_binary(l.l, caller.b, nullptr);
    kjit_linker_add_binary(l.l, callee.b, nullptr);
    kjit_linker_add_option(l.l, "-lto");
    kjit_linker_add_option(l.l, "-O3");
    Bin first, second;
    ASSERT_EQ(kjit_link(l.l, &first.b), KJIT_OK) << last_error();
    const uint64_t runs = kjit::link::link_runs();
    ASSERT_EQ(kjit_link(l.l, &second.b), KJIT_OK) << last_error();
    EXPECT_EQ(kjit::link::link_runs(), runs);
    EXPECT_EQ(kjit_binary_tier(second.b), KJIT_TIER_MEMORY);
    EXPECT_EQ(second.data(KJIT_OUTPUT_CUBIN), first.data(KJIT_OUTPUT_CUBIN));
    cubin = first.data(KJIT_OUTPUT_CUBIN);
    key = kjit_binary_key(first.b);
  }
  // Another cache handle (as another process would have): a disk hit, same bytes.
  close();
  open();
  Bin caller2(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee2(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  Linker l(cache_);
  kjit_linker_add_binary(l.l, caller2.b, nullptr);
  kjit_linker_add_binary(l.l, callee2.b, nullptr);
  kjit_linker_add_option(l.l, "-lto");
  kjit_linker_add_option(l.l, "-O3");
  const uint64_t runs = kjit::link::link_runs();
  Bin hit;
  ASSERT_EQ(kjit_link(l.l, &hit.b), KJIT_OK) << last_error();
  EXPECT_EQ(kjit::link::link_runs(), runs);
  EXPECT_EQ(kjit_binary_tier(hit.b), KJIT_TIER_DISK);
  EXPECT_EQ(hit.data(KJIT_OUTPUT_CUBIN), cubin);
  EXPECT_EQ(std::string(kjit_binary_key(hit.b)), key);
  kjit_binary* raw = nullptr;
  ASSERT_EQ(kjit_cache_get(cache_, key.c_str(), &raw), KJIT_OK) << last_error();
  kjit_binary_destroy(raw);
}

TEST_F(LinkTest, ConcurrentLinksOfOneLinkerRunNvJitLinkOnce) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  Linker l(cache_);
  kjit_linker_add_binary(l.l, caller.b, nullptr);
  kjit_linker_add_binary(l.l, callee.b, nullptr);
  kjit_linker_add_option(l.l, "-lto");
  kjit_linker_add_option(l.l, "-maxrregcount=40");  // a key no other test links
  const uint64_t runs = kjit::link::link_runs();
  std::vector<std::string> cubins(6);
  std::vector<kjit_status> statuses(6, KJIT_ERROR_INTERNAL);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cubins.size(); ++i) {
    threads.emplace_back([&, i] {
      Bin out;
      statuses[i] = kjit_link(l.l, &out.b);
      cubins[i] = out.data(KJIT_OUTPUT_CUBIN);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(kjit::link::link_runs(), runs + 1);
  for (size_t i = 0; i < cubins.size(); ++i) {
    EXPECT_EQ(statuses[i], KJIT_OK) << i;
    EXPECT_EQ(cubins[i], cubins[0]) << i;
  }
  EXPECT_TRUE(kjit::link::is_cubin(cubins[0]));
}

TEST_F(LinkTest, PtxAndCubinInputsWithRdc) {
  for (unsigned kind : {unsigned(KJIT_OUTPUT_PTX), unsigned(KJIT_OUTPUT_CUBIN)}) {
    SCOPED_TRACE(kind == KJIT_OUTPUT_PTX ? "PTX inputs" : "CUBIN inputs");
    Bin caller(compile(kCaller, "sm_90", kind, "scaled<3>"));
    Bin callee(compile(kCallee, "sm_90", kind));
    Linker l(cache_);
    ASSERT_EQ(kjit_linker_add_binary(l.l, caller.b, nullptr), KJIT_OK);
    ASSERT_EQ(kjit_linker_add_binary(l.l, callee.b, nullptr), KJIT_OK);
    ASSERT_EQ(kjit_linker_set_target(l.l, "sm_90"), KJIT_OK);
    const uint64_t runs = kjit::link::link_runs();
    Bin out;
    ASSERT_EQ(kjit_link(l.l, &out.b), KJIT_OK) << last_error();
    EXPECT_EQ(kjit::link::link_runs(), runs + 1);
    EXPECT_TRUE(kjit::link::is_cubin(out.data(KJIT_OUTPUT_CUBIN)));
    EXPECT_TRUE(contains(kernels_of(out.b), "apply"));
    EXPECT_NE(kjit_binary_lowered_name(out.b, "scaled<3>"), nullptr);
    Bin again;
    ASSERT_EQ(kjit_link(l.l, &again.b), KJIT_OK) << last_error();
    EXPECT_EQ(kjit::link::link_runs(), runs + 1);
    EXPECT_NE(kjit_binary_tier(again.b), KJIT_TIER_COMPILED);
  }
}

TEST_F(LinkTest, RawBytesAndFilesLinkLikeBinaries) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  const std::string a = caller.data(KJIT_OUTPUT_LTOIR), b = callee.data(KJIT_OUTPUT_LTOIR);
  kjit::test::write_file(dir_.file("callee.ltoir"), b);
  Linker l(nullptr);
  ASSERT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, a.data(), a.size(), "a"), KJIT_OK);
  ASSERT_EQ(kjit_linker_add_file(l.l, KJIT_LINK_INPUT_AUTO, dir_.file("callee.ltoir").c_str()),
            KJIT_OK)
      << last_error();
  kjit_linker_set_target(l.l, "sm_90");
  kjit_linker_add_option(l.l, "-lto");
  kjit_linker_set_outputs(l.l, KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_PTX);
  Bin out;
  ASSERT_EQ(kjit_link(l.l, &out.b), KJIT_OK) << last_error();
  EXPECT_TRUE(kjit::link::is_cubin(out.data(KJIT_OUTPUT_CUBIN)));
  EXPECT_NE(out.data(KJIT_OUTPUT_PTX).find(".entry apply"), std::string::npos);
  // Without a cache nothing is kept: the same link runs nvJitLink again (twice: CUBIN, PTX).
  const uint64_t runs = kjit::link::link_runs();
  Bin again;
  ASSERT_EQ(kjit_link(l.l, &again.b), KJIT_OK) << last_error();
  EXPECT_EQ(kjit::link::link_runs(), runs + 2);
  EXPECT_EQ(again.data(KJIT_OUTPUT_CUBIN), out.data(KJIT_OUTPUT_CUBIN));

  EXPECT_EQ(kjit_linker_add_file(l.l, KJIT_LINK_INPUT_AUTO, dir_.file("x.bin").c_str()),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_file(l.l, KJIT_LINK_INPUT_PTX, dir_.file("missing.ptx").c_str()),
            KJIT_ERROR_IO);
  EXPECT_NE(last_error().find("missing.ptx"), std::string::npos);
}

TEST_F(LinkTest, UndefinedSymbolGivesTheLogAndIsNotCached) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Linker l(cache_);
  kjit_linker_add_binary(l.l, caller.b, nullptr);
  kjit_linker_add_option(l.l, "-lto");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint64_t runs = kjit::link::link_runs();
    Bin out;
    EXPECT_EQ(kjit_link(l.l, &out.b), KJIT_ERROR_LINK);
    EXPECT_EQ(kjit::link::link_runs(), runs + 1);  // tried again: nothing was cached
    ASSERT_NE(out.b, nullptr);
    EXPECT_EQ(kjit_binary_status(out.b), KJIT_ERROR_LINK);
    EXPECT_NE(std::string(kjit_binary_log(out.b)).find("Unresolved extern function"),
              std::string::npos)
        << kjit_binary_log(out.b);
    EXPECT_NE(last_error().find("Unresolved extern function"), std::string::npos);
    EXPECT_TRUE(out.data(KJIT_OUTPUT_CUBIN).empty());
  }
  kjit_binary* raw = nullptr;
  EXPECT_EQ(kjit_cache_get(cache_, l.key().c_str(), &raw), KJIT_ERROR_NOT_FOUND);
  // A duplicate definition is reported the same way. (LTO-IR: nvJitLink 13.0 crashes on
  // duplicate PTX definitions once a link in the process has failed in ptxas.)
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  Linker d(cache_);
  kjit_linker_add_binary(d.l, callee.b, "one");
  kjit_linker_add_binary(d.l, callee.b, "two");
  kjit_linker_add_option(d.l, "-lto");
  Bin dup;
  EXPECT_EQ(kjit_link(d.l, &dup.b), KJIT_ERROR_LINK);
  ASSERT_NE(dup.b, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(dup.b)), "");
}

TEST_F(LinkTest, MismatchedTargets) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  {  // kjit's own check: a binary compiled for a newer architecture
    Linker l(cache_);
    kjit_linker_add_binary(l.l, caller.b, nullptr);
    kjit_linker_add_binary(l.l, callee.b, nullptr);
    kjit_linker_add_option(l.l, "-lto");
    kjit_linker_set_target(l.l, "sm_80");
    Bin out;
    EXPECT_EQ(kjit_link(l.l, &out.b), KJIT_ERROR_UNSUPPORTED_TARGET);
    EXPECT_NE(last_error().find("sm_80"), std::string::npos) << last_error();
    EXPECT_EQ(out.b, nullptr);
  }
  {  // nvJitLink's: raw LTO-IR of sm_90 for sm_80, with its log
    const std::string a = caller.data(KJIT_OUTPUT_LTOIR);
    Linker l(cache_);
    kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, a.data(), a.size(), "a");
    kjit_linker_add_option(l.l, "-lto");
    kjit_linker_set_target(l.l, "sm_80");
    Bin out;
    EXPECT_EQ(kjit_link(l.l, &out.b), KJIT_ERROR_UNSUPPORTED_TARGET);
    ASSERT_NE(out.b, nullptr);
    EXPECT_NE(std::string(kjit_binary_log(out.b)).find("arch"), std::string::npos)
        << kjit_binary_log(out.b);
  }
  {  // a CUBIN links only for its own architecture
    Bin cubin80(compile(kCallee, "sm_80", KJIT_OUTPUT_CUBIN));
    Bin caller90(compile(kCaller, "sm_90", KJIT_OUTPUT_CUBIN));
    Linker l(cache_);
    kjit_linker_add_binary(l.l, caller90.b, nullptr);
    kjit_linker_add_binary(l.l, cubin80.b, nullptr);
    Bin out;
    EXPECT_EQ(kjit_link(l.l, &out.b), KJIT_ERROR_UNSUPPORTED_TARGET);
    EXPECT_NE(last_error().find("sm_80"), std::string::npos) << last_error();
  }
}

TEST_F(LinkTest, BadInputGivesClearStatuses) {
  Linker l(nullptr);
  const char garbage[] = "garbage bytes, not device code";
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_CUBIN, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a CUBIN"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_FATBIN, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LIBRARY, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_OBJECT, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  const char binary[] = {'\x01', '\xff', '\xfe', '\0', 'x'};
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_PTX, binary, sizeof binary, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, 0, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, 7, garbage, sizeof garbage, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, garbage, 0, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, nullptr, 4, "g"),
            KJIT_ERROR_INVALID_ARGUMENT);
  kjit_linker_set_target(l.l, "sm_90");
  kjit_linker_add_option(l.l, "-lto");
  Bin none;
  EXPECT_EQ(kjit_link(l.l, &none.b), KJIT_ERROR_INVALID_ARGUMENT);  // nothing was added
  EXPECT_NE(last_error().find("no inputs"), std::string::npos) << last_error();
  // Garbage that only nvJitLink can recognise: its log says why.
  ASSERT_EQ(kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, garbage, sizeof garbage, "g"),
            KJIT_OK);
  Bin out;
  EXPECT_EQ(kjit_link(l.l, &out.b), KJIT_ERROR_LINK);
  ASSERT_NE(out.b, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(out.b)).find("bad input"), std::string::npos)
      << kjit_binary_log(out.b);
  kjit_kernel* k = nullptr;
  EXPECT_NE(kjit_kernel_from_binary(out.b, "apply", 0, 0, &k), KJIT_OK);
  EXPECT_EQ(k, nullptr);
}

TEST_F(LinkTest, BadOptionsAndTargets) {
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_PTX));
  auto status = [&](std::vector<const char*> options, const char* target, unsigned outputs) {
    Linker l(nullptr);
    kjit_linker_add_binary(l.l, callee.b, nullptr);
    for (const char* o : options) EXPECT_EQ(kjit_linker_add_option(l.l, o), KJIT_OK);
    if (target) kjit_linker_set_target(l.l, target);
    kjit_linker_set_outputs(l.l, outputs);
    Bin out;
    const kjit_status st = kjit_link(l.l, &out.b);
    return st;
  };
  EXPECT_EQ(status({"-bogus-option"}, "sm_90", 0), KJIT_ERROR_INVALID_OPTION);
  EXPECT_NE(last_error().find("-bogus-option"), std::string::npos) << last_error();
  EXPECT_EQ(status({"nodash"}, "sm_90", 0), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(status({"-ptx"}, "sm_90", 0), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(status({}, "sm_90", KJIT_OUTPUT_PTX), KJIT_ERROR_INVALID_OPTION);  // needs -lto
  EXPECT_EQ(status({"-lto"}, "sm_90", KJIT_OUTPUT_LTOIR), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(status({}, "compute_90", 0), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(status({}, "sm_", 0), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(status({"-arch=sm_90", "-maxrregcount=32", "-ftz=1", "-prec-div=0", "-prec-sqrt=0",
                    "-fma=1", "-O3", "-lineinfo", "-split-compile=0"},
                   nullptr, 0),
            KJIT_OK)
      << last_error();
  // Raw inputs alone say nothing about the target.
  Linker raw(nullptr);
  const char text[] = ".version 9.0\n.target sm_90\n.address_size 64\n";
  kjit_linker_add_data(raw.l, KJIT_LINK_INPUT_PTX, text, sizeof text - 1, "t");
  Bin out;
  EXPECT_EQ(kjit_link(raw.l, &out.b), KJIT_ERROR_INVALID_OPTION);
  EXPECT_NE(last_error().find("no target"), std::string::npos) << last_error();
}

TEST_F(LinkTest, TheKeyCoversEveryInputByteAndOption) {
  Bin caller(compile(kCaller, "sm_90", KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, "sm_90", KJIT_OUTPUT_LTOIR));
  const std::string a = caller.data(KJIT_OUTPUT_LTOIR), b = callee.data(KJIT_OUTPUT_LTOIR);
  struct Spec {
    std::string a, b;
    std::vector<std::string> options{"-lto"};
    std::string target = "sm_90";
    unsigned outputs = 0;
    bool swap = false;
    const char* name = "a";
  };
  auto key = [&](const Spec& s) {
    Linker l(cache_);
    const std::string& first = s.swap ? s.b : s.a;
    const std::string& second = s.swap ? s.a : s.b;
    kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, first.data(), first.size(), s.name);
    kjit_linker_add_data(l.l, KJIT_LINK_INPUT_LTOIR, second.data(), second.size(), "b");
    for (const auto& o : s.options) kjit_linker_add_option(l.l, o.c_str());
    kjit_linker_set_target(l.l, s.target.c_str());
    kjit_linker_set_outputs(l.l, s.outputs);
    return l.key();
  };
  Spec base{a, b};
  const std::string k0 = key(base);
  ASSERT_EQ(k0.size(), 64u);
  EXPECT_EQ(key(base), k0);  // deterministic
  Spec named = base;
  named.name = "another label";
  EXPECT_EQ(key(named), k0);  // labels are not inputs
  std::vector<std::string> keys{k0};
  for (size_t pos : {size_t(0), a.size() / 2, a.size() - 1}) {
    Spec s = base;
    s.a[pos] = static_cast<char>(s.a[pos] ^ 1);
    keys.push_back(key(s));
  }
  Spec s = base;
  s.b += '\0';
  keys.push_back(key(s));
  s = base;
  s.options.push_back("-O3");
  keys.push_back(key(s));
  s = base;
  s.options = {"-lto", "-maxrregcount=32"};
  keys.push_back(key(s));
  s = base;
  s.options = {"-lto", "-maxrregcount=64"};
  keys.push_back(key(s));
  s = base;
  s.options = {"-lto", "-ftz=1"};
  keys.push_back(key(s));
  s = base;
  s.options = {"-lto", "-ftz=1", "-O3"};
  keys.push_back(key(s));
  s = base;
  s.options = {"-lto", "-O3", "-ftz=1"};
  keys.push_back(key(s));
  s = base;
  s.target = "sm_100";
  keys.push_back(key(s));
  s = base;
  s.outputs = KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_PTX;
  keys.push_back(key(s));
  s = base;
  s.swap = true;
  keys.push_back(key(s));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " vs " << j;
  }
  // A kjit binary is keyed by its compile key, the same bytes given raw by their content:
  // both differ from each other and from any compile key.
  Linker by_binary(cache_);
  kjit_linker_add_binary(by_binary.l, caller.b, nullptr);
  kjit_linker_add_binary(by_binary.l, callee.b, nullptr);
  kjit_linker_add_option(by_binary.l, "-lto");
  const std::string kb = by_binary.key();
  EXPECT_NE(kb, k0);
  EXPECT_NE(kb, std::string(kjit_binary_key(caller.b)));
  // The kind is in the key: the same text as PTX and as LTO-IR.
  const char text[] = ".version 9.0\n.target sm_90\n.address_size 64\n";
  Linker as_ptx(cache_), as_lto(cache_);
  kjit_linker_add_data(as_ptx.l, KJIT_LINK_INPUT_PTX, text, sizeof text - 1, nullptr);
  kjit_linker_add_data(as_lto.l, KJIT_LINK_INPUT_LTOIR, text, sizeof text - 1, nullptr);
  kjit_linker_set_target(as_ptx.l, "sm_90");
  kjit_linker_set_target(as_lto.l, "sm_90");
  EXPECT_NE(as_ptx.key(), as_lto.key());
}

TEST_F(LinkTest, HandlesAndArguments) {
  kjit_linker* l = nullptr;
  EXPECT_EQ(kjit_linker_create(nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_create(reinterpret_cast<kjit_cache*>(compiler_), &l),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(l, nullptr);
  ASSERT_EQ(kjit_linker_create(nullptr, &l), KJIT_OK);
  EXPECT_EQ(kjit_linker_set_target(l, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_set_target(l, ""), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_option(l, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_add_binary(l, nullptr, nullptr), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_linker_add_file(l, 0, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_link(l, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_linker_key(l, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  // A failed compile's binary holds no code.
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_90");
  kjit_binary* failed = nullptr;
  EXPECT_EQ(kjit_compile(compiler_, "this is not CUDA", o, &failed), KJIT_ERROR_COMPILE);
  kjit_options_destroy(o);
  EXPECT_EQ(kjit_linker_add_binary(l, failed, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_binary_destroy(failed);
  kjit_linker_destroy(l);
  kjit_linker_destroy(nullptr);
  kjit_binary* out = nullptr;
  EXPECT_EQ(kjit_link(nullptr, &out), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_link(reinterpret_cast<kjit_linker*>(cache_), &out), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(out, nullptr);
  const char* version = nullptr;
  ASSERT_EQ(kjit_nvjitlink_version(&version), KJIT_OK) << last_error();
  EXPECT_EQ(std::string(version).rfind("nvJitLink 13.", 0), 0u) << version;
  EXPECT_NE(std::string(version).find("build-id:"), std::string::npos) << version;
  EXPECT_EQ(kjit_nvjitlink_version(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kjit_status_string(KJIT_ERROR_LINK), "KJIT_ERROR_LINK: link failed");
}

// In a fresh process (the library is opened once per process): a missing nvJitLink is a
// clear status, and compiling still works.
TEST(LinkUnavailable, MissingNvJitLinkIsAClearStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KJIT_NVJITLINK_LIBRARY", "/nonexistent/libnvJitLink.so.13", 1);
        kjit_linker* l = nullptr;
        kjit_linker_create(nullptr, &l);
        const char text[] = ".version 9.0\n.target sm_90\n.address_size 64\n";
        kjit_linker_add_data(l, KJIT_LINK_INPUT_PTX, text, sizeof text - 1, nullptr);
        kjit_linker_set_target(l, "sm_90");
        kjit_binary* out = nullptr;
        const kjit_status st = kjit_link(l, &out);
        const bool said =
            std::string(kjit_last_error()).find("(nvJitLink) cannot be used") != std::string::npos;
        std::exit(st == KJIT_ERROR_NVJITLINK && out == nullptr && said ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Compiles both sources to LTO-IR and links them through the cache in `dir`; returns the
// link's tier, or -1 on a failure.
int link_through(const std::string& dir) {
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  if (kjit_cache_open(&co, &cache) != KJIT_OK) return -1;
  kjit_compiler_create(cache, 1, &compiler);
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_90");
  kjit_options_set_outputs(o, KJIT_OUTPUT_LTOIR);
  kjit_options_add(o, "-rdc=true");
  kjit_binary *a = nullptr, *b = nullptr, *out = nullptr;
  kjit_linker* l = nullptr;
  int tier = -1;
  if (kjit_compile(compiler, kCaller, o, &a) == KJIT_OK &&
      kjit_compile(compiler, kCallee, o, &b) == KJIT_OK &&
      kjit_linker_create(cache, &l) == KJIT_OK) {
    kjit_linker_add_binary(l, a, nullptr);
    kjit_linker_add_binary(l, b, nullptr);
    kjit_linker_add_option(l, "-lto");
    if (kjit_link(l, &out) == KJIT_OK) tier = kjit_binary_tier(out);
  }
  kjit_binary_destroy(out);
  kjit_linker_destroy(l);
  kjit_binary_destroy(a);
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return tier;
}

// A link that hits the disk in a fresh process neither runs nor even loads nvJitLink (its
// load costs tens of milliseconds): the key's nvJitLink identity comes from the cache.
TEST(LinkFreshProcess, AHitNeverLoadsNvJitLink) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The death test's child runs this body again from the start: it finds the directory
  // the parent prepared in the environment.
  const char* prepared = std::getenv("KJIT_TEST_LINK_HIT_DIR");
  std::unique_ptr<kjit::test::TempDir> tmp;
  std::string dir;
  if (prepared) {
    dir = prepared;
  } else {
    tmp = std::make_unique<kjit::test::TempDir>();
    dir = tmp->path();
    ASSERT_EQ(link_through(dir), KJIT_TIER_COMPILED) << last_error();
    setenv("KJIT_TEST_LINK_HIT_DIR", dir.c_str(), 1);
  }
  EXPECT_EXIT(
      {
        const int tier = link_through(dir);
        std::fprintf(stderr, "tier %d loaded %d runs %llu\n", tier,
                     int(kjit::link::nvjitlink_loaded()),
                     static_cast<unsigned long long>(kjit::link::link_runs()));
        std::exit(tier == KJIT_TIER_DISK && !kjit::link::nvjitlink_loaded() &&
                          kjit::link::link_runs() == 0
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "tier 2 loaded 0 runs 0");
  if (!prepared) unsetenv("KJIT_TEST_LINK_HIT_DIR");
}

// ---- on a GPU ---------------------------------------------------------------------------

namespace cu = kjit::cuda;

class LinkGpu : public LinkTest {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    LinkTest::SetUp();
    char arch[16];
    ASSERT_EQ(kjit_device_arch(0, arch, sizeof arch), KJIT_OK);
    arch_ = arch;
    CU_ASSERT(cu::driver().cuCtxSetCurrent(cu::primary_context(0)));
  }

  // Runs `k` as (x, y, n) and returns y.
  std::vector<float> run(kjit_kernel* k, const std::vector<float>& x, std::vector<float> y) {
    const cu::Driver& d = cu::driver();
    const size_t bytes = x.size() * sizeof(float);
    CUdeviceptr dx = 0, dy = 0;
    EXPECT_EQ(d.cuMemAlloc(&dx, bytes), CUDA_SUCCESS);
    EXPECT_EQ(d.cuMemAlloc(&dy, bytes), CUDA_SUCCESS);
    d.cuMemcpyHtoD(dx, x.data(), bytes);
    d.cuMemcpyHtoD(dy, y.data(), bytes);
    int n = static_cast<int>(x.size());
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 128;
    cfg.grid[0] = static_cast<uint32_t>((x.size() + 127) / 128);
    void* args[] = {&dx, &dy, &n};
    EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 3), KJIT_OK) << last_error();
    EXPECT_EQ(d.cuCtxSynchronize(), CUDA_SUCCESS);
    d.cuMemcpyDtoH(y.data(), dy, bytes);
    d.cuMemFree(dx);
    d.cuMemFree(dy);
    return y;
  }

  std::string arch_;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TEST_F(LinkGpu, LinkedKernelsMatchTheCpu) {
  Bin caller(compile(kCaller, arch_.c_str(), KJIT_OUTPUT_LTOIR, "scaled<2>"));
  Bin callee(compile(kCallee, arch_.c_str(), KJIT_OUTPUT_LTOIR));
  Linker l(cache_);
  kjit_linker_add_binary(l.l, caller.b, nullptr);
  kjit_linker_add_binary(l.l, callee.b, nullptr);
  kjit_linker_add_option(l.l, "-lto");
  kjit_linker_set_target(l.l, "auto");
  Bin out;
  ASSERT_EQ(kjit_link(l.l, &out.b), KJIT_OK) << last_error();
  const size_t n = 1000;
  const std::vector<float> x = random_floats(n, 1), y = random_floats(n, 2);
  for (const char* name : {"apply", "scaled<2>"}) {
    SCOPED_TRACE(name);
    const float scale = std::string(name) == "apply" ? 1.0f : 2.0f;
    kjit_kernel* k = nullptr;
    ASSERT_EQ(kjit_kernel_from_binary(out.b, name, 0, 0, &k), KJIT_OK) << last_error();
    EXPECT_EQ(kjit_kernel_load_path(k), KJIT_LOAD_CUBIN);
    const std::vector<float> got = run(k, x, y);
    kjit_kernel_destroy(k);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const float want = combine_ref(x[i] * scale, y[i]);
      if (std::fabs(got[i] - want) > 1e-5f * std::fabs(want) + 1e-5f && ++bad < 5) {
        ADD_FAILURE() << "[" << i << "] got " << got[i] << " want " << want;
      }
    }
    EXPECT_EQ(bad, 0u);
  }
}

TEST_F(LinkGpu, LtoLinkedKernelMatchesTheWholeProgram) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Bin caller(compile(kCaller, arch_.c_str(), KJIT_OUTPUT_LTOIR));
  Bin callee(compile(kCallee, arch_.c_str(), KJIT_OUTPUT_LTOIR));
  Linker l(nullptr);
  kjit_linker_add_binary(l.l, caller.b, nullptr);
  kjit_linker_add_binary(l.l, callee.b, nullptr);
  kjit_linker_add_option(l.l, "-lto");
  Bin linked;
  ASSERT_EQ(kjit_link(l.l, &linked.b), KJIT_OK) << last_error();
  const auto t1 = clock::now();
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, arch_.c_str());
  kjit_options_set_outputs(o, KJIT_OUTPUT_CUBIN);
  Bin whole;
  ASSERT_EQ(kjit_compile(compiler_, whole_program().c_str(), o, &whole.b), KJIT_OK) << last_error();
  kjit_options_destroy(o);
  const auto t2 = clock::now();
  kjit_kernel *a = nullptr, *b = nullptr;
  ASSERT_EQ(kjit_kernel_from_binary(linked.b, "apply", 0, 0, &a), KJIT_OK) << last_error();
  ASSERT_EQ(kjit_kernel_from_binary(whole.b, "apply", 0, 0, &b), KJIT_OK) << last_error();
  const std::vector<float> x = random_floats(4096, 3), y = random_floats(4096, 4);
  const std::vector<float> ya = run(a, x, y), yb = run(b, x, y);
  kjit_kernel_destroy(a);
  kjit_kernel_destroy(b);
  EXPECT_EQ(ya, yb);  // the same code, bit for bit
  std::printf("[ info ] LTO: two compiles + link %.1f ms; one program %.1f ms (%s)\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count(), arch_.c_str());
}

}  // namespace
