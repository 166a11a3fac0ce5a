// The persistent cache through the public C API (and, for fault injection, the store):
// entries and databases of other formats, damaged or swapped, are misses or moved aside,
// never served.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "store/entry.h"
#include "support/cache_api.h"
#include "support/entry_file_edit.h"
#include "support/test_support.h"
#include "util/checksum.h"

namespace {

using namespace kjit::test::capi;

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

}  // namespace
