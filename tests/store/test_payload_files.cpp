// Payload files (store/entry_files.h) on their own: round trip, layout, the entry's shape.
#include <gtest/gtest.h>

#include <string>

#include "store/entry.h"
#include "store/entry_files.h"
#include "support/test_support.h"

namespace {

using kjit::Entry;
using kjit::EntryFiles;
using kjit::test::TempDir;

Entry sample() {
  Entry e;
  e.key = std::string(64, 'c');
  e.target = "sm_90";
  e.ptx = ".version 9.0\n.entry k()\n{\n}\n";
  e.cubin = std::string(
      "\x7f"
      "ELF\0\1",
      6);
  e.kernels = {"k"};
  e.names = {{"k<int>", "_Z1kIiEvv"}};
  e.options = {"-arch=sm_90"};
  e.log = "ok";
  e.compile_ms = 12.5;
  e.created = 1790000000;
  return e;
}

EntryFiles::Read read(const EntryFiles& files, const std::string& key, Entry* out,
                      std::string* why) {
  out->key = key;
  return files.read(key, out, false, why);
}

TEST(PayloadFiles, WrittenFilesReadBackWhole) {
  TempDir dir;
  const EntryFiles files(dir.path());
  const Entry e = sample();
  files.install(files.write_temp(e, e.created), e.key);
  Entry back;
  std::string why;
  ASSERT_EQ(read(files, e.key, &back, &why), EntryFiles::Read::Ok) << why;
  EXPECT_EQ(back.ptx, e.ptx);
  EXPECT_EQ(back.cubin, e.cubin);
  EXPECT_EQ(back.names, e.names);
  EXPECT_EQ(back.options, e.options);
  EXPECT_EQ(back.created, e.created);
  EXPECT_EQ(back.compile_ms, e.compile_ms);
  Entry none;
  EXPECT_EQ(read(files, std::string(64, 'd'), &none, &why), EntryFiles::Read::Missing);
}

TEST(PayloadFiles, AnotherLayoutIsCorrupt) {
  TempDir dir;
  const EntryFiles files(dir.path());
  const Entry e = sample();
  files.install(files.write_temp(e, e.created), e.key);
  const std::string written = kjit::test::read_file_or_die(files.path(e.key));
  ASSERT_EQ(written[8], char(EntryFiles::kLayoutVersion));
  for (const char layout : {char(1), char(3)}) {
    std::string bytes = written;
    bytes[8] = layout;
    kjit::test::write_file(files.path(e.key), bytes);
    Entry back;
    std::string why;
    EXPECT_EQ(read(files, e.key, &back, &why), EntryFiles::Read::Corrupt) << int(layout);
    EXPECT_EQ(why, "another layout version or header size");
  }
}

TEST(EntryShape, PartsOfTheRecordedSizesAndSomeCode) {
  Entry e = sample();
  e.recorded_sizes = {e.ptx.size(), e.cubin.size(), 0};
  EXPECT_STREQ(e.parts_problem(), "");
  e.recorded_sizes.ltoir = 1;
  EXPECT_STREQ(e.parts_problem(), "parts of the wrong size for the metadata");
  Entry empty;
  EXPECT_STREQ(empty.parts_problem(), "entry has no code");
  empty.manifest = "kjit-manifest 1\n";
  EXPECT_STREQ(empty.parts_problem(), "") << "a manifest holds no code";
}

}  // namespace
