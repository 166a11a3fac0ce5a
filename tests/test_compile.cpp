// The NVRTC compiler through the public C API: outputs, names, headers, determinism,
// async and batch compiles, and every kind of bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"
#include "support/test_support.h"

namespace {

using kjit::test::kSaxpySource;
using kjit::test::kTemplateSource;

struct Options {
  kjit_options* o = nullptr;
  explicit Options(const char* target = "sm_90") {
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(o, target), KJIT_OK);
  }
  ~Options() { kjit_options_destroy(o); }
};

struct Compiler {
  kjit_compiler* c = nullptr;
  explicit Compiler(kjit_cache* cache = nullptr, unsigned threads = 0) {
    EXPECT_EQ(kjit_compiler_create(cache, threads, &c), KJIT_OK);
  }
  ~Compiler() { kjit_compiler_destroy(c); }
};

struct Binary {
  kjit_binary* b = nullptr;
  ~Binary() { kjit_binary_destroy(b); }
  std::string data(int kind) const {
    size_t n = 0;
    const void* p = kjit_binary_data(b, kind, &n);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }
};

bool is_elf(const std::string& s) { return s.size() > 4 && s.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(Compile, SaxpyToPtxForVirtualTarget) {
  Compiler c;
  Options o("compute_90");
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK) << kjit_last_error();
  const std::string ptx = b.data(KJIT_OUTPUT_PTX);
  EXPECT_NE(ptx.find(".entry saxpy"), std::string::npos);
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_TRUE(b.data(KJIT_OUTPUT_CUBIN).empty());
  EXPECT_STREQ(kjit_binary_target(b.b), "compute_90");
  ASSERT_EQ(kjit_binary_kernel_count(b.b), 1u);
  EXPECT_STREQ(kjit_binary_kernel_name(b.b, 0), "saxpy");
  EXPECT_EQ(kjit_binary_tier(b.b), KJIT_TIER_COMPILED);
  EXPECT_GT(kjit_binary_compile_ms(b.b), 0.0);
}

TEST(Compile, SaxpyToCubinForSm80AndSm90) {
  Compiler c;
  for (const char* target : {"sm_80", "sm_90", "sm_90a"}) {
    Options o(target);
    Binary b;
    ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK) << kjit_last_error();
    EXPECT_TRUE(is_elf(b.data(KJIT_OUTPUT_CUBIN))) << target;
    EXPECT_NE(b.data(KJIT_OUTPUT_PTX).find(".entry saxpy"), std::string::npos) << target;
    EXPECT_STREQ(kjit_binary_target(b.b), target);
  }
}

TEST(Compile, OutputsCanBeSelected) {
  Compiler c;
  Options o("sm_90");
  ASSERT_EQ(kjit_options_set_outputs(o.o, KJIT_OUTPUT_CUBIN), KJIT_OK);
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK) << kjit_last_error();
  EXPECT_TRUE(is_elf(b.data(KJIT_OUTPUT_CUBIN)));
  EXPECT_TRUE(b.data(KJIT_OUTPUT_PTX).empty());
  EXPECT_STREQ(kjit_binary_kernel_name(b.b, 0), "saxpy");
}

TEST(Compile, LtoIrOutput) {
  Compiler c;
  Options o("sm_90");
  ASSERT_EQ(kjit_options_add(o.o, "-dlto"), KJIT_OK);
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK) << kjit_last_error();
  EXPECT_GT(b.data(KJIT_OUTPUT_LTOIR).size(), 100u);
  EXPECT_TRUE(b.data(KJIT_OUTPUT_CUBIN).empty());
}

TEST(Compile, NameExpressionsGiveRealLoweredNames) {
  Compiler c;
  Options o("sm_90");
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "scale<float, 256>"), KJIT_OK);
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "scale<int, 8>"), KJIT_OK);
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kTemplateSource, o.o, &b.b), KJIT_OK) << kjit_last_error();
  const char* f = kjit_binary_lowered_name(b.b, "scale<float, 256>");
  const char* i = kjit_binary_lowered_name(b.b, "scale<int, 8>");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(i, nullptr);
  EXPECT_STRNE(f, i);
  EXPECT_STRNE(f, "scale<float, 256>");  // not an identity map
  EXPECT_EQ(std::string(f).rfind("_Z", 0), 0u) << f;
  const std::string ptx = b.data(KJIT_OUTPUT_PTX);
  EXPECT_NE(ptx.find(f), std::string::npos);
  EXPECT_NE(ptx.find(i), std::string::npos);
  ASSERT_EQ(kjit_binary_name_count(b.b), 2u);
  EXPECT_STREQ(kjit_binary_name_expression(b.b, 1), "scale<int, 8>");
  EXPECT_STREQ(kjit_binary_lowered_name_at(b.b, 1), i);
  EXPECT_EQ(kjit_binary_lowered_name(b.b, "scale<double, 1>"), nullptr);
}

TEST(Compile, InMemoryHeader) {
  Compiler c;
  Options o("sm_90");
  ASSERT_EQ(kjit_options_add_header(o.o, "tile.h", "#define TILE_VALUE 4242\n"), KJIT_OK);
  Binary b;
  const char* src =
      "#include \"tile.h\"\n"
      "extern \"C\" __global__ void fill(int* p) { p[threadIdx.x] = TILE_VALUE; }\n";
  ASSERT_EQ(kjit_compile(c.c, src, o.o, &b.b), KJIT_OK) << kjit_last_error();
  EXPECT_NE(b.data(KJIT_OUTPUT_PTX).find("4242"), std::string::npos);
}

TEST(Compile, OptionsPassThrough) {
  Compiler c;
  Options o("sm_90");
  for (const char* opt : {"-std=c++17", "--use_fast_math", "-maxrregcount=32", "-DSCALE=3",
                          "--Ofast-compile=max", "--split-compile=0", "-lineinfo"}) {
    ASSERT_EQ(kjit_options_add(o.o, opt), KJIT_OK) << opt;
  }
  ASSERT_EQ(kjit_options_add_define(o.o, "OFFSET", "7"), KJIT_OK);
  Binary b;
  const char* src =
      "extern \"C\" __global__ void f(float* p) { p[threadIdx.x] = SCALE * OFFSET * __sinf(p[0]); }\n";
  ASSERT_EQ(kjit_compile(c.c, src, o.o, &b.b), KJIT_OK) << kjit_last_error();
  EXPECT_NE(b.data(KJIT_OUTPUT_PTX).find("sin.approx"), std::string::npos);
}

TEST(Compile, Deterministic) {
  Compiler c;
  Options o("sm_90");
  Binary a, b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &a.b), KJIT_OK);
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK);
  EXPECT_EQ(a.data(KJIT_OUTPUT_PTX), b.data(KJIT_OUTPUT_PTX));
  EXPECT_EQ(a.data(KJIT_OUTPUT_CUBIN), b.data(KJIT_OUTPUT_CUBIN));
  EXPECT_STREQ(kjit_binary_key(a.b), kjit_binary_key(b.b));
  EXPECT_EQ(strlen(kjit_binary_key(a.b)), 64u);
}

TEST(Compile, MetadataIsJson) {
  Compiler c;
  Options o("sm_90");
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK);
  const std::string meta = kjit_binary_metadata_json(b.b);
  EXPECT_NE(meta.find("\"target\":\"sm_90\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"kernels\":[\"saxpy\"]"), std::string::npos) << meta;
}

TEST(Compile, AsyncAndManyMatchSync) {
  Compiler c(nullptr, 2);
  std::vector<std::string> sources;
  for (int i = 0; i < 8; ++i) {
    sources.push_back("extern \"C\" __global__ void k" + std::to_string(i) +
                      "(int* p) { p[threadIdx.x] = " + std::to_string(1000 + i) + "; }\n");
  }
  Options o("sm_90");
  std::vector<std::string> sync_ptx;
  for (const auto& s : sources) {
    Binary b;
    ASSERT_EQ(kjit_compile(c.c, s.c_str(), o.o, &b.b), KJIT_OK);
    sync_ptx.push_back(b.data(KJIT_OUTPUT_PTX));
  }
  // Async.
  std::vector<kjit_future*> futures(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(kjit_compile_async(c.c, sources[i].c_str(), o.o, &futures[i]), KJIT_OK);
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    Binary b;
    ASSERT_EQ(kjit_future_wait(futures[i], -1, &b.b), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_future_ready(futures[i]), 1);
    EXPECT_EQ(b.data(KJIT_OUTPUT_PTX), sync_ptx[i]);
    kjit_binary* again = nullptr;
    EXPECT_EQ(kjit_future_wait(futures[i], 0, &again), KJIT_ERROR_INVALID_ARGUMENT);
    kjit_future_destroy(futures[i]);
  }
  // Many.
  std::vector<const char*> srcs;
  for (const auto& s : sources) srcs.push_back(s.c_str());
  std::vector<const kjit_options*> opts(sources.size(), o.o);
  std::vector<kjit_binary*> outs(sources.size());
  std::vector<kjit_status> statuses(sources.size());
  ASSERT_EQ(kjit_compile_many(c.c, srcs.size(), srcs.data(), opts.data(), outs.data(),
                              statuses.data()),
            KJIT_OK);
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(statuses[i], KJIT_OK);
    size_t n = 0;
    const void* p = kjit_binary_data(outs[i], KJIT_OUTPUT_PTX, &n);
    EXPECT_EQ(std::string(static_cast<const char*>(p), n), sync_ptx[i]);
    kjit_binary_destroy(outs[i]);
  }
}

TEST(Compile, ManyReportsEachFailure) {
  Compiler c(nullptr, 2);
  Options o("sm_90");
  const char* srcs[] = {kSaxpySource, "__global__ void broken( {", ""};
  kjit_binary* outs[3];
  kjit_status st[3];
  const kjit_options* opts[] = {o.o, o.o, o.o};
  EXPECT_EQ(kjit_compile_many(c.c, 3, srcs, opts, outs, st), KJIT_ERROR_COMPILE);
  EXPECT_EQ(st[0], KJIT_OK);
  EXPECT_EQ(st[1], KJIT_ERROR_COMPILE);
  EXPECT_EQ(st[2], KJIT_ERROR_INVALID_SOURCE);
  ASSERT_NE(outs[1], nullptr);
  EXPECT_NE(std::string(kjit_binary_log(outs[1])).find("error"), std::string::npos);
  EXPECT_EQ(outs[2], nullptr);
  for (auto* b : outs) kjit_binary_destroy(b);
}

TEST(Compile, TwoThreadsCompileConcurrently) {
  Compiler c;
  Options o("sm_90");
  kjit_status s1 = KJIT_ERROR_INTERNAL, s2 = KJIT_ERROR_INTERNAL;
  std::string p1, p2;
  std::thread t1([&] {
    Binary b;
    s1 = kjit_compile(c.c, kSaxpySource, o.o, &b.b);
    p1 = b.data(KJIT_OUTPUT_PTX);
  });
  std::thread t2([&] {
    Options o2("sm_90");
    kjit_options_add_name_expression(o2.o, "scale<float, 4>");
    Binary b;
    s2 = kjit_compile(c.c, kTemplateSource, o2.o, &b.b);
    p2 = b.data(KJIT_OUTPUT_PTX);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(s1, KJIT_OK);
  EXPECT_EQ(s2, KJIT_OK);
  EXPECT_NE(p1.find("saxpy"), std::string::npos);
  EXPECT_NE(p2.find("scale"), std::string::npos);
}

TEST(Compile, CancelBeforeStartAndTimeout) {
  Compiler c(nullptr, 1);  // one worker: the second job waits behind the first
  Options o("sm_90");
  ASSERT_EQ(kjit_options_add_include_path(o.o, kjit::test::cub_include_dir().c_str()), KJIT_OK);
  kjit_future* slow = nullptr;
  kjit_future* queued = nullptr;
  ASSERT_EQ(kjit_compile_async(c.c, kjit::test::kCubReduceSource, o.o, &slow), KJIT_OK);
  ASSERT_EQ(kjit_compile_async(c.c, kSaxpySource, o.o, &queued), KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_future_wait(queued, 0, &b), KJIT_ERROR_TIMEOUT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(kjit_future_ready(queued), 0);
  ASSERT_EQ(kjit_future_cancel(queued), KJIT_OK);
  EXPECT_EQ(kjit_future_wait(queued, -1, &b), KJIT_ERROR_CANCELLED);
  EXPECT_EQ(b, nullptr);
  Binary cub;
  EXPECT_EQ(kjit_future_wait(slow, -1, &cub.b), KJIT_OK) << kjit_last_error();
  EXPECT_NE(cub.data(KJIT_OUTPUT_PTX).find("block_sum"), std::string::npos);
  kjit_future_destroy(queued);
  kjit_future_destroy(slow);
}

// ---- bad input -------------------------------------------------------------------------

TEST(BadInput, NullAndGarbageHandles) {
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_compile(nullptr, kSaxpySource, nullptr, &b), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(kjit_last_error()).find("compiler"), std::string::npos);
  alignas(16) unsigned char garbage[256];
  std::memset(garbage, 0xab, sizeof garbage);
  auto* fake = reinterpret_cast<kjit_compiler*>(garbage);
  EXPECT_EQ(kjit_compile(fake, kSaxpySource, nullptr, &b), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_options_add(reinterpret_cast<kjit_options*>(garbage), "-G"),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_binary_status(reinterpret_cast<kjit_binary*>(garbage)), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_STREQ(kjit_binary_log(nullptr), "");
  EXPECT_EQ(kjit_binary_data(nullptr, KJIT_OUTPUT_PTX, nullptr), nullptr);
  EXPECT_EQ(kjit_binary_tier(nullptr), -1);
  Compiler c;
  EXPECT_EQ(kjit_compile(c.c, nullptr, nullptr, &b), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, reinterpret_cast<kjit_options*>(garbage), &b),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_options_create(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_compiler_create(nullptr, 0, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  // Destroying NULL is a no-op.
  kjit_compiler_destroy(nullptr);
  kjit_options_destroy(nullptr);
  kjit_binary_destroy(nullptr);
  kjit_future_destroy(nullptr);
  kjit_cache_close(nullptr);
}

TEST(BadInput, EmptyAndNonUtf8Source) {
  Compiler c;
  Options o;
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_compile(c.c, "", o.o, &b), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(kjit_last_error()).find("empty"), std::string::npos);
  EXPECT_EQ(kjit_compile(c.c, "__global__ void f() {} // \xff\xfe", o.o, &b),
            KJIT_ERROR_INVALID_SOURCE);
  EXPECT_NE(std::string(kjit_last_error()).find("UTF-8"), std::string::npos);
  EXPECT_EQ(kjit_compile(c.c, "// overlong \xc0\xaf\n", o.o, &b), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_EQ(kjit_compile(c.c, "// truncated \xe2\x82", o.o, &b), KJIT_ERROR_INVALID_SOURCE);
  // Valid multi-byte UTF-8 in a comment is fine.
  Binary ok;
  EXPECT_EQ(kjit_compile(c.c, "// π ≈ 3.14 🚀\nextern \"C\" __global__ void f() {}\n", o.o, &ok.b),
            KJIT_OK)
      << kjit_last_error();
}

TEST(BadInput, SyntaxErrorKeepsTheLog) {
  Compiler c;
  Options o;
  kjit_binary* b = nullptr;
  const char* src = "extern \"C\" __global__ void f(int* p) {\n  p[0] = undefined_name;\n}\n";
  EXPECT_EQ(kjit_compile(c.c, src, o.o, &b), KJIT_ERROR_COMPILE);
  ASSERT_NE(b, nullptr) << "a compile error still returns a binary holding the log";
  EXPECT_EQ(kjit_binary_status(b), KJIT_ERROR_COMPILE);
  const std::string log = kjit_binary_log(b);
  EXPECT_NE(log.find("kernel.cu(2)"), std::string::npos) << log;
  EXPECT_NE(log.find("undefined_name"), std::string::npos) << log;
  EXPECT_EQ(kjit_binary_data(b, KJIT_OUTPUT_PTX, nullptr), nullptr);
  EXPECT_NE(std::string(kjit_last_error()).find("kernel.cu(2)"), std::string::npos);
  kjit_binary_destroy(b);
}

TEST(BadInput, UnknownOption) {
  Compiler c;
  Options o;
  ASSERT_EQ(kjit_options_add(o.o, "--no-such-option-here"), KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_INVALID_OPTION);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(std::string(kjit_last_error()).find("NVRTC_ERROR_INVALID_OPTION"), std::string::npos)
      << kjit_last_error();
  EXPECT_EQ(kjit_options_add(o.o, ""), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_options_add(o.o, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
}

TEST(BadInput, UnknownTarget) {
  Compiler c;
  Options o;
  EXPECT_EQ(kjit_options_set_target(o.o, "pentium"), KJIT_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(kjit_options_set_target(o.o, "sm_11"), KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_UNSUPPORTED_TARGET);
  const std::string msg = kjit_last_error();
  EXPECT_NE(msg.find("sm_11"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_90"), std::string::npos) << "lists the supported targets: " << msg;
  // A CUBIN cannot be made for a virtual target.
  Options v("compute_90");
  ASSERT_EQ(kjit_options_set_outputs(v.o, KJIT_OUTPUT_CUBIN), KJIT_OK);
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, v.o, &b), KJIT_ERROR_INVALID_OPTION);
  // Conflicting -arch.
  Options conflict("sm_80");
  ASSERT_EQ(kjit_options_add(conflict.o, "-arch=sm_90"), KJIT_OK);
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, conflict.o, &b), KJIT_ERROR_INVALID_OPTION);
}

TEST(BadInput, MissingNameExpression) {
  Compiler c;
  // In this process: the behaviour under test is this build's, whatever worker is running.
  ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
  Options o;
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "not_there<int>"), KJIT_OK);
  Binary b;
  EXPECT_EQ(kjit_compile(c.c, kTemplateSource, o.o, &b.b), KJIT_ERROR_NAME_NOT_FOUND);
  const std::string message = kjit_last_error();
  EXPECT_NE(message.find("name expression 'not_there<int>' names nothing in 'kernel.cu': "
                         "identifier \"not_there\" is undefined"),
            std::string::npos)
      << message;
  // The binary holds the same, so the detail can be read without kjit_last_error().
  ASSERT_NE(b.b, nullptr);
  EXPECT_EQ(kjit_binary_status(b.b), KJIT_ERROR_NAME_NOT_FOUND);
  const std::string log = kjit_binary_log(b.b);
  EXPECT_NE(log.find("kjit: error: name expression 'not_there<int>' names nothing in "
                     "'kernel.cu': identifier \"not_there\" is undefined"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("__nv_name_map"), std::string::npos) << log;
  EXPECT_TRUE(b.data(KJIT_OUTPUT_PTX).empty());
  EXPECT_TRUE(b.data(KJIT_OUTPUT_CUBIN).empty());
  EXPECT_EQ(kjit_binary_name_count(b.b), 0u);
}

// Name expressions belong to the options. Reusing one options object for a second program
// that lacks the first one's kernels names the expression that failed and why, never the
// internal file NVRTC reports it in; the binary holds that log.
TEST(NameExpressions, ReusedOptionsSayWhichExpressionFailed) {
  Compiler c;
  // In this process: the behaviour under test is this build's, whatever worker is running.
  ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
  Options o("sm_80");
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "scale<float, 256>"), KJIT_OK);
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "&scale<int, 8>"), KJIT_OK);
  {
    Binary first;
    ASSERT_EQ(kjit_compile(c.c, kTemplateSource, o.o, &first.b), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_binary_name_count(first.b), 2u);
  }
  Binary second;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &second.b), KJIT_ERROR_NAME_NOT_FOUND);
  const std::string message = kjit_last_error();
  EXPECT_NE(message.find("name expression '"), std::string::npos) << message;
  EXPECT_NE(message.find("1 more name expression; see the log"), std::string::npos) << message;
  ASSERT_NE(second.b, nullptr);
  const std::string log = kjit_binary_log(second.b);
  EXPECT_EQ(log.find("__nv_name_map"), std::string::npos) << log;
  EXPECT_EQ(log.find("errors detected"), std::string::npos) << log;
  // One line per expression, in the caller's spelling, with the root cause (NVRTC itself
  // says that an identifier is undefined only for the first expression that uses it).
  for (const char* expr : {"scale<float, 256>", "&scale<int, 8>"}) {
    const std::string line = std::string("kjit: error: name expression '") + expr +
                             "' names nothing in 'kernel.cu': identifier \"scale\" is undefined\n";
    EXPECT_NE(log.find(line), std::string::npos) << expr << "\n" << log;
    EXPECT_EQ(log.find(line), log.rfind(line)) << expr << " named twice:\n" << log;
  }
  EXPECT_NE(log.find("kjit_options_clone()"), std::string::npos) << log;

  // With errors of its own as well, the program's errors come first and keep their status.
  Binary broken;
  const std::string bad =
      std::string(kSaxpySource) + "\n__global__ void oops() { undeclared_x = 1; }\n";
  ASSERT_EQ(kjit_compile(c.c, bad.c_str(), o.o, &broken.b), KJIT_ERROR_COMPILE);
  const std::string both = kjit_binary_log(broken.b);
  const size_t own = both.find("identifier \"undeclared_x\" is undefined");
  const size_t names = both.find("kjit: error: name expression 'scale<float, 256>'");
  ASSERT_NE(own, std::string::npos) << both;
  ASSERT_NE(names, std::string::npos) << both;
  EXPECT_LT(own, names) << both;
  EXPECT_EQ(both.find("__nv_name_map"), std::string::npos) << both;
  EXPECT_NE(std::string(kjit_last_error()).find("undeclared_x"), std::string::npos)
      << kjit_last_error();

  // Options of its own (a clone taken before the names were added) compile it cleanly.
  Options base("sm_80");
  kjit_options* own_opts = nullptr;
  ASSERT_EQ(kjit_options_clone(base.o, &own_opts), KJIT_OK);
  Binary clean;
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, own_opts, &clean.b), KJIT_OK) << kjit_last_error();
  kjit_options_destroy(own_opts);
}

// Another cache handle (as another process) is answered from the failure the first one
// recorded, with the same log.
TEST(NameExpressions, RecordedFailureKeepsTheLog) {
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* first_cache = nullptr;
  kjit_cache* second_cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &first_cache), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_cache_open(&co, &second_cache), KJIT_OK) << kjit_last_error();
  Options o("sm_80");
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "scale<float, 4>"), KJIT_OK);
  for (kjit_cache* cache : {first_cache, second_cache}) {
    Compiler c(cache);
    ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
    Binary b;
    ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_ERROR_NAME_NOT_FOUND);
    ASSERT_NE(b.b, nullptr);
    EXPECT_NE(
        std::string(kjit_binary_log(b.b)).find("kjit: error: name expression 'scale<float, 4>'"),
        std::string::npos)
        << kjit_binary_log(b.b);
  }
  kjit_cache_stats stats = KJIT_CACHE_STATS_INIT;
  ASSERT_EQ(kjit_cache_stats_get(second_cache, &stats), KJIT_OK);
  EXPECT_EQ(stats.compiles, 0u) << "the second handle compiled instead of using the record";
  kjit_cache_close(second_cache);
  kjit_cache_close(first_cache);
}

// Async and batch compiles hand back the same binary for a name that names nothing.
TEST(NameExpressions, AsyncAndManyGiveTheLogBinary) {
  Compiler c;
  ASSERT_EQ(kjit_compiler_set_compile_mode(c.c, KJIT_COMPILE_MODE_INPROCESS), KJIT_OK);
  Options o("sm_80");
  ASSERT_EQ(kjit_options_add_name_expression(o.o, "missing_kernel<int>"), KJIT_OK);
  kjit_future* f = nullptr;
  ASSERT_EQ(kjit_compile_async(c.c, kSaxpySource, o.o, &f), KJIT_OK);
  Binary waited;
  EXPECT_EQ(kjit_future_wait(f, -1, &waited.b), KJIT_ERROR_NAME_NOT_FOUND);
  kjit_future_destroy(f);
  ASSERT_NE(waited.b, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(waited.b)).find("'missing_kernel<int>'"), std::string::npos)
      << kjit_binary_log(waited.b);

  const char* sources[] = {kSaxpySource, kSaxpySource};
  Options plain("sm_80");
  const kjit_options* opts[] = {plain.o, o.o};
  kjit_binary* outs[2] = {nullptr, nullptr};
  kjit_status statuses[2];
  EXPECT_EQ(kjit_compile_many(c.c, 2, sources, opts, outs, statuses), KJIT_ERROR_NAME_NOT_FOUND);
  EXPECT_EQ(statuses[0], KJIT_OK);
  EXPECT_EQ(statuses[1], KJIT_ERROR_NAME_NOT_FOUND);
  ASSERT_NE(outs[1], nullptr);
  EXPECT_EQ(kjit_binary_status(outs[1]), KJIT_ERROR_NAME_NOT_FOUND);
  EXPECT_NE(std::string(kjit_binary_log(outs[1])).find("'missing_kernel<int>'"), std::string::npos);
  kjit_binary_destroy(outs[0]);
  kjit_binary_destroy(outs[1]);
}

// ---- what the cache kept, and keys without compiling -------------------------------------

// kjit_binary_stored(): 1 for a stored result and for a hit, 0 with the reason for a result
// kept out (here: a compiler without a cache, a read-only cache), -1 for a bad handle.
TEST(NotStored, EveryReasonReachesTheBinary) {
  EXPECT_EQ(kjit_binary_stored(nullptr, nullptr), -1);
  const char* why = "unset";
  EXPECT_EQ(kjit_binary_stored(nullptr, &why), -1);
  EXPECT_EQ(why, nullptr);
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
  Options o("sm_80");
  {
    Compiler c(cache);
    Binary miss, hit;
    ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &miss.b), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_binary_tier(miss.b), KJIT_TIER_COMPILED);
    EXPECT_EQ(kjit_binary_stored(miss.b, &why), 1);
    EXPECT_EQ(why, nullptr);
    ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &hit.b), KJIT_OK);
    EXPECT_EQ(kjit_binary_stored(hit.b, &why), 1);
  }
  {
    Compiler none;  // no cache
    Binary b;
    ASSERT_EQ(kjit_compile(none.c, kSaxpySource, o.o, &b.b), KJIT_OK);
    EXPECT_EQ(kjit_binary_stored(b.b, &why), 0);
    ASSERT_NE(why, nullptr);
    EXPECT_STREQ(why, "the compiler has no cache");
  }
  kjit_cache_close(cache);
  co.read_only = 1;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
  {
    Compiler c(cache);
    Binary b;
    const std::string src = std::string(kSaxpySource) + "// read-only\n";
    ASSERT_EQ(kjit_compile(c.c, src.c_str(), o.o, &b.b), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_binary_stored(b.b, &why), 0);
    ASSERT_NE(why, nullptr);
    EXPECT_STREQ(why, "the cache is read-only");
  }
  kjit_cache_close(cache);
}

// kjit_compute_key_cached(): a program that reads no file has its key at once (a comment
// that says "include" reads nothing); one that reads a file has it once a compile into the
// cache recorded what NVRTC read, and it is kjit_binary_key()'s; never by compiling.
TEST(ComputeKeyCached, KnownWithoutCompiling) {
  kjit::test::TempDir dir;
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
  Options o("sm_80");
  char key[65];
  int known = -1;
  const std::string commented =
      std::string("// this kernel does not include anything\n") + kSaxpySource;
  ASSERT_EQ(kjit_compute_key_cached(nullptr, commented.c_str(), o.o, key, &known), KJIT_OK);
  EXPECT_EQ(known, 1);
  char plain[65];
  ASSERT_EQ(kjit_compute_key(commented.c_str(), o.o, plain), KJIT_OK);
  EXPECT_STREQ(key, plain);

  {
    std::FILE* f = std::fopen(dir.file("v.h").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#define V 4\n", f);
    std::fclose(f);
  }
  const std::string reads = "#include \"" + dir.file("v.h") +
                            "\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n";
  ASSERT_EQ(kjit_compute_key_cached(cache, reads.c_str(), o.o, key, &known), KJIT_OK);
  EXPECT_EQ(known, 0);
  EXPECT_STREQ(key, "");
  kjit_cache_stats st = KJIT_CACHE_STATS_INIT;
  ASSERT_EQ(kjit_cache_stats_get(cache, &st), KJIT_OK);
  EXPECT_EQ(st.compiles, 0u) << "kjit_compute_key_cached compiled";
  Compiler c(cache);
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, reads.c_str(), o.o, &b.b), KJIT_OK) << kjit_last_error();
  ASSERT_EQ(kjit_compute_key_cached(cache, reads.c_str(), o.o, key, &known), KJIT_OK);
  EXPECT_EQ(known, 1);
  EXPECT_STREQ(key, kjit_binary_key(b.b));
  EXPECT_EQ(kjit_compute_key_cached(cache, nullptr, o.o, key, &known),
            KJIT_ERROR_INVALID_ARGUMENT);
  kjit_cache_close(cache);
}

// ---- versions, statuses, hashes -------------------------------------------------------

TEST(Version, LibraryAndNvrtc) {
  EXPECT_EQ(kjit_version(), KJIT_VERSION);
  EXPECT_STREQ(kjit_version_string(), "0.3.0");
  const char* v = nullptr;
  ASSERT_EQ(kjit_nvrtc_version(&v), KJIT_OK);
  EXPECT_TRUE(std::regex_search(v, std::regex("^nvrtc [0-9]+\\.[0-9]+\\.[0-9]+ CL-[0-9]+$"))) << v;
  EXPECT_EQ(kjit_nvrtc_version(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
}

TEST(Status, StringsAreDistinct) {
  std::set<std::string> seen;
  for (int s : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                22, 23, 24, 99}) {
    const std::string text = kjit_status_string(s);
    EXPECT_EQ(text.rfind("KJIT_", 0), 0u) << s;
    EXPECT_TRUE(seen.insert(text).second) << text;
  }
  EXPECT_STREQ(kjit_status_string(12345), "unknown kjit status");
}

TEST(Hash, SourceIsSha256) {
  char hex[65];
  ASSERT_EQ(kjit_hash_source("abc", 3, hex), KJIT_OK);
  EXPECT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ASSERT_EQ(kjit_hash_source("", 0, hex), KJIT_OK);
  EXPECT_STREQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Hash, OptionsAreOrderSensitiveAndLengthPrefixed) {
  auto h = [](std::vector<const char*> v) {
    char hex[65];
    EXPECT_EQ(kjit_hash_options(v.data(), v.size(), hex), KJIT_OK);
    return std::string(hex);
  };
  EXPECT_EQ(h({"-O3", "-DX=1"}), h({"-O3", "-DX=1"}));
  EXPECT_NE(h({"a", "b"}), h({"b", "a"}));
  EXPECT_NE(h({"ab", "c"}), h({"a", "bc"}));
  EXPECT_NE(h({"abc"}), h({"ab", "c"}));
  EXPECT_NE(h({}), h({""}));
}

TEST(Hash, ComputeKeyMatchesCompile) {
  Compiler c;
  Options o("sm_90");
  Binary b;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b.b), KJIT_OK);
  char key[65];
  ASSERT_EQ(kjit_compute_key(kSaxpySource, o.o, key), KJIT_OK);
  EXPECT_STREQ(key, kjit_binary_key(b.b));
  Options other("sm_80");
  char key2[65];
  ASSERT_EQ(kjit_compute_key(kSaxpySource, other.o, key2), KJIT_OK);
  EXPECT_STRNE(key, key2);
}

TEST(Options, NormalisedSpellingsHashTheSame) {
  Options a("sm_90"), b("sm_90");
  ASSERT_EQ(kjit_options_add(a.o, "--define-macro=N=4"), KJIT_OK);
  ASSERT_EQ(kjit_options_add(b.o, " -DN=4 "), KJIT_OK);
  char ka[65], kb[65];
  ASSERT_EQ(kjit_compute_key(kSaxpySource, a.o, ka), KJIT_OK);
  ASSERT_EQ(kjit_compute_key(kSaxpySource, b.o, kb), KJIT_OK);
  EXPECT_STREQ(ka, kb);
  // Cloned options give the same key; changing the clone does not change the original.
  kjit_options* clone = nullptr;
  ASSERT_EQ(kjit_options_clone(a.o, &clone), KJIT_OK);
  char kc[65];
  ASSERT_EQ(kjit_compute_key(kSaxpySource, clone, kc), KJIT_OK);
  EXPECT_STREQ(ka, kc);
  ASSERT_EQ(kjit_options_add(clone, "-DM=1"), KJIT_OK);
  ASSERT_EQ(kjit_compute_key(kSaxpySource, clone, kc), KJIT_OK);
  EXPECT_STRNE(ka, kc);
  kjit_options_destroy(clone);
}

TEST(BadInput, TargetsThatDoNotExist) {
  Compiler c;
  kjit_binary* b = nullptr;
  // Family targets start at sm_100, architecture-specific ones at sm_90.
  for (const char* t : {"sm_90f", "compute_90f", "sm_80a"}) {
    Options o(t);
    EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_UNSUPPORTED_TARGET) << t;
    EXPECT_NE(std::string(kjit_last_error()).find(t), std::string::npos) << kjit_last_error();
  }
  Options ok("sm_90a");
  Binary bin;
  EXPECT_EQ(kjit_compile(c.c, kSaxpySource, ok.o, &bin.b), KJIT_OK) << kjit_last_error();
}

TEST(BadInput, OptionTextMustBeOneLineOfUtf8) {
  Compiler c;
  kjit_binary* b = nullptr;
  for (const char* bad : {"-DA=1\n-DB=2", "-DA=1\rB", "-DA=\xff", "-I\xc0\xaf"}) {
    Options o;
    ASSERT_EQ(kjit_options_add(o.o, bad), KJIT_OK);
    EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_INVALID_OPTION) << bad;
    char key[65];
    EXPECT_EQ(kjit_compute_key(kSaxpySource, o.o, key), KJIT_ERROR_INVALID_OPTION) << bad;
  }
}

TEST(BadInput, NamesAndHeadersMustBeUtf8) {
  Compiler c;
  kjit_binary* b = nullptr;
  {
    Options o;
    ASSERT_EQ(kjit_options_set_name(o.o, "k\xff.cu"), KJIT_OK);
    EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kjit_last_error()).find("program name"), std::string::npos);
  }
  {
    Options o;
    ASSERT_EQ(kjit_options_add_header(o.o, "h\xfe.h", "#define X 1\n"), KJIT_OK);
    EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_INVALID_ARGUMENT);
  }
  {
    Options o;
    ASSERT_EQ(kjit_options_add_header(o.o, "h.h", "#define X \"\xed\xa0\x80\"\n"), KJIT_OK);
    EXPECT_EQ(kjit_compile(c.c, kSaxpySource, o.o, &b), KJIT_ERROR_INVALID_SOURCE);
    EXPECT_NE(std::string(kjit_last_error()).find("h.h"), std::string::npos);
  }
}

TEST(Options, TwoArgumentFormsAreFoldedAndScanned) {
  // NVRTC takes these values as the next argument; each spelling gives one key.
  const std::vector<std::vector<const char*>> same = {
      {"-I/tmp/kjit-no-such-dir"}, {"-I", "/tmp/kjit-no-such-dir"},
      {"--include-path", "/tmp/kjit-no-such-dir"}, {"--include-path=/tmp/kjit-no-such-dir"},
      {"-I=/tmp/kjit-no-such-dir"}, {"-I /tmp/kjit-no-such-dir"}};
  std::string first;
  for (const auto& args : same) {
    Options o;
    for (const char* a : args) ASSERT_EQ(kjit_options_add(o.o, a), KJIT_OK);
    char key[65];
    ASSERT_EQ(kjit_compute_key(kSaxpySource, o.o, key), KJIT_OK) << args[0];
    if (first.empty()) first = key;
    EXPECT_EQ(first, key) << args[0];
  }
  Options dangling;
  ASSERT_EQ(kjit_options_add(dangling.o, "--pre-include"), KJIT_OK);
  char key[65];
  EXPECT_EQ(kjit_compute_key(kSaxpySource, dangling.o, key), KJIT_ERROR_INVALID_OPTION);
  // Two-argument -arch works like -arch=.
  Compiler c;
  Options arch("auto");
  ASSERT_EQ(kjit_options_add(arch.o, "-arch"), KJIT_OK);
  ASSERT_EQ(kjit_options_add(arch.o, "sm_80"), KJIT_OK);
  Binary bin;
  ASSERT_EQ(kjit_compile(c.c, kSaxpySource, arch.o, &bin.b), KJIT_OK) << kjit_last_error();
  EXPECT_STREQ(kjit_binary_target(bin.b), "sm_80");
}

}  // namespace
