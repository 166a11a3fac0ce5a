// The persistent cache through the public C API (and, for fault injection, the store).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/entry.h"
#include "store/export.h"
#include "store/fact_files.h"
#include "store/index_db.h"
#include "support/db.h"
#include "support/entry_file_edit.h"
#include "support/old_database.h"
#include "support/test_support.h"
#include "util/checksum.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::test::entry_file_path;
using kjit::test::kSaxpySource;
using kjit::test::kTemplateSource;
using kjit::test::RawEntry;
using kjit::test::read_file_or_die;
using kjit::test::read_raw_entry;
using kjit::test::TempDir;
using kjit::test::write_file;
using kjit::test::write_raw_entry;

off_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

struct Cache {
  kjit_cache* c = nullptr;
  explicit Cache(const std::string& dir, bool read_only = false, uint64_t max_bytes = 0) {
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    o.directory = dir.c_str();
    o.read_only = read_only;
    o.max_size_bytes = max_bytes;
    EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_OK) << kjit_last_error();
  }
  ~Cache() { kjit_cache_close(c); }
  kjit_cache_stats stats() const {
    kjit_cache_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(kjit_cache_stats_get(c, &s), KJIT_OK);
    return s;
  }
};

struct Result {
  kjit_status status = KJIT_ERROR_INTERNAL;
  int tier = -1;
  std::string ptx, cubin, key, log;
  std::vector<std::pair<std::string, std::string>> names;
};

Result compile(kjit_cache* cache, const std::string& source, const char* target = "sm_90",
               std::vector<std::string> options = {},
               std::vector<std::pair<std::string, std::string>> headers = {},
               std::vector<std::string> exprs = {}, const std::string& name = "") {
  kjit_compiler* c = nullptr;
  EXPECT_EQ(kjit_compiler_create(cache, 1, &c), KJIT_OK);
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, target);
  if (!name.empty()) kjit_options_set_name(o, name.c_str());
  for (const auto& opt : options) kjit_options_add(o, opt.c_str());
  for (const auto& [n, body] : headers) kjit_options_add_header(o, n.c_str(), body.c_str());
  for (const auto& e : exprs) kjit_options_add_name_expression(o, e.c_str());
  kjit_binary* b = nullptr;
  Result r;
  r.status = kjit_compile(c, source.c_str(), o, &b);
  if (b) {
    size_t n = 0;
    const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
    if (p) r.ptx.assign(static_cast<const char*>(p), n);
    p = kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &n);
    if (p) r.cubin.assign(static_cast<const char*>(p), n);
    r.tier = kjit_binary_tier(b);
    r.key = kjit_binary_key(b);
    r.log = kjit_binary_log(b);
    for (size_t i = 0; i < kjit_binary_name_count(b); ++i) {
      r.names.emplace_back(kjit_binary_name_expression(b, i), kjit_binary_lowered_name_at(b, i));
    }
  }
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  return r;
}

std::string db_path(const TempDir& d) {
  return d.file("kjit.db");
}

using kjit::test::LogCapture;

// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// Runs `statement` on `db` (created if needed) with plain SQLite.
void sql(const std::string& db, const std::string& statement) {
  kjit::test::Db d(db, /*create=*/true);
  ASSERT_TRUE(d.exec(statement)) << (d.h ? sqlite3_errmsg(d.h) : "cannot open") << ": "
                                 << statement;
}

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

TEST(Cache, EntryFromAnotherFormatVersionIsRejected) {
  // The metadata rewritten as if an incompatible format had written it (with a matching
  // checksum, so only the version check can catch it).
  TempDir dir;
  Result a;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kSaxpySource);
  }
  {
    RawEntry r = read_raw_entry(dir.path(), a.key);
    ASSERT_EQ(r.layout, 2u) << "kjit writes layout 2";
    std::string& meta = r.parts[0];
    ASSERT_EQ(meta[0], char(kjit::kCacheFormatVersion));
    meta[0] = char(99);
    write_raw_entry(dir.path(), r);
  }
  Cache cache(dir.path());
  Result b = compile(cache.c, kSaxpySource);
  EXPECT_EQ(b.tier, KJIT_TIER_COMPILED) << "an entry of another format is never used";
  EXPECT_EQ(b.ptx, a.ptx);
  EXPECT_EQ(cache.stats().corrupt_entries, 1u);
}

TEST(Cache, PayloadFileOfLayoutOneIsAMissAndReplaced) {
  // A payload file as development builds before 0.2.0 wrote it (layout 1: metadata as
  // JSON), otherwise sound, is never read: a miss, compiled again and stored in layout 2.
  TempDir dir;
  Result a;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"});
  }
  ASSERT_EQ(a.names.size(), 1u);
  RawEntry r = read_raw_entry(dir.path(), a.key);
  kjit::test::to_json_layout(&r);
  ASSERT_EQ(r.parts[0].front(), '{');
  write_raw_entry(dir.path(), r);
  {
    Cache cache(dir.path());
    Result b = compile(cache.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"});
    EXPECT_EQ(b.tier, KJIT_TIER_COMPILED);
    EXPECT_EQ(b.ptx, a.ptx);
    EXPECT_EQ(b.names, a.names);
  }
  EXPECT_EQ(read_raw_entry(dir.path(), a.key).layout, 2u);
  Cache cache(dir.path());
  EXPECT_EQ(compile(cache.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"}).tier,
            KJIT_TIER_DISK);
}

TEST(Cache, GarbledOrTruncatedBlobIsRecompiled) {
  TempDir dir;
  Result a;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kSaxpySource);
  }
  const std::string file = entry_file_path(dir.path(), a.key);
  const RawEntry sound = read_raw_entry(dir.path(), a.key);
  const std::vector<std::pair<const char*, std::function<void()>>> damages = {
      {"file cut in half", [&] { ASSERT_EQ(truncate(file.c_str(), file_size(file) / 2), 0); }},
      {"PTX garbled",
       [&] {
         std::string bytes = read_file_or_die(file);
         bytes.replace(176 + sound.parts[0].size(), 4, std::string("\x00\x11\x22\x33", 4));
         write_file(file, bytes);
       }},
      {"CUBIN missing (checksums made to match)",
       [&] {
         RawEntry r = sound;
         r.parts[2].clear();
         write_raw_entry(dir.path(), r);
       }},
      {"metadata not JSON (checksum made to match)",
       [&] {
         RawEntry r = sound;
         r.parts[0] = "{not json";
         write_raw_entry(dir.path(), r);
       }},
      {"header only", [&] { ASSERT_EQ(truncate(file.c_str(), 176), 0); }},
      {"empty file", [&] { write_file(file, ""); }},
  };
  for (const auto& [damage, apply] : damages) {
    apply();
    Cache cache(dir.path());
    Result b = compile(cache.c, kSaxpySource);
    EXPECT_EQ(b.status, KJIT_OK) << damage;
    EXPECT_EQ(b.tier, KJIT_TIER_COMPILED) << damage;
    EXPECT_EQ(b.cubin, a.cubin) << damage;
    EXPECT_EQ(b.ptx, a.ptx) << damage;
    EXPECT_EQ(cache.stats().corrupt_entries, 1u) << damage;
    // The recompiled entry replaced the bad one.
    Cache again(dir.path());
    EXPECT_EQ(compile(again.c, kSaxpySource).tier, KJIT_TIER_DISK) << damage;
  }
}

// Swaps the payload files of two entries: each file stays as written (its header names the
// key it was written for, its checksums are bound to it), only the name it is filed under
// changes.
void swap_files(const TempDir& dir, const std::string& a, const std::string& b) {
  const std::string fa = entry_file_path(dir.path(), a), fb = entry_file_path(dir.path(), b);
  ASSERT_EQ(std::rename(fa.c_str(), (fa + ".swap").c_str()), 0);
  ASSERT_EQ(std::rename(fb.c_str(), fa.c_str()), 0);
  ASSERT_EQ(std::rename((fa + ".swap").c_str(), fb.c_str()), 0);
}

// The same with the header's key rewritten too: only the checksums can tell.
void swap_files_and_keys(const TempDir& dir, const std::string& a, const std::string& b) {
  RawEntry ra = read_raw_entry(dir.path(), a), rb = read_raw_entry(dir.path(), b);
  ra.sum_key = a;
  rb.sum_key = b;
  std::swap(ra.key, rb.key);
  write_raw_entry(dir.path(), ra);
  write_raw_entry(dir.path(), rb);
}

TEST(Cache, EntriesWithSwappedKeysAreNeverServed) {
  TempDir dir;
  Result a, b;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kSaxpySource);
    b = compile(cache.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"});
    ASSERT_EQ(a.status, KJIT_OK);
    ASSERT_EQ(b.status, KJIT_OK);
    ASSERT_NE(a.cubin, b.cubin);
  }
  swap_files(dir, a.key, b.key);
  Cache cache(dir.path());
  // Raw lookups: corrupt (and removed), never the other kernel's bytes.
  for (const Result* r : {&a, &b}) {
    kjit_binary* bin = nullptr;
    const kjit_status st = kjit_cache_get(cache.c, r->key.c_str(), &bin);
    if (st == KJIT_OK) {
      size_t n = 0;
      const void* p = kjit_binary_data(bin, KJIT_OUTPUT_CUBIN, &n);
      const bool own = std::string(static_cast<const char*>(p), n) == r->cubin;
      ADD_FAILURE() << "swapped entry served; it holds " << (own ? "its own" : "another kernel's")
                    << " CUBIN";
      kjit_binary_destroy(bin);
    } else {
      EXPECT_EQ(st, KJIT_ERROR_CACHE_CORRUPT) << kjit_last_error();
    }
  }
  EXPECT_EQ(cache.stats().corrupt_entries, 2u);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  // Compiling is a miss that stores the right code again.
  Result again = compile(cache.c, kSaxpySource);
  EXPECT_EQ(again.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(again.cubin, a.cubin);
}

TEST(Cache, VerifyCountsEntriesWithSwappedKeysAsCorrupt) {
  TempDir dir;
  Result a, b;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kSaxpySource);
    b = compile(cache.c, kSaxpySource, "sm_80");
    compile(cache.c, kSaxpySource, "sm_90", {"-DX=1"});  // left alone
  }
  swap_files_and_keys(dir, a.key, b.key);
  Cache cache(dir.path());
  uint64_t checked = 0, bad = 0;
  ASSERT_EQ(kjit_cache_verify(cache.c, &checked, &bad), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(checked, 3u);
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(cache.stats().disk_entries, 1u);
  EXPECT_EQ(compile(cache.c, kSaxpySource, "sm_80").tier, KJIT_TIER_COMPILED);
}

TEST(Cache, BlobMovedToAnotherPartIsCorrupt) {
  TempDir dir;
  Result a;
  {
    Cache cache(dir.path());
    a = compile(cache.c, kSaxpySource);
  }
  // The PTX relabelled as the CUBIN and the other way round, each with its own checksum
  // (computed as the part it was): sizes are recorded per part, so make them agree to leave
  // only the checksum to catch it.
  {
    RawEntry r = read_raw_entry(dir.path(), a.key);
    std::swap(r.parts[1], r.parts[2]);
    r.sum_as[1] = 2;
    r.sum_as[2] = 1;
    kjit::Entry e;
    e.load_metadata_binary(r.parts[0]);
    std::swap(e.ptx, e.cubin);
    e.ptx.assign(a.cubin.size(), 'x');
    e.cubin.assign(a.ptx.size(), 'x');
    r.parts[0] = e.metadata_binary();
    write_raw_entry(dir.path(), r);
  }
  Cache cache(dir.path());
  Result b = compile(cache.c, kSaxpySource);
  EXPECT_EQ(b.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(b.cubin, a.cubin);
  EXPECT_EQ(cache.stats().corrupt_entries, 1u);
}

TEST(Cache, DatabaseOfRandomBytesIsMovedAside) {
  TempDir dir;
  std::mt19937 rng(42);
  std::string junk(64 * 1024, '\0');
  for (auto& ch : junk) ch = static_cast<char>(rng());
  kjit::test::write_file(db_path(dir), junk);
  chmod(db_path(dir).c_str(), 0600);
  Cache cache(dir.path());
  EXPECT_EQ(cache.stats().disk_state, KJIT_DISK_OK);
  Result r = compile(cache.c, kSaxpySource);
  EXPECT_EQ(r.status, KJIT_OK);
  bool found_aside = false;
  FILE* p = popen(("ls " + dir.path()).c_str(), "r");
  char line[512];
  while (p && fgets(line, sizeof line, p)) {
    if (std::string(line).find("kjit.db.corrupt-") == 0) found_aside = true;
  }
  if (p) pclose(p);
  EXPECT_TRUE(found_aside);
  Cache again(dir.path());
  EXPECT_EQ(compile(again.c, kSaxpySource).tier, KJIT_TIER_DISK);
}

TEST(Cache, ForeignSqliteDatabaseIsMovedAside) {
  TempDir dir;
  sql(db_path(dir), "CREATE TABLE other(x); INSERT INTO other VALUES(1);");
  chmod(db_path(dir).c_str(), 0600);
  Cache cache(dir.path());
  EXPECT_EQ(compile(cache.c, kSaxpySource).status, KJIT_OK);
  EXPECT_EQ(cache.stats().disk_state, KJIT_DISK_OK);
}

TEST(Cache, MemoryOnlyAndDisabled) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  kjit_cache* c = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &c), KJIT_OK);
  EXPECT_EQ(compile(c, kSaxpySource).tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(compile(c, kSaxpySource).tier, KJIT_TIER_MEMORY);
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(c, &s);
  EXPECT_EQ(s.disk_state, KJIT_DISK_DISABLED);
  kjit_cache_close(c);

  TempDir dir;
  setenv("KJIT_CACHE_DISABLE", "1", 1);
  {
    Cache disabled(dir.path());
    EXPECT_EQ(disabled.stats().disk_state, KJIT_DISK_DISABLED);
  }
  unsetenv("KJIT_CACHE_DISABLE");
  struct stat st;
  EXPECT_NE(stat(db_path(dir).c_str(), &st), 0) << "no database was created";
}

TEST(Cache, DefaultLocationFromEnvironment) {
  TempDir dir;
  setenv("KJIT_CACHE_DIR", dir.file("from-env").c_str(), 1);
  kjit_cache* c = nullptr;
  ASSERT_EQ(kjit_cache_open(nullptr, &c), KJIT_OK);
  EXPECT_EQ(std::string(kjit_cache_directory(c)), dir.file("from-env"));
  kjit_cache_close(c);
  unsetenv("KJIT_CACHE_DIR");
  const char* old_xdg = getenv("XDG_CACHE_HOME");
  std::string saved = old_xdg ? old_xdg : "";
  setenv("XDG_CACHE_HOME", dir.file("xdg").c_str(), 1);
  ASSERT_EQ(kjit_cache_open(nullptr, &c), KJIT_OK);
  EXPECT_EQ(std::string(kjit_cache_directory(c)), dir.file("xdg") + "/kjit");
  kjit_cache_close(c);
  if (old_xdg)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}

TEST(Cache, UntrustedDatabaseIsNotUsed) {
  TempDir dir;
  {
    Cache cache(dir.path());
    compile(cache.c, kSaxpySource);
  }
  chmod(db_path(dir).c_str(), 0666);
  Cache cache(dir.path());
  kjit_cache_stats s = cache.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE);
  EXPECT_NE(std::string(s.message).find("writable by group or others"), std::string::npos)
      << s.message;
  Result r = compile(cache.c, kSaxpySource);
  EXPECT_EQ(r.status, KJIT_OK) << "compilation works without the disk tier";
  EXPECT_EQ(r.tier, KJIT_TIER_COMPILED);
}

// Runs `body` in a child process as an unprivileged user when we are root (root ignores
// permission bits), so that a read-only directory is really read-only.
int in_child_as_user(const std::string& dir, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0) {
      if (chown(dir.c_str(), 65534, 65534) != 0) _exit(90);
      if (system(("chown -R 65534:65534 '" + dir + "'").c_str()) != 0) _exit(91);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(92);
    }
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(Cache, ReadOnlyDirectoryStillCompilesAndHits) {
  TempDir root;
  const std::string dir = root.file("ro");
  mkdir(dir.c_str(), 0700);
  chmod(root.path().c_str(), 0755);
  const int rc = in_child_as_user(dir, [&] {
    {
      Cache cache(dir);
      if (compile(cache.c, kSaxpySource).status != KJIT_OK) return 1;
    }
    if (chmod(dir.c_str(), 0500) != 0) return 2;
    Cache cache(dir);
    kjit_cache_stats s = cache.stats();
    if (s.disk_state != KJIT_DISK_READ_ONLY && s.disk_state != KJIT_DISK_UNAVAILABLE) return 3;
    Result hit = compile(cache.c, kSaxpySource);
    if (hit.status != KJIT_OK) return 4;
    Result other = compile(cache.c, kTemplateSource, "sm_80", {}, {}, {"scale<int, 1>"});
    if (other.status != KJIT_OK) return 5;
    if (cache.stats().store_failures != 0) return 6;  // read-only: no attempted writes
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Cache, RawAccessForTools) {
  TempDir a_dir, b_dir;
  Cache a(a_dir.path()), b(b_dir.path());
  Result r = compile(a.c, kSaxpySource);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_cache_get(a.c, r.key.c_str(), &bin), KJIT_OK);
  EXPECT_EQ(kjit_cache_put(b.c, bin), KJIT_OK);
  kjit_binary_destroy(bin);
  EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_MEMORY);
  EXPECT_EQ(kjit_cache_get(a.c, "zz", &bin), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_cache_get(a.c, std::string(64, 'a').c_str(), &bin), KJIT_ERROR_NOT_FOUND);
  int rows = 0;
  ASSERT_EQ(
      kjit_cache_list(
          a.c,
          [](const kjit_cache_entry_info* i, void* u) {
            ++*static_cast<int*>(u);
            return std::string(i->target) == "sm_90" && std::string(i->kernels) == "saxpy" ? 0 : 1;
          },
          &rows),
      KJIT_OK);
  EXPECT_EQ(rows, 1);
  uint64_t checked = 0, bad = 0;
  ASSERT_EQ(kjit_cache_verify(a.c, &checked, &bad), KJIT_OK);
  EXPECT_EQ(checked, 1u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(kjit_cache_remove(a.c, r.key.c_str()), KJIT_OK);
  EXPECT_EQ(kjit_cache_remove(a.c, r.key.c_str()), KJIT_ERROR_NOT_FOUND);
  EXPECT_EQ(a.stats().disk_entries, 0u);
}

TEST(Cache, ExportImportBetweenCaches) {
  TempDir a_dir, b_dir, files;
  Cache a(a_dir.path());
  Result r1 = compile(a.c, kSaxpySource);
  Result r2 = compile(a.c, kTemplateSource, "sm_80", {}, {}, {"scale<float, 2>"});
  uint64_t count = 0;
  ASSERT_EQ(kjit_cache_export(a.c, files.file("x.kjit").c_str(), &count), KJIT_OK);
  EXPECT_EQ(count, 2u);
  Cache b(b_dir.path());
  uint64_t imported = 0, rejected = 0;
  ASSERT_EQ(kjit_cache_import(b.c, files.file("x.kjit").c_str(), &imported, &rejected), KJIT_OK);
  EXPECT_EQ(imported, 2u);
  EXPECT_EQ(rejected, 0u);
  Result h = compile(b.c, kSaxpySource);
  EXPECT_NE(h.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(h.cubin, r1.cubin);
  // A flipped byte inside the first record (header 16 bytes, length 8, then the record)
  // fails that record's checksum: it is rejected, the other one imported.
  std::string bytes = kjit::test::read_file_or_die(files.file("x.kjit"));
  bytes[16 + 8 + 20] ^= 0x55;
  kjit::test::write_file(files.file("bad.kjit"), bytes);
  TempDir c_dir;
  Cache c(c_dir.path());
  ASSERT_EQ(kjit_cache_import(c.c, files.file("bad.kjit").c_str(), &imported, &rejected), KJIT_OK);
  EXPECT_EQ(imported, 1u);
  EXPECT_EQ(rejected, 1u);
  // Truncated.
  kjit::test::write_file(files.file("trunc.kjit"), bytes.substr(0, 20));
  EXPECT_EQ(kjit_cache_import(c.c, files.file("trunc.kjit").c_str(), &imported, &rejected),
            KJIT_ERROR_CACHE_CORRUPT);
  EXPECT_EQ(kjit_cache_import(c.c, files.file("missing.kjit").c_str(), nullptr, nullptr),
            KJIT_ERROR_IO);
}

// ---- export files, edited the way someone with a hex editor and this layout would --------

uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

std::string u64_bytes(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// The frames of an export file (see store/export.h for the layout).
struct Frame {
  std::string record, signature;  // signature: "" when unsigned
};
struct ExportFile {
  std::string header;  // magic and version
  std::vector<Frame> frames;
};

ExportFile split_export(const std::string& bytes) {
  ExportFile f;
  f.header = bytes.substr(0, 16);
  size_t at = 16;
  auto fits = [&](uint64_t n) { return at <= bytes.size() && n <= bytes.size() - at; };
  for (;;) {
    if (!fits(8)) break;
    const uint64_t len = get_u64(bytes, at);
    at += 8;
    if (len == 0) break;
    if (!fits(len + 40)) break;
    Frame fr;
    fr.record = bytes.substr(at, len);
    at += len + 32;  // the record and its SHA-256
    const uint64_t sig = get_u64(bytes, at);
    at += 8;
    if (!fits(sig)) break;
    fr.signature = bytes.substr(at, sig);
    at += sig;
    f.frames.push_back(fr);
  }
  EXPECT_EQ(at, bytes.size()) << "not an export file of this layout";
  return f;
}

// Writes the frames back, each one's SHA-256 recomputed.
std::string join_export(const ExportFile& f) {
  std::string out = f.header;
  for (const Frame& fr : f.frames) {
    const kjit::Digest d = kjit::sha256(fr.record);
    out += u64_bytes(fr.record.size()) + fr.record +
           std::string(reinterpret_cast<const char*>(d.data()), 32) +
           u64_bytes(fr.signature.size()) + fr.signature;
  }
  return out + u64_bytes(0);
}

std::string record_key(const std::string& rec) {
  return rec.substr(8, 64);
}

TEST(Cache, ImportRejectsARecordRelabelledWithAnotherKey) {
  TempDir a_dir, b_dir, files;
  Cache a(a_dir.path());
  Result saxpy = compile(a.c, kSaxpySource);
  Result templ = compile(a.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"});
  ASSERT_EQ(kjit_cache_export(a.c, files.file("x.kjit").c_str(), nullptr), KJIT_OK);
  ExportFile f = split_export(kjit::test::read_file_or_die(files.file("x.kjit")));
  ASSERT_EQ(f.frames.size(), 2u);
  // Keep only the template's record, relabelled with the saxpy key.
  ExportFile forged{f.header, {}};
  for (const Frame& fr : f.frames) {
    if (record_key(fr.record) == templ.key) forged.frames.push_back(fr);
  }
  ASSERT_EQ(forged.frames.size(), 1u);
  forged.frames[0].record.replace(8, 64, saxpy.key);
  kjit::test::write_file(files.file("forged.kjit"), join_export(forged));
  Cache b(b_dir.path());
  uint64_t imported = 9, rejected = 9;
  ASSERT_EQ(kjit_cache_import(b.c, files.file("forged.kjit").c_str(), &imported, &rejected),
            KJIT_OK);
  EXPECT_EQ(imported, 0u);
  EXPECT_EQ(rejected, 1u);
  Result r = compile(b.c, kSaxpySource);
  EXPECT_EQ(r.tier, KJIT_TIER_COMPILED) << "never a hit on another kernel's code";
  EXPECT_EQ(r.cubin, saxpy.cubin);
}

TEST(Cache, ImportOfAnOlderFormatIsRefusedWithAReason) {
  TempDir a_dir, b_dir, files;
  Cache a(a_dir.path());
  compile(a.c, kSaxpySource);
  ASSERT_EQ(kjit_cache_export(a.c, files.file("x.kjit").c_str(), nullptr), KJIT_OK);
  // 1: checksums not bound to keys; 2: entries may hold a stale precompiled header's code.
  for (uint64_t version : {1, 2}) {
    std::string bytes = kjit::test::read_file_or_die(files.file("x.kjit"));
    bytes.replace(8, 8, u64_bytes(version));
    const std::string old = files.file("v" + std::to_string(version) + ".kjit");
    kjit::test::write_file(old, bytes);
    Cache b(b_dir.path());
    uint64_t imported = 9, rejected = 9;
    EXPECT_EQ(kjit_cache_import(b.c, old.c_str(), &imported, &rejected), KJIT_ERROR_CACHE_CORRUPT);
    EXPECT_NE(std::string(kjit_last_error()).find("format version " + std::to_string(version)),
              std::string::npos)
        << kjit_last_error();
    EXPECT_EQ(imported, 0u);
    EXPECT_EQ(b.stats().disk_entries, 0u);
  }
}

kjit::Entry sample_entry() {
  kjit::Entry e;
  e.key = std::string(64, 'c');
  e.target = "sm_90";
  e.ptx = ".version 9.0\n.target sm_90\n";
  e.cubin = std::string(
                "\x7f"
                "ELF",
                4) +
            std::string(100, '\1');
  e.kernels = {"k"};
  e.toolchain = "test";
  return e;
}

// A record built by hand (key, `meta`, the blobs of `e`, checksums made to match), as a
// forger who knows the layout would.
std::string record_for(const kjit::Entry& e, const std::string& meta) {
  const std::string_view parts[4] = {meta, e.ptx, e.cubin, e.ltoir};
  const kjit::EntryPart kinds[4] = {kjit::EntryPart::Metadata, kjit::EntryPart::Ptx,
                                    kjit::EntryPart::Cubin, kjit::EntryPart::LtoIr};
  std::string r = u64_bytes(e.key.size()) + e.key, sums;
  for (int i = 0; i < 4; ++i) {
    r += u64_bytes(parts[i].size()) + std::string(parts[i]);
    const kjit::Checksum c = kjit::entry_checksum(e.key, kinds[i], parts[i]);
    sums.append(reinterpret_cast<const char*>(c.data()), c.size());
  }
  return r + u64_bytes(sums.size()) + sums;
}

TEST(ExportRecord, DecodeChecksKeySyntaxChecksumsSizesAndVersion) {
  const kjit::Entry e = sample_entry();
  kjit::Entry out;
  ASSERT_TRUE(kjit::decode_record(kjit::encode_record(e), &out));
  EXPECT_EQ(out.key, e.key);
  EXPECT_EQ(out.cubin, e.cubin);
  EXPECT_EQ(out.ptx, e.ptx);
  // A record is consistent with its own key only.
  std::string rec = kjit::encode_record(e);
  rec.replace(8, 64, std::string(64, 'd'));
  EXPECT_FALSE(kjit::decode_record(rec, &out)) << "relabelled";
  // Keys that are not 64 lowercase hex digits, even with checksums made for them.
  for (const std::string& key : {std::string(64, 'C'), std::string(63, 'c'), std::string(64, 'g'),
                                 std::string(65, 'c'), std::string()}) {
    kjit::Entry bad = e;
    bad.key = key;
    EXPECT_FALSE(kjit::decode_record(kjit::encode_record(bad), &out)) << "key '" << key << "'";
  }
  // Every byte after the key belongs to some checksummed part or the checksums: flipping
  // any of them is caught.
  const std::string good = kjit::encode_record(e);
  for (size_t i = 72; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_FALSE(kjit::decode_record(bad, &out)) << "flip at " << i << " of " << good.size();
  }
  // No code at all.
  kjit::Entry empty = e;
  empty.ptx.clear();
  empty.cubin.clear();
  EXPECT_FALSE(kjit::decode_record(kjit::encode_record(empty), &out)) << "no code";
  // Metadata edited (another format version; sizes that disagree with the blobs) and every
  // checksum made to match: only the consistency checks can catch these.
  const std::string meta = e.metadata_json();
  EXPECT_TRUE(kjit::decode_record(record_for(e, meta), &out)) << "the construction itself";
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string m = meta;
    EXPECT_NE(m.find(from), std::string::npos) << from;
    if (m.find(from) != std::string::npos) m.replace(m.find(from), from.size(), to);
    return record_for(e, m);
  };
  const std::string format = "\"format\":" + std::to_string(kjit::kCacheFormatVersion);
  EXPECT_FALSE(kjit::decode_record(edited(format, "\"format\":999"), &out)) << "format 999";
  EXPECT_FALSE(kjit::decode_record(edited(format, "\"format\":1"), &out)) << "format 1";
  EXPECT_FALSE(kjit::decode_record(edited("\"cubin\":104", "\"cubin\":105"), &out)) << "sizes";
  EXPECT_FALSE(kjit::decode_record(edited("\"ltoir\":0", "\"ltoir\":1"), &out)) << "a part missing";
  EXPECT_FALSE(kjit::decode_record(edited("{", "["), &out)) << "not JSON";
}

// ---- signed exports ---------------------------------------------------------------------

const char* const kFleetKey = "fleet-secret-0123456789abcdef";  // 29 bytes
const char* const kOtherKey = "another-secret-0123456789abcdef";

// Fields of a record: key, metadata, ptx, cubin, ltoir, checksums.
std::vector<std::string> record_fields(const std::string& rec) {
  std::vector<std::string> out;
  for (size_t at = 0; at < rec.size();) {
    const uint64_t n = get_u64(rec, at);
    out.push_back(rec.substr(at + 8, n));
    at += 8 + n;
  }
  return out;
}

struct Import {
  kjit_status status = KJIT_ERROR_INTERNAL;
  uint64_t imported = 99, rejected = 99;
  std::string error;
};

Import import_into(kjit_cache* c, const std::string& file) {
  Import r;
  r.status = kjit_cache_import(c, file.c_str(), &r.imported, &r.rejected);
  r.error = kjit_last_error();
  return r;
}

// A cache with two real kernels, exported to `file` signed with `key` ("" = unsigned).
struct Exported {
  TempDir dir;
  Result saxpy, templ;
  void make(const std::string& file, const std::string& key) {
    Cache a(dir.path());
    saxpy = compile(a.c, kSaxpySource);
    templ = compile(a.c, kTemplateSource, "sm_90", {}, {}, {"scale<float, 2>"});
    ASSERT_EQ(saxpy.status, KJIT_OK);
    ASSERT_EQ(templ.status, KJIT_OK);
    if (key.empty()) unsetenv("KJIT_EXPORT_KEY");
    if (!key.empty()) setenv("KJIT_EXPORT_KEY", key.c_str(), 1);
    uint64_t count = 0;
    ASSERT_EQ(kjit_cache_export(a.c, file.c_str(), &count), KJIT_OK) << kjit_last_error();
    unsetenv("KJIT_EXPORT_KEY");
    ASSERT_EQ(count, 2u);
  }
};

TEST(SignedExport, RoundTrip) {
  TempDir files, b_dir;
  Exported src;
  src.make(files.file("x.kjit"), kFleetKey);
  const ExportFile f = split_export(kjit::test::read_file_or_die(files.file("x.kjit")));
  ASSERT_EQ(f.frames.size(), 2u);
  for (const Frame& fr : f.frames) EXPECT_EQ(fr.signature.size(), 32u) << "every record signed";
  ScopedEnv key("KJIT_EXPORT_KEY", kFleetKey);
  Cache b(b_dir.path());
  const Import r = import_into(b.c, files.file("x.kjit"));
  ASSERT_EQ(r.status, KJIT_OK) << r.error;
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.rejected, 0u);
  ASSERT_EQ(kjit_cache_clear_memory(b.c), KJIT_OK);
  Result h = compile(b.c, kSaxpySource);
  EXPECT_EQ(h.tier, KJIT_TIER_DISK);
  EXPECT_EQ(h.cubin, src.saxpy.cubin);
}

TEST(SignedExport, TamperedRecordOrSignatureIsRejected) {
  TempDir files;
  Exported src;
  src.make(files.file("x.kjit"), kFleetKey);
  const ExportFile f = split_export(kjit::test::read_file_or_die(files.file("x.kjit")));
  ScopedEnv key("KJIT_EXPORT_KEY", kFleetKey);
  // One byte of the first record (its SHA-256 recomputed), then one byte of the second
  // record's signature.
  for (int what = 0; what < 2; ++what) {
    ExportFile bad = f;
    if (what == 0) bad.frames[0].record[bad.frames[0].record.size() / 2] ^= 0x01;
    if (what == 1) bad.frames[1].signature[7] ^= 0x40;
    kjit::test::write_file(files.file("bad.kjit"), join_export(bad));
    TempDir b_dir;
    Cache b(b_dir.path());
    const Import r = import_into(b.c, files.file("bad.kjit"));
    ASSERT_EQ(r.status, KJIT_OK) << r.error;
    EXPECT_EQ(r.imported, 1u) << what;
    EXPECT_EQ(r.rejected, 1u) << what;
  }
}

TEST(SignedExport, WrongKeyRejectsEveryRecord) {
  TempDir files, b_dir;
  Exported src;
  src.make(files.file("x.kjit"), kFleetKey);
  ScopedEnv key("KJIT_EXPORT_KEY", kOtherKey);
  LogCapture log;
  Cache b(b_dir.path());
  const Import r = import_into(b.c, files.file("x.kjit"));
  ASSERT_EQ(r.status, KJIT_OK) << r.error;
  EXPECT_EQ(r.imported, 0u);
  EXPECT_EQ(r.rejected, 2u);
  EXPECT_EQ(b.stats().disk_entries, 0u);
  EXPECT_EQ(log.count("2 records of " + files.file("x.kjit") +
                      " rejected: the signature does not verify with KJIT_EXPORT_KEY"),
            1u);
}

TEST(SignedExport, UnsignedFileIsRejectedWhenAKeyIsSet) {
  TempDir files, b_dir;
  Exported src;
  src.make(files.file("x.kjit"), "");
  for (const Frame& fr : split_export(kjit::test::read_file_or_die(files.file("x.kjit"))).frames) {
    EXPECT_TRUE(fr.signature.empty()) << "no key, no signature";
  }
  ScopedEnv key("KJIT_EXPORT_KEY", kFleetKey);
  LogCapture log;
  Cache b(b_dir.path());
  const Import r = import_into(b.c, files.file("x.kjit"));
  ASSERT_EQ(r.status, KJIT_OK) << r.error;
  EXPECT_EQ(r.imported, 0u);
  EXPECT_EQ(r.rejected, 2u);
  EXPECT_EQ(log.count("2 records of " + files.file("x.kjit") + " rejected: unsigned"), 1u);
}

TEST(SignedExport, WithoutAKeyUnsignedAndSignedFilesAreAcceptedAndSaidSo) {
  TempDir files;
  Exported plain, signed_src;
  plain.make(files.file("plain.kjit"), "");
  signed_src.make(files.file("signed.kjit"), kFleetKey);
  unsetenv("KJIT_EXPORT_KEY");
  for (const char* name : {"plain.kjit", "signed.kjit"}) {
    LogCapture log;
    TempDir b_dir;
    Cache b(b_dir.path());
    const Import r = import_into(b.c, files.file(name));
    ASSERT_EQ(r.status, KJIT_OK) << r.error;
    EXPECT_EQ(r.imported, 2u) << name;
    EXPECT_EQ(r.rejected, 0u) << name;
    const bool is_signed = std::string(name) == "signed.kjit";
    EXPECT_EQ(log.count("is unsigned"), is_signed ? 0u : 1u) << name;
    EXPECT_EQ(log.count("signatures were not checked"), is_signed ? 1u : 0u) << name;
  }
}

// The attack an unsigned file cannot stop: a forger who knows the layout writes a record
// under the saxpy key holding the template kernel's code, with every checksum computed
// for that key. It is self-consistent, so without a key it is imported (an export file is
// trusted input, as documented); with KJIT_EXPORT_KEY set it is rejected, unsigned or
// carrying the signature of the genuine record it replaced.
TEST(SignedExport, ForgedRecordIsAcceptedOnlyWithoutAKey) {
  TempDir files;
  Exported src;
  src.make(files.file("x.kjit"), kFleetKey);
  const ExportFile f = split_export(kjit::test::read_file_or_die(files.file("x.kjit")));
  const Frame* templ = nullptr;
  const Frame* saxpy = nullptr;
  for (const Frame& fr : f.frames) {
    if (record_key(fr.record) == src.templ.key) templ = &fr;
    if (record_key(fr.record) == src.saxpy.key) saxpy = &fr;
  }
  ASSERT_TRUE(templ && saxpy);
  const std::vector<std::string> fields = record_fields(templ->record);
  ASSERT_EQ(fields.size(), 6u);
  kjit::Entry forged;
  forged.key = src.saxpy.key;
  forged.ptx = fields[2];
  forged.cubin = fields[3];
  forged.ltoir = fields[4];
  const std::string forged_record = record_for(forged, fields[1]);
  kjit::Entry check;
  ASSERT_TRUE(kjit::decode_record(forged_record, &check)) << "the forgery is self-consistent";
  // Unsigned, and with the genuine saxpy record's signature.
  kjit::test::write_file(files.file("unsigned.kjit"),
                         join_export({f.header, {{forged_record, ""}}}));
  kjit::test::write_file(files.file("resigned.kjit"),
                         join_export({f.header, {{forged_record, saxpy->signature}}}));
  {
    ScopedEnv key("KJIT_EXPORT_KEY", kFleetKey);
    for (const char* name : {"unsigned.kjit", "resigned.kjit"}) {
      TempDir b_dir;
      Cache b(b_dir.path());
      const Import r = import_into(b.c, files.file(name));
      ASSERT_EQ(r.status, KJIT_OK) << r.error;
      EXPECT_EQ(r.imported, 0u) << name;
      EXPECT_EQ(r.rejected, 1u) << name;
      Result h = compile(b.c, kSaxpySource);
      EXPECT_EQ(h.tier, KJIT_TIER_COMPILED) << name;
      EXPECT_EQ(h.cubin, src.saxpy.cubin) << name;
    }
  }
  // Without a key the forgery is imported, and the next compile of saxpy is a hit on the
  // template kernel's code: what "an export file is trusted input" means.
  TempDir c_dir;
  Cache c(c_dir.path());
  const Import r = import_into(c.c, files.file("unsigned.kjit"));
  ASSERT_EQ(r.status, KJIT_OK) << r.error;
  EXPECT_EQ(r.imported, 1u);
  Result h = compile(c.c, kSaxpySource);
  EXPECT_NE(h.tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(h.cubin, src.templ.cubin);
}

TEST(SignedExport, ShortKeyIsRefusedWithAClearMessage) {
  TempDir dir, files;
  Cache a(dir.path());
  compile(a.c, kSaxpySource);
  ScopedEnv key("KJIT_EXPORT_KEY", "fifteen-bytes!!");
  EXPECT_EQ(kjit_cache_export(a.c, files.file("x.kjit").c_str(), nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  const std::string msg = kjit_last_error();
  EXPECT_NE(msg.find("KJIT_EXPORT_KEY is 15 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at least 16 bytes"), std::string::npos) << msg;
  struct stat st;
  EXPECT_NE(stat(files.file("x.kjit").c_str(), &st), 0) << "nothing written";
  unsetenv("KJIT_EXPORT_KEY");
  ASSERT_EQ(kjit_cache_export(a.c, files.file("x.kjit").c_str(), nullptr), KJIT_OK);
  setenv("KJIT_EXPORT_KEY", "short", 1);
  TempDir b_dir;
  Cache b(b_dir.path());
  EXPECT_EQ(kjit_cache_import(b.c, files.file("x.kjit").c_str(), nullptr, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kjit_last_error()).find("at least 16 bytes"), std::string::npos);
  EXPECT_EQ(b.stats().disk_entries, 0u);
  // Exactly the minimum is enough.
  setenv("KJIT_EXPORT_KEY", "sixteen-bytes!!!", 1);
  EXPECT_EQ(kjit_cache_export(a.c, files.file("y.kjit").c_str(), nullptr), KJIT_OK);
}

TEST(Cache, PruneAndBoundedSize) {
  TempDir dir;
  // Each saxpy variant is ~9 KB; bound the cache to ~40 KB.
  Cache cache(dir.path(), false, 40 * 1024);
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    Result r = compile(cache.c, std::string(kSaxpySource) + "// v" + std::to_string(i) + "\n");
    ASSERT_EQ(r.status, KJIT_OK);
    keys.push_back(r.key);
  }
  kjit_cache_stats s = cache.stats();
  EXPECT_LE(s.disk_bytes, 40u * 1024);
  EXPECT_GT(s.evictions, 0u);
  // The most recent entry survived.
  kjit_binary* b = nullptr;
  ASSERT_EQ(kjit_cache_clear_memory(cache.c), KJIT_OK);
  EXPECT_EQ(kjit_cache_get(cache.c, keys.back().c_str(), &b), KJIT_OK);
  kjit_binary_destroy(b);
  EXPECT_EQ(kjit_cache_get(cache.c, keys.front().c_str(), &b), KJIT_ERROR_NOT_FOUND);
  uint64_t removed = 0;
  ASSERT_EQ(kjit_cache_prune(cache.c, 0, &removed), KJIT_OK);
  EXPECT_GT(removed, 0u);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
}

TEST(Cache, ClearRemovesEverything) {
  TempDir dir;
  Cache cache(dir.path());
  compile(cache.c, kSaxpySource);
  ASSERT_EQ(kjit_cache_clear(cache.c), KJIT_OK);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  EXPECT_EQ(compile(cache.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
}

TEST(Cache, ReadOnlyOptionNeverWrites) {
  TempDir dir;
  {
    Cache cache(dir.path());
    compile(cache.c, kSaxpySource);
  }
  Cache ro(dir.path(), true);
  EXPECT_EQ(ro.stats().disk_state, KJIT_DISK_READ_ONLY);
  EXPECT_EQ(compile(ro.c, kSaxpySource).tier, KJIT_TIER_DISK);
  EXPECT_EQ(compile(ro.c, kTemplateSource, "sm_80", {}, {}, {"scale<int, 1>"}).status, KJIT_OK);
  EXPECT_EQ(ro.stats().disk_entries, 1u);
  EXPECT_EQ(kjit_cache_clear(ro.c), KJIT_ERROR_READ_ONLY);
}

TEST(Cache, BadArguments) {
  EXPECT_EQ(kjit_cache_open(nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.struct_size = 4;
  kjit_cache* c = nullptr;
  EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_cache_clear(nullptr), KJIT_ERROR_INVALID_HANDLE);
  kjit_cache_stats s = KJIT_CACHE_STATS_INIT;
  EXPECT_EQ(kjit_cache_stats_get(nullptr, &s), KJIT_ERROR_INVALID_HANDLE);
  kjit_compiler* comp = nullptr;
  alignas(16) unsigned char garbage[128];
  std::memset(garbage, 0x11, sizeof garbage);
  EXPECT_EQ(kjit_compiler_create(reinterpret_cast<kjit_cache*>(garbage), 0, &comp),
            KJIT_ERROR_INVALID_HANDLE);
}

}  // namespace

namespace {

TEST(CacheTotals, CountsOfEveryProcessAddUp) {
  TempDir dir;
  {
    Cache a(dir.path());
    compile(a.c, kSaxpySource);
    compile(a.c, kSaxpySource);
  }
  {
    Cache b(dir.path());
    EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_DISK);
    kjit_cache_stats s = b.stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.total_compiles, 1u);
    EXPECT_EQ(s.total_misses, 1u);
    EXPECT_EQ(s.total_memory_hits, 1u);
    EXPECT_EQ(s.total_disk_hits, 1u) << "this handle's unflushed hit is included";
    EXPECT_GT(s.total_compile_ms_saved, 0.0);
    EXPECT_EQ(s.remote_state, KJIT_REMOTE_NONE);
  }
  Cache c(dir.path(), /*read_only=*/true);
  compile(c.c, kSaxpySource);
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.total_disk_hits, 2u);
  EXPECT_EQ(s.total_compiles, 1u);
}

// The record of the schema that kjit keeps to notice damage: SHA-256 over the fields of
// sqlite_master, as kjit 0.1.0 computed it.
std::string schema_record(const std::string& db) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h,
                               "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                               "ORDER BY type, name",
                               -1, &s, nullptr),
            SQLITE_OK);
  kjit::Sha256 sha;
  while (sqlite3_step(s) == SQLITE_ROW) {
    for (int i = 0; i < 4; ++i) {
      const unsigned char* t = sqlite3_column_text(s, i);
      sha.field(std::string(t ? reinterpret_cast<const char*>(t) : "",
                            size_t(sqlite3_column_bytes(s, i))));
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(h);
  return kjit::to_hex(sha.finish());
}

// A database of kjit 0.1.0 in `dir` holding the entries of the cache in `from`, a fact, a
// value and a counter.
void write_release_010_database(const TempDir& dir, const TempDir& from) {
  kjit::test::write_schema3_database(db_path(dir), from.path());
  sql(db_path(dir), "INSERT INTO meta VALUES('kjit:schema', '" + schema_record(db_path(dir)) +
                        "'); INSERT INTO meta VALUES('test:fact', 'remembered'); "
                        "INSERT INTO kv VALUES('test', 'k', x'0102', 1); "
                        "INSERT INTO counters VALUES('compiles', 7);");
}

// A process that only hits never opens the index: its counts wait in a file, which the
// next process to open the index adds to the totals.
TEST(CacheTotals, CountsOfAProcessThatOnlyHitAreAddedByTheNextOpen) {
  TempDir dir;
  {
    Cache a(dir.path());
    ASSERT_EQ(compile(a.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
  }
  {
    Cache b(dir.path());
    EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_DISK);
  }
  EXPECT_TRUE(kjit::is_regular_file(dir.file("counters/pending")));
  // Eight processes that only hit, closing at once.
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
      o.directory = dir.path().c_str();
      kjit_cache* c = nullptr;
      const bool hit =
          kjit_cache_open(&o, &c) == KJIT_OK && compile(c, kSaxpySource).tier == KJIT_TIER_DISK;
      kjit_cache_close(c);
      _exit(hit ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.total_disk_hits, 9u);
  EXPECT_EQ(s.total_compiles, 1u);
  EXPECT_EQ(s.total_misses, 1u);
  EXPECT_TRUE(kjit::directory_names(dir.file("counters"))->empty()) << "added once";
  EXPECT_EQ(c.stats().total_disk_hits, 9u);
}

// The proof that a hit reads the payload file alone: with the index replaced by garbage, a
// hit is still served and the garbage left alone; the first process that needs the index
// moves it aside and indexes the files again.
TEST(Cache, HitsNeverOpenTheIndexAndANewIndexTakesTheFilesIn) {
  TempDir dir;
  Result a;
  {
    Cache c(dir.path());
    a = compile(c.c, kSaxpySource);
    ASSERT_EQ(a.status, KJIT_OK);
  }
  const std::string garbage(8192, 'g');
  write_file(db_path(dir), garbage);
  ::unlink((db_path(dir) + "-wal").c_str());
  ::unlink((db_path(dir) + "-shm").c_str());
  {
    Cache c(dir.path());
    Result b = compile(c.c, kSaxpySource);
    EXPECT_EQ(b.tier, KJIT_TIER_DISK);
    EXPECT_EQ(b.cubin, a.cubin);
  }
  EXPECT_EQ(read_file_or_die(db_path(dir)), garbage) << "a hit opened the index";
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_OK) << s.message;
  EXPECT_EQ(s.disk_entries, kjit::test::entry_files(dir.path()).size())
      << "the payload files were indexed again";
  EXPECT_GE(s.disk_entries, 1u);
  EXPECT_EQ(compile(c.c, kSaxpySource).tier, KJIT_TIER_DISK);
}

// The names in `dir` that begin with "kjit.db" (the index and its -wal, -shm; anything an
// older kjit's database became would be there too).
std::set<std::string> index_files(const TempDir& dir) {
  std::set<std::string> out;
  const std::optional<std::vector<std::string>> names = kjit::directory_names(dir.path());
  for (const std::string& name : names.value_or(std::vector<std::string>{})) {
    if (name.rfind("kjit.db", 0) == 0) out.insert(name);
  }
  return out;
}

// The tables of the index in `dir`, as plain SQLite sees them.
std::string tables_of(const TempDir& dir) {
  kjit::test::Db db(db_path(dir));
  return db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
}

const char* const kSchema6Tables = "claims\ncounters\ndoomed\nentries\nkv\ntotals\n";

// A cache of an older kjit is never migrated: its database, as kjit 0.1.0 (schema 3) and the
// versions after it (4, 5) wrote it, with entries, a fact, a value and counters, is rebuilt
// once (said once): nothing of it is read, and the new cache works as any new one.
TEST(CacheRebuild, DatabaseOfAnOlderSchemaIsRebuiltEmpty) {
  TempDir from;
  Result a;
  {
    Cache c(from.path());
    a = compile(c.c, kSaxpySource);
    ASSERT_EQ(a.status, KJIT_OK);
  }
  for (const int schema : {3, 4, 5}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir dir;
    if (schema == 3) {
      write_release_010_database(dir, from);
    } else {
      kjit::test::write_schema5_database(db_path(dir), from.path(), schema);
      sql(db_path(dir),
          "INSERT INTO kv VALUES('meta', 'test:fact', 'remembered', 1); "
          "INSERT INTO kv VALUES('test', 'k', x'0102', 1); INSERT INTO counters VALUES('compiles', "
          "7);");
    }
    LogCapture log;
    {
      Cache b(dir.path());
      kjit_cache_stats s = b.stats();
      EXPECT_EQ(s.disk_state, KJIT_DISK_OK) << s.message;
      EXPECT_EQ(s.disk_entries, 0u) << "nothing of the old cache is taken over";
      EXPECT_EQ(s.total_compiles, 0u) << "nor its counters";
      EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
    }
    {
      Cache again(dir.path());
      Result r = compile(again.c, kSaxpySource);
      EXPECT_EQ(r.tier, KJIT_TIER_DISK) << "the new cache works";
      EXPECT_EQ(r.cubin, a.cubin);
    }
    EXPECT_EQ(log.count("had schema " + std::to_string(schema) +
                        " of an older kjit: the cache was rebuilt"),
              1u)
        << "said once";
    EXPECT_EQ(log.count("migrated"), 0u);
    EXPECT_EQ(tables_of(dir), kSchema6Tables) << "the old tables are gone";
    kjit::test::Db db(db_path(dir));
    EXPECT_EQ(db.text("PRAGMA user_version"), std::to_string(kjit::IndexDb::kSchemaVersion));
    EXPECT_EQ(db.text("SELECT count(*) FROM entries"), "1") << "the new entry only";
    EXPECT_EQ(db.text("SELECT count(*) FROM kv WHERE ns = 'test'"), "0");
    EXPECT_EQ(kjit::FactFiles(dir.path()).read("test:fact"), std::nullopt)
        << "no fact read from the old tables";
    EXPECT_EQ(kjit::test::entry_files(dir.path()).size(), 1u);
    EXPECT_EQ(index_files(dir), (std::set<std::string>{"kjit.db", "kjit.db-shm", "kjit.db-wal"}));
  }
}

// Many processes opening one old cache at once: one rebuilds it, every one gets the new.
TEST(CacheRebuild, ProcessesOpeningAnOldCacheAtOnceAllGetTheNewOne) {
  TempDir from, dir;
  {
    Cache c(from.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  write_release_010_database(dir, from);
  std::vector<pid_t> kids;
  for (int i = 0; i < 6; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        kjit::IndexDb index(dir.path(), false, true);  // opening rebuilds it
        kjit::test::Db db(db_path(dir));
        const bool ok =
            db.text("PRAGMA user_version") == std::to_string(kjit::IndexDb::kSchemaVersion) &&
            db.text("SELECT count(*) FROM entries") == "0";
        _exit(ok ? 0 : 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        _exit(2);
      }
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  EXPECT_EQ(tables_of(dir), kSchema6Tables);
  Cache c(dir.path());
  EXPECT_EQ(c.stats().disk_state, KJIT_DISK_OK) << c.stats().message;
  EXPECT_EQ(compile(c.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
}

// A process that cannot write leaves an old cache as it is, and says what would rebuild it.
TEST(CacheRebuild, DatabaseOfAnOlderSchemaOpenedReadOnlySaysHowToRebuild) {
  TempDir from, dir;
  {
    Cache c(from.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  write_release_010_database(dir, from);
  const std::string old_bytes = read_file_or_die(db_path(dir));
  {
    Cache ro(dir.path(), /*read_only=*/true);
    kjit_cache_stats s = ro.stats();
    EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE) << s.message;
    EXPECT_NE(std::string(s.message).find("older kjit"), std::string::npos) << s.message;
    EXPECT_NE(std::string(s.message).find("write access"), std::string::npos) << s.message;
    EXPECT_EQ(compile(ro.c, kSaxpySource).tier, KJIT_TIER_COMPILED) << "never an old entry";
  }
  EXPECT_THROW(kjit::IndexDb(dir.path(), true, true), kjit::Error);
  EXPECT_EQ(read_file_or_die(db_path(dir)), old_bytes) << "read-only: left as it is";
}

// A database of a newer kjit is not used, and left as it is: that kjit may still use it.
TEST(CacheRebuild, DatabaseOfANewerSchemaIsLeftAlone) {
  TempDir dir;
  { kjit::IndexDb index(dir.path(), false, true); }
  {
    kjit::test::Db db(db_path(dir));
    db.exec("PRAGMA user_version=" + std::to_string(kjit::IndexDb::kSchemaVersion + 1));
  }
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE);
  EXPECT_NE(std::string(s.message).find("newer kjit"), std::string::npos) << s.message;
  kjit::test::Db db(db_path(dir));
  EXPECT_EQ(db.text("PRAGMA user_version"), std::to_string(kjit::IndexDb::kSchemaVersion + 1));
}

TEST(CacheTotals, NewDatabaseIsCheckpointedEveryMebibyte) {
  TempDir dir;
  {
    Cache c(dir.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  kjit::IndexDb index(dir.path(), false, true);
  const kjit::IndexDb::Settings set = index.settings();
  EXPECT_EQ(set.journal_mode, "wal");
  EXPECT_EQ(set.wal_autocheckpoint, kjit::IndexDb::kWalCheckpointBytes / set.page_size)
      << "the log is checkpointed every MiB (pages of " << set.page_size;
  Cache again(dir.path());
  EXPECT_EQ(compile(again.c, kSaxpySource).tier, KJIT_TIER_DISK);
}

// The schema fingerprint, sorted by kjit since 0.2, is the one SQLite's ORDER BY gave: a
// database whose fingerprint an older kjit recorded still opens.
TEST(CacheTotals, SchemaFingerprintIsTheOneRecordedBefore) {
  TempDir dir;
  {
    Cache c(dir.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  const std::string as_before = schema_record(dir.path() + "/kjit.db");
  kjit::IndexDb index(dir.path(), true, true);  // opens: the recorded fingerprint is checked
  EXPECT_EQ(kjit::test::Db(db_path(dir))
                .text("SELECT value FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'"),
            as_before);
}

TEST(DiskStoreValues, ClearDropsValuesAndKeepsFacts) {
  TempDir dir;
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  kjit::Cache store(cfg);
  const kjit::FactFiles facts(dir.path());
  facts.write("fact", "1");
  store.facts().put_value("ns", "k", "v");
  store.facts().put_value("ns", "fact", "other");
  EXPECT_EQ(facts.read("fact"), std::optional<std::string>("1"));
  store.clear();
  EXPECT_EQ(facts.read("fact"), std::optional<std::string>("1"));
  EXPECT_EQ(store.facts().get_value("ns", "k"), std::nullopt);
  EXPECT_EQ(store.facts().get_value("ns", "fact"), std::nullopt);
}

TEST(DiskStoreClaims, NobodyHoldsAKeyUntilItIsClaimed) {
  TempDir dir;
  kjit::IndexDb index(dir.path(), false, true);
  kjit::Claims store(index);
  const auto stored = [](kjit::SqliteConn&, const std::string&) { return false; };
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string key(64, 'a');
  const std::string me = std::string(host) + "|" + std::to_string(getpid()) + "|1|test";
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::None);
  EXPECT_EQ(store.try_claim(key, me, stored).state, kjit::Claim::State::Claimed);
  const kjit::Claim held = store.read(key);
  EXPECT_EQ(held.state, kjit::Claim::State::Busy);
  EXPECT_EQ(held.owner, me);
  store.release(key, me);
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::None);
  EXPECT_EQ(store.try_claim(key, me, stored).state, kjit::Claim::State::Claimed);
  store.fail(key, me, "{}");
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::Failed);
}

}  // namespace

namespace {

// A process that waited for another's failed compile gets the failure as the compiling
// process had it: the log, and the key the compile gave its result (kjit_binary_key and
// kjit_compute_key of a failing program must not depend on who compiled it).
TEST(Flight, AWaiterGetsAFailedCompilesLogAndKey) {
  TempDir dir;
  const std::string flight(64, 'f'), result_key(64, 'e'), go = dir.file("go");
  const pid_t child = fork();
  if (child == 0) {
    kjit::CacheConfig cfg;
    cfg.directory = dir.path();
    kjit::Cache leader(cfg);
    leader.get_or_compile(flight, [&] {
      for (int i = 0; i < 2000 && access(go.c_str(), F_OK) != 0; ++i) usleep(5000);
      auto e = std::make_shared<kjit::Entry>();
      e->key = result_key;
      e->log = "error: boom";
      return kjit::Outcome{KJIT_ERROR_COMPILE, "compile failed", e, KJIT_TIER_COMPILED};
    });
    _exit(0);
  }
  {
    kjit::IndexDb index(dir.path(), false, true);
    kjit::Claims store(index);
    for (int i = 0; i < 2000 && store.read(flight).state != kjit::Claim::State::Busy; ++i) {
      usleep(5000);
    }
    ASSERT_EQ(store.read(flight).state, kjit::Claim::State::Busy) << "the child holds it";
  }
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  kjit::Cache waiter(cfg);
  bool compiled_here = false;
  std::thread release([&] {
    usleep(100000);
    std::ofstream(go) << "go";
  });
  const kjit::Outcome o = waiter.get_or_compile(flight, [&] {
    compiled_here = true;
    return kjit::Outcome{KJIT_ERROR_INTERNAL, "must not compile", nullptr, KJIT_TIER_COMPILED};
  });
  release.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(compiled_here) << "the failure is deterministic: the waiter takes it";
  EXPECT_EQ(o.status, KJIT_ERROR_COMPILE);
  ASSERT_TRUE(o.entry);
  EXPECT_EQ(o.entry->log, "error: boom");
  EXPECT_EQ(o.entry->key, result_key);
}

}  // namespace

// kjit::read_file reads a regular file in one read when its size holds (payload, fact and
// record files are read so in every fresh process): whole files of every size around the
// buffer's, and files whose size says nothing (a FIFO, /proc) read to their end.
namespace {

kjit::Entry entry_with_every_field() {
  kjit::Entry e;
  e.target = "sm_90a";
  e.toolchain = "nvrtc 13.0.88 CL-36424714";
  e.program_name = "fused.cu";
  e.options = {"-arch=sm_90a", "", "-DX=\"a b\"", "--std=c++17"};
  e.names = {{"scale<float, 2>", "_Z5scaleIfLi2EEvPT_"}, {"f<0>", ""}};
  e.kernels = {"_Z5scaleIfLi2EEvPT_", "k2"};
  e.log = "warning: line 1\nwarning: line 2\n";
  e.compile_ms = 1234.5678;
  e.pch = 2;
  e.created = 1790000000;
  e.manifest = "{\"records\":[]}";
  e.ptx = std::string(1000, 'p');
  e.cubin = std::string(3000, 'c');
  return e;
}

void expect_same_metadata(const kjit::Entry& a, const kjit::Entry& b) {
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.toolchain, b.toolchain);
  EXPECT_EQ(a.program_name, b.program_name);
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.log, b.log);
  EXPECT_EQ(a.compile_ms, b.compile_ms);
  EXPECT_EQ(a.pch, b.pch);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.manifest, b.manifest);
}

}  // namespace

TEST(EntryBlob, HoldsBytesLikeAStringAndEndsWithANul) {
  kjit::Blob empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_STREQ(empty.c_str(), "");
  const std::string bytes("a\0b\xff", 4);
  kjit::Blob b(bytes);
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(b, bytes);
  EXPECT_EQ(b.c_str()[4], '\0');
  EXPECT_EQ(b.find("b"), 2u);
  kjit::Blob copy = b;
  EXPECT_EQ(copy, b);
  EXPECT_NE(copy.data(), b.data());
  kjit::Blob moved = std::move(copy);
  EXPECT_EQ(moved, bytes);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from blob is empty
  // Assigned from its own bytes (a part of them), it keeps them.
  moved = moved.view().substr(1, 2);
  EXPECT_EQ(moved, std::string("\0b", 2));
  moved = moved;
  EXPECT_EQ(moved, std::string("\0b", 2));
  // Sized without being filled: every byte written is kept, the NUL follows.
  kjit::Blob r;
  char* p = r.uninitialized(100000);
  for (size_t i = 0; i < 100000; ++i) p[i] = char('a' + i % 26);
  EXPECT_EQ(r.size(), 100000u);
  EXPECT_EQ(r.c_str()[100000], '\0');
  EXPECT_EQ(r.view().substr(0, 3), "abc");
  EXPECT_EQ(r.uninitialized(0), nullptr);
  EXPECT_TRUE(r.empty());
  EXPECT_STREQ(r.c_str(), "");
}

TEST(EntryMetadata, BinaryFormHoldsWhatTheJsonFormHolds) {
  const kjit::Entry e = entry_with_every_field();
  kjit::Entry from_binary, from_json;
  from_binary.load_metadata_binary(e.metadata_binary());
  from_json.load_metadata(e.metadata_json());
  expect_same_metadata(from_binary, e);
  expect_same_metadata(from_binary, from_json);
  EXPECT_EQ(from_binary.recorded_sizes.ptx, 1000u);
  EXPECT_EQ(from_binary.recorded_sizes.cubin, 3000u);
  EXPECT_EQ(from_binary.recorded_sizes.ltoir, 0u);
  // `created` given to the writer replaces the entry's own.
  kjit::Entry stamped;
  stamped.load_metadata_binary(e.metadata_binary(42));
  EXPECT_EQ(stamped.created, 42);
  // Empty lists and strings.
  kjit::Entry empty, back;
  back.load_metadata_binary(empty.metadata_binary());
  expect_same_metadata(back, empty);
}

TEST(EntryMetadata, DamagedBinaryFormIsCorruptNeverACrash) {
  const std::string good = entry_with_every_field().metadata_binary();
  auto outcome = [](const std::string& bytes) {
    kjit::Entry e;
    try {
      e.load_metadata_binary(bytes);
      return KJIT_OK;
    } catch (const kjit::Error& ex) {
      return ex.status();
    }
  };
  ASSERT_EQ(outcome(good), KJIT_OK);
  // Every shorter prefix, and a byte more, is corrupt.
  for (size_t n = 0; n < good.size(); ++n) {
    ASSERT_EQ(outcome(good.substr(0, n)), KJIT_ERROR_CACHE_CORRUPT) << "prefix of " << n;
  }
  EXPECT_EQ(outcome(good + '\0'), KJIT_ERROR_CACHE_CORRUPT);
  // Every byte changed: corrupt, or an entry (a changed character of a string); nothing else.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0xA5);
    const kjit_status st = outcome(bad);
    ASSERT_TRUE(st == KJIT_OK || st == KJIT_ERROR_CACHE_CORRUPT) << "byte " << i;
  }
  // Lengths and counts far beyond the bytes left are refused before anything is allocated.
  std::string huge = good;
  for (int b = 0; b < 8; ++b) huge[8 + size_t(b)] = char(0xFF);  // the target's length
  EXPECT_EQ(outcome(huge), KJIT_ERROR_CACHE_CORRUPT);
  kjit::Entry no_options = entry_with_every_field();
  no_options.options.clear();
  no_options.target = no_options.toolchain = no_options.program_name = "";
  std::string many = no_options.metadata_binary();
  ASSERT_EQ(many[32], '\0');  // the options' count follows the format and three empty strings
  many[32 + 7] = char(0x40);  // 2^62 options
  EXPECT_EQ(outcome(many), KJIT_ERROR_CACHE_CORRUPT);
  // Another format version, an unknown PCH state, a compile time that is not finite.
  std::string other = good;
  other[0] = char(other[0] + 1);
  EXPECT_EQ(outcome(other), KJIT_ERROR_CACHE_CORRUPT);
  kjit::Entry nan_ms = entry_with_every_field();
  nan_ms.compile_ms = std::nan("");
  EXPECT_EQ(outcome(nan_ms.metadata_binary()), KJIT_ERROR_CACHE_CORRUPT);
}

TEST(ReadFile, WholeFilesOfEverySizeAndFilesWithoutASize) {
  TempDir d;
  std::mt19937 rng(7);
  for (size_t size : {size_t(0), size_t(1), size_t(4095), size_t(65535), size_t(65536),
                      size_t(65537), size_t(200001)}) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = char(rng());
    const std::string path = d.file("f" + std::to_string(size));
    write_file(path, bytes);
    const std::optional<std::string> got = kjit::read_file(path);
    ASSERT_TRUE(got.has_value()) << size;
    EXPECT_EQ(*got, bytes) << size;
  }
  EXPECT_FALSE(kjit::read_file(d.file("missing")).has_value());
  EXPECT_FALSE(kjit::read_file(d.path()).has_value()) << "a directory is no file";

  const std::optional<std::string> status = kjit::read_file("/proc/self/status");
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(status->find("\nVmRSS:"), std::string::npos) << "stopped before its end";
  const std::optional<std::string> maps = kjit::read_file("/proc/self/maps");
  ASSERT_TRUE(maps.has_value());
  EXPECT_GT(maps->size(), 4096u) << "read past its first page";
  EXPECT_EQ(maps->back(), '\n');

  const std::string fifo = d.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string sent(150000, 'p');
  std::thread writer([&] {
    FILE* f = std::fopen(fifo.c_str(), "wb");
    for (size_t at = 0; f && at < sent.size(); at += 1000)
      std::fwrite(sent.data() + at, 1, 1000, f);
    if (f) std::fclose(f);
  });
  const std::optional<std::string> piped = kjit::read_file(fifo);
  writer.join();
  ASSERT_TRUE(piped.has_value());
  EXPECT_EQ(piped->size(), sent.size());
}
