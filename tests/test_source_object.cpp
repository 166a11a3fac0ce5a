// Source objects (kjit_source): a source handed over once, checked once, and found again by
// the object on later requests, with every include file still checked on every hit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "key/include_scan.h"
#include "key/key.h"
#include "key/key_memo.h"
#include "kjit/kjit.h"
#include "support/test_support.h"

namespace {

using kjit::test::TempDir;
using kjit::test::write_file;

const char* kSaxpy =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

// A cache, a compiler and options (target sm_90) for one test.
struct Fixture {
  TempDir dir;
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  kjit_options* opts = nullptr;

  Fixture() {
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    const std::string d = dir.file("cache");
    co.directory = d.c_str();
    EXPECT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_compiler_create(cache, 1, &compiler), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_options_create(&opts), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(opts, "sm_90"), KJIT_OK);
  }
  ~Fixture() {
    kjit_options_destroy(opts);
    kjit_compiler_destroy(compiler);
    kjit_cache_close(cache);
  }
};

struct Result {
  kjit_status status = KJIT_OK;
  std::string ptx, key;
  int tier = -1;
};

Result take(kjit_status s, kjit_binary* b) {
  Result r;
  r.status = s;
  if (!b) return r;
  size_t n = 0;
  const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
  if (p) r.ptx.assign(static_cast<const char*>(p), n);
  if (const char* k = kjit_binary_key(b)) r.key = k;
  r.tier = kjit_binary_tier(b);
  kjit_binary_destroy(b);
  return r;
}

Result compile_object(Fixture& s, const kjit_source* src, const kjit_options* o = nullptr) {
  kjit_binary* b = nullptr;
  const kjit_status st = kjit_compile_source(s.compiler, src, o ? o : s.opts, &b);
  return take(st, b);
}

Result compile_text(Fixture& s, const std::string& text) {
  kjit_binary* b = nullptr;
  const kjit_status st = kjit_compile(s.compiler, text.c_str(), s.opts, &b);
  return take(st, b);
}

TEST(SourceObject, BadInputGetsAStatusAndNoObject) {
  kjit_source* src = nullptr;
  EXPECT_EQ(kjit_source_create(kSaxpy, KJIT_SOURCE_NUL_TERMINATED, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_source_create(nullptr, 3, &src), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_source_create("", KJIT_SOURCE_NUL_TERMINATED, &src), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_EQ(kjit_source_create("abc", 0, &src), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_EQ(kjit_source_create("ab\0cd", 5, &src), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_NE(std::string(kjit_last_error()).find("NUL byte"), std::string::npos)
      << kjit_last_error();
  EXPECT_EQ(kjit_source_create("a\xff", 2, &src), KJIT_ERROR_INVALID_SOURCE);
  EXPECT_EQ(src, nullptr);
  kjit_source_destroy(nullptr);  // a no-op

  Fixture s;
  kjit_binary* b = reinterpret_cast<kjit_binary*>(1);
  EXPECT_EQ(kjit_compile_source(s.compiler, nullptr, s.opts, &b), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(b, nullptr);
  // Another kind of handle is not a source object.
  EXPECT_EQ(
      kjit_compile_source(s.compiler, reinterpret_cast<const kjit_source*>(s.opts), s.opts, &b),
      KJIT_ERROR_INVALID_HANDLE);
  ASSERT_EQ(kjit_source_create(kSaxpy, KJIT_SOURCE_NUL_TERMINATED, &src), KJIT_OK);
  EXPECT_EQ(kjit_compile_source(nullptr, src, s.opts, &b), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_compile_source(s.compiler, src, s.opts, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_source_destroy(src);
}

TEST(SourceObject, SameResultAsTheTextAndFoundAgainByTheObject) {
  Fixture s;
  kjit_source* src = nullptr;
  // An explicit size: the bytes after it are not part of the source.
  const std::string padded = std::string(kSaxpy) + "#error not part of the source\n";
  ASSERT_EQ(kjit_source_create(padded.c_str(), std::strlen(kSaxpy), &src), KJIT_OK);
  const Result first = compile_object(s, src);
  ASSERT_EQ(first.status, KJIT_OK) << kjit_last_error();
  EXPECT_EQ(first.tier, KJIT_TIER_COMPILED);
  for (int i = 0; i < 3; ++i) {
    const Result again = compile_object(s, src);
    EXPECT_EQ(again.tier, KJIT_TIER_MEMORY);
    EXPECT_EQ(again.key, first.key);
    EXPECT_EQ(again.ptx, first.ptx);
  }
  // The text through kjit_compile is the same request, and a second object of the same text
  // finds it too.
  const Result text = compile_text(s, kSaxpy);
  EXPECT_EQ(text.key, first.key);
  EXPECT_EQ(text.tier, KJIT_TIER_MEMORY);
  kjit_source* twin = nullptr;
  ASSERT_EQ(kjit_source_create(kSaxpy, KJIT_SOURCE_NUL_TERMINATED, &twin), KJIT_OK);
  EXPECT_EQ(compile_object(s, twin).key, first.key);
  // Other options are another request.
  kjit_options* other = nullptr;
  ASSERT_EQ(kjit_options_clone(s.opts, &other), KJIT_OK);
  ASSERT_EQ(kjit_options_add(other, "-DOTHER=1"), KJIT_OK);
  const Result o1 = compile_object(s, src, other);
  EXPECT_NE(o1.key, first.key);
  EXPECT_EQ(o1.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(compile_object(s, src, other).tier, KJIT_TIER_MEMORY);
  EXPECT_EQ(compile_object(s, src).key, first.key);
  kjit_options_destroy(other);
  kjit_source_destroy(twin);
  kjit_source_destroy(src);
  // A compile error is reported as by kjit_compile, with the log.
  ASSERT_EQ(kjit_source_create("__global__ void k() { undeclared(); }\n",
                               KJIT_SOURCE_NUL_TERMINATED, &src),
            KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_compile_source(s.compiler, src, s.opts, &b), KJIT_ERROR_COMPILE);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(std::string(kjit_binary_log(b)).find("undeclared"), std::string::npos);
  kjit_binary_destroy(b);
  kjit_source_destroy(src);
}

// Every include file is still checked on every hit: an edit is a miss with the new code.
TEST(SourceObject, AnEditedHeaderIsNeverAStaleHit) {
  Fixture s;
  const std::string inc = s.dir.file("inc");
  ASSERT_EQ(std::system(("mkdir -p " + inc).c_str()), 0);
  write_file(inc + "/value.h", "#pragma once\n__device__ int value = 1;\n");
  // Only files that settled (kRacySeconds) are trusted by their stamps.
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  ASSERT_EQ(kjit_options_add(s.opts, ("-I" + inc).c_str()), KJIT_OK);
  kjit_source* src = nullptr;
  ASSERT_EQ(kjit_source_create("#include \"value.h\"\n__global__ void k(int* p) { *p = value; }\n",
                               KJIT_SOURCE_NUL_TERMINATED, &src),
            KJIT_OK);
  const Result first = compile_object(s, src);
  ASSERT_EQ(first.status, KJIT_OK) << kjit_last_error();
  EXPECT_EQ(compile_object(s, src).tier, KJIT_TIER_MEMORY);
  for (int v = 2; v <= 4; ++v) {
    write_file(inc + "/value.h", "#pragma once\n__device__ int value = " + std::to_string(v) +
                                     ";\n" + std::string(size_t(v), ' '));
    const Result now = compile_object(s, src);
    EXPECT_EQ(now.tier, KJIT_TIER_COMPILED) << "value " << v;
    EXPECT_NE(now.ptx.find(std::to_string(v)), std::string::npos) << now.ptx;
    EXPECT_EQ(compile_object(s, src).ptx, now.ptx);
  }
  kjit_source_destroy(src);
}

// A large source is found by its object in the memory tier, from several threads at once.
TEST(SourceObject, LargeSourceFromManyThreads) {
  Fixture s;
  std::string text = kSaxpy;
  while (text.size() < 64000) text += "// padding line of the kind a generated source has\n";
  kjit_source* src = nullptr;
  ASSERT_EQ(kjit_source_create(text.c_str(), text.size(), &src), KJIT_OK);
  const Result first = compile_object(s, src);
  ASSERT_EQ(first.status, KJIT_OK) << kjit_last_error();
  std::vector<std::thread> threads;
  std::atomic<int> memory_hits{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        const Result r = compile_object(s, src);
        if (r.tier == KJIT_TIER_MEMORY && r.key == first.key) ++memory_hits;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(memory_hits.load(), 200);
  kjit_source_destroy(src);
}

// The memo's own rule: an object's key is found only after it was filed under the object,
// and never once a path its scan looked at changed.
TEST(SourceObject, MemoFilesKeysUnderTheObjectAndChecksTheirStamps) {
  TempDir d;
  ASSERT_EQ(std::system(("mkdir -p " + d.file("inc")).c_str()), 0);
  write_file(d.file("inc/h.h"), "#define H 1\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  kjit::CompileOptions o;
  o.target = "sm_90";
  o.toolkit_headers = false;
  o.raw = {"-I" + d.file("inc")};
  const kjit::SourceObject src("#include \"h.h\"\n__global__ void k() {}\n");
  kjit::KeyMemo memo;
  std::string key;
  EXPECT_FALSE(memo.find_object(src.id(), o, &key));
  memo.remember_object(src.id(), src.text(), o);  // nothing remembered for the text: nothing
  EXPECT_FALSE(memo.find_object(src.id(), o, &key));
  const kjit::IncludeScan scan =
      kjit::scan_for(src.text(), o, kjit::normalise(o, kjit::machine_facts(o, true)));
  ASSERT_TRUE(scan.rememberable());
  memo.remember(src.text(), o, "the key", scan);
  memo.remember_object(src.id(), src.text(), o);
  ASSERT_TRUE(memo.find_object(src.id(), o, &key));
  EXPECT_EQ(key, "the key");
  const kjit::SourceObject other(src.text());
  EXPECT_NE(other.id(), src.id());
  EXPECT_FALSE(memo.find_object(other.id(), o, &key)) << "filed under another object";
  kjit::CompileOptions o2 = o;
  o2.raw.push_back("-DX=1");
  EXPECT_FALSE(memo.find_object(src.id(), o2, &key)) << "other options";
  write_file(d.file("inc/h.h"), "#define H 22\n");
  EXPECT_FALSE(memo.find_object(src.id(), o, &key)) << "a header changed";
  EXPECT_THROW(kjit::SourceObject(""), kjit::Error);
}

}  // namespace
