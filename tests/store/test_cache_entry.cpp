// An entry's blobs and metadata: the binary form of the metadata against the JSON form,
// damaged forms.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "store/entry.h"
#include "support/cache_api.h"
#include "support/test_support.h"
#include "util/error.h"

namespace {

using namespace kjit::test::capi;

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
  e.pch = kjit::PchOutcome::Used;
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

}  // namespace
