// An entry's blobs, and damaged forms of its binary metadata (every field through every
// encoding: test_entry_fields.cpp; the encodings' exact bytes: test_entry_encodings.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "store/entry.h"
#include "support/cache_api.h"
#include "support/entry_sample.h"
#include "support/test_support.h"
#include "util/error.h"

namespace {

using namespace kjit::test::capi;

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

TEST(EntryMetadata, DamagedBinaryFormIsCorruptNeverACrash) {
  const std::string good = kjit::test::entry_with_distinct_fields().metadata_binary();
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
  kjit::Entry no_options = kjit::test::entry_with_distinct_fields();
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
  kjit::Entry nan_ms = kjit::test::entry_with_distinct_fields();
  nan_ms.compile_ms = std::nan("");
  EXPECT_EQ(outcome(nan_ms.metadata_binary()), KJIT_ERROR_CACHE_CORRUPT);
  kjit::Entry bad_pch = kjit::test::entry_with_distinct_fields();
  bad_pch.pch = kjit::PchOutcome(4u);
  EXPECT_EQ(outcome(bad_pch.metadata_binary()), KJIT_ERROR_CACHE_CORRUPT);
  kjit::Entry from_json;
  EXPECT_THROW(from_json.load_metadata(bad_pch.metadata_json()), kjit::Error);
}

}  // namespace
