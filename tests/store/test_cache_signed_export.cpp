// Signed exports ($KJIT_EXPORT_KEY) through the public C API.
#include <gtest/gtest.h>
#include <sys/stat.h>
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

}  // namespace
