// util/wire: the one little-endian codec of the binary formats (docs/formats.md).
#include <gtest/gtest.h>

#include <string>

#include "util/wire.h"

namespace kjit {
namespace {

TEST(Wire, NumbersStringsAndRawBytesRoundTrip) {
  WireWriter w;
  w.raw("MAGI");
  w.u32(0x01020304);
  w.u64(0x1122334455667788ull);
  w.f64(123.5);
  w.str("hello");
  w.strs({"a", "", "bc"});
  // Little-endian, strings with a u64 length first, raw bytes as they are.
  EXPECT_EQ(w.bytes().substr(0, 8), std::string("MAGI\x04\x03\x02\x01", 8));
  WireReader r(w.bytes());
  EXPECT_EQ(r.raw(4), "MAGI");
  EXPECT_EQ(r.u32(), 0x01020304u);
  EXPECT_EQ(r.u64(), 0x1122334455667788ull);
  EXPECT_EQ(r.f64(), 123.5);
  EXPECT_EQ(r.str(), "hello");
  EXPECT_EQ(r.strs(), (std::vector<std::string>{"a", "", "bc"}));
  EXPECT_NO_THROW(r.finish());
}

TEST(Wire, EveryTruncationThrows) {
  WireWriter w;
  w.raw("MAGI");
  w.u32(7);
  w.str("payload");
  w.u64(9);
  const std::string full = w.bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    WireReader r(std::string_view(full).substr(0, n));
    EXPECT_THROW(
        {
          r.raw(4);
          r.u32();
          r.str();
          r.u64();
        },
        WireError)
        << n;
  }
  const std::string longer = full + "x";
  WireReader extra(longer);
  extra.raw(4);
  extra.u32();
  extra.str();
  extra.u64();
  EXPECT_THROW(extra.finish(), WireError);
}

TEST(Wire, LengthsLargerThanTheInputAreRefusedBeforeAllocating) {
  WireWriter w;
  w.u64(uint64_t(1) << 60);  // a string or count that claims more than is there
  WireReader s(w.bytes());
  EXPECT_THROW(s.str(), WireError);
  WireReader c(w.bytes());
  EXPECT_THROW(c.count(), WireError);
  WireReader raw(w.bytes());
  EXPECT_THROW(raw.raw(9), WireError);
}

TEST(Wire, SealedRecordsDetectDamage) {
  for (const WireWriter::Seal seal : {WireWriter::Seal::Raw, WireWriter::Seal::Prefixed}) {
    WireWriter w;
    w.str("body");
    w.u32(5);
    const std::string body = w.bytes();
    w.seal(seal);
    const std::string rec = w.bytes();
    EXPECT_EQ(rec.size(), body.size() + 32 + (seal == WireWriter::Seal::Prefixed ? 8 : 0));
    const std::optional<std::string_view> back = unseal(rec, seal);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, body);
    for (size_t n = 0; n < rec.size(); ++n) EXPECT_FALSE(unseal(rec.substr(0, n), seal)) << n;
    for (size_t i = 0; i < rec.size(); ++i) {
      std::string bad = rec;
      bad[i] = char(bad[i] ^ 0x01);
      EXPECT_FALSE(unseal(bad, seal)) << i;
    }
  }
}

}  // namespace
}  // namespace kjit
