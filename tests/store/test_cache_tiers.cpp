// The persistent cache through the public C API: round trips through the tiers, and what a
// key covers (inputs, headers on disk and in memory, lowered names).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "support/cache_api.h"
#include "support/test_support.h"

namespace {

using namespace kjit::test::capi;

TEST(Cache, RoundTripAndTiers) {
  TempDir dir;
  Cache cache(dir.path());
  Result first = compile(cache.c, kSaxpySource);
  ASSERT_EQ(first.status, KJIT_OK);
  EXPECT_EQ(first.tier, KJIT_TIER_COMPILED);
  Result second = compile(cache.c, kSaxpySource);
  EXPECT_EQ(second.tier, KJIT_TIER_MEMORY);
  EXPECT_EQ(second.ptx, first.ptx);
  EXPECT_EQ(second.cubin, first.cubin);
  ASSERT_EQ(kjit_cache_clear_memory(cache.c), KJIT_OK);
  Result third = compile(cache.c, kSaxpySource);
  EXPECT_EQ(third.tier, KJIT_TIER_DISK) << "clearing memory keeps the disk";
  EXPECT_EQ(third.cubin, first.cubin);
  kjit_cache_stats s = cache.stats();
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.disk_entries, 1u);
  EXPECT_GT(s.disk_bytes, first.cubin.size());
  EXPECT_GT(s.compile_ms_saved, 0.0);
  EXPECT_EQ(s.disk_state, KJIT_DISK_OK);
  EXPECT_STREQ(kjit_cache_directory(cache.c), dir.path().c_str());
}

TEST(Cache, PersistsAcrossHandles) {
  TempDir dir;
  std::string ptx;
  {
    Cache cache(dir.path());
    ptx = compile(cache.c, kSaxpySource).ptx;
  }
  Cache again(dir.path());
  Result r = compile(again.c, kSaxpySource);
  EXPECT_EQ(r.tier, KJIT_TIER_DISK);
  EXPECT_EQ(r.ptx, ptx);
  EXPECT_EQ(again.stats().compiles, 0u);
}

TEST(Cache, DirectoryIsPrivate) {
  TempDir dir;
  const std::string sub = dir.file("a/b/cache");
  Cache cache(sub);
  struct stat st;
  ASSERT_EQ(stat(sub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(Cache, DistinctInputsGiveDistinctEntries) {
  TempDir dir;
  Cache cache(dir.path());
  std::set<std::string> keys;
  keys.insert(compile(cache.c, kSaxpySource, "sm_90").key);
  keys.insert(compile(cache.c, kSaxpySource, "sm_80").key);
  keys.insert(compile(cache.c, kSaxpySource, "sm_90", {"-DX=1"}).key);
  keys.insert(compile(cache.c, kSaxpySource, "sm_90", {"-DX=2"}).key);
  keys.insert(compile(cache.c, kSaxpySource, "sm_90", {"-DX=1", "-DY=1"}).key);
  keys.insert(compile(cache.c, kSaxpySource, "sm_90", {"-DY=1", "-DX=1"}).key);
  keys.insert(compile(cache.c, std::string(kSaxpySource) + "\n// changed\n").key);
  keys.insert(compile(cache.c, kSaxpySource, "compute_90").key);
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_EQ(cache.stats().disk_entries, 8u);
  // Same source, different target: separate entries with different code.
  Result a = compile(cache.c, kSaxpySource, "sm_80"), b = compile(cache.c, kSaxpySource, "sm_90");
  EXPECT_NE(a.cubin, b.cubin);
}

TEST(Cache, EditingAnIncludedHeaderOnDiskIsAMiss) {
  TempDir dir, inc;
  kjit::test::write_file(inc.file("params.h"), "#include \"nested.h\"\n");
  kjit::test::write_file(inc.file("nested.h"), "#define VALUE 111\n");
  const std::string src =
      "#include <params.h>\nextern \"C\" __global__ void f(int* p) { *p = VALUE; }\n";
  Cache cache(dir.path());
  Result a = compile(cache.c, src, "sm_90", {"-I" + inc.path()});
  ASSERT_EQ(a.status, KJIT_OK) << kjit_last_error();
  EXPECT_NE(a.ptx.find("111"), std::string::npos);
  EXPECT_EQ(compile(cache.c, src, "sm_90", {"-I" + inc.path()}).tier, KJIT_TIER_MEMORY);
  kjit::test::write_file(inc.file("nested.h"), "#define VALUE 222\n");  // two levels down
  Result b = compile(cache.c, src, "sm_90", {"-I" + inc.path()});
  EXPECT_EQ(b.tier, KJIT_TIER_COMPILED);
  EXPECT_NE(b.key, a.key);
  EXPECT_NE(b.ptx.find("222"), std::string::npos);
}

TEST(Cache, HeaderNextToTheProgramIsHashed) {
  TempDir dir, src_dir;
  kjit::test::write_file(src_dir.file("local.h"), "#define LOCAL 31\n");
  const std::string src =
      "#include \"local.h\"\nextern \"C\" __global__ void f(int* p) { *p = LOCAL; }\n";
  const std::string name = src_dir.file("prog.cu");
  Cache cache(dir.path());
  Result a = compile(cache.c, src, "sm_90", {}, {}, {}, name);
  ASSERT_EQ(a.status, KJIT_OK) << kjit_last_error();
  kjit::test::write_file(src_dir.file("local.h"), "#define LOCAL 32\n");
  Result b = compile(cache.c, src, "sm_90", {}, {}, {}, name);
  EXPECT_EQ(b.tier, KJIT_TIER_COMPILED);
  EXPECT_NE(b.ptx.find("32"), std::string::npos);
}

TEST(Cache, ChangingAnInMemoryHeaderIsAMiss) {
  TempDir dir;
  Cache cache(dir.path());
  const std::string src = "#include \"v.h\"\nextern \"C\" __global__ void f(int* p) { *p = V; }\n";
  Result a = compile(cache.c, src, "sm_90", {}, {{"v.h", "#define V 5\n"}});
  Result b = compile(cache.c, src, "sm_90", {}, {{"v.h", "#define V 6\n"}});
  Result c = compile(cache.c, src, "sm_90", {}, {{"v.h", "#define V 5\n"}});
  EXPECT_EQ(a.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(b.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(c.tier, KJIT_TIER_MEMORY);
  EXPECT_NE(a.key, b.key);
}

TEST(Cache, LoweredNamesSurviveTheDiskTier) {
  TempDir dir;
  const char* src = "template <typename T> __global__ void k(T* p) { p[0] = T(1); }\n";
  std::vector<std::string> exprs = {"k<size_t>", "k<unsigned long>", "k<float>"};
  Result a;
  {
    Cache cache(dir.path());
    a = compile(cache.c, src, "sm_90", {}, {}, exprs);
    ASSERT_EQ(a.status, KJIT_OK) << kjit_last_error();
  }
  Cache cache(dir.path());
  Result b = compile(cache.c, src, "sm_90", {}, {}, exprs);
  EXPECT_EQ(b.tier, KJIT_TIER_DISK);
  ASSERT_EQ(b.names.size(), 3u);
  EXPECT_EQ(b.names, a.names);
  EXPECT_EQ(b.names[0].first, "k<size_t>");
  EXPECT_EQ(b.names[1].first, "k<unsigned long>");
  EXPECT_EQ(b.names[0].second, b.names[1].second) << "size_t is unsigned long here";
  EXPECT_NE(b.names[0].second, b.names[2].second);
  EXPECT_NE(b.ptx.find(b.names[2].second), std::string::npos);
}

}  // namespace
