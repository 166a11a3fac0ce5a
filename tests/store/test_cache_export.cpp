// Exports and imports through the public C API, and the checks of an export record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "store/entry.h"
#include "store/export.h"
#include "support/cache_api.h"
#include "support/export_file.h"
#include "support/test_support.h"
#include "util/checksum.h"

namespace {

using namespace kjit::test::capi;

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

}  // namespace
