// Fact files (store/fact_files.h) on their own: round trip, damage, foreign files, limits.
#include <gtest/gtest.h>

#include <string>

#include "store/fact_files.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::FactFiles;
using kjit::test::TempDir;

std::string fact_path(const TempDir& dir, const std::string& name) {
  return dir.file("facts/" + kjit::to_hex(kjit::sha256(name)).substr(0, 32));
}

TEST(FactFiles, RoundTripAndAbsence) {
  TempDir dir;
  const FactFiles facts(dir.path());
  EXPECT_EQ(facts.read("nvrtc"), std::nullopt);
  facts.write("nvrtc", std::string("13.0\0build", 10));
  EXPECT_EQ(facts.read("nvrtc"), std::optional<std::string>(std::string("13.0\0build", 10)));
  facts.write("nvrtc", "");
  EXPECT_EQ(facts.read("nvrtc"), std::optional<std::string>(""));
}

TEST(FactFiles, ReadOnlyWritesNothing) {
  TempDir dir;
  FactFiles(dir.path(), /*read_only=*/true).write("f", "v");
  EXPECT_EQ(FactFiles(dir.path()).read("f"), std::nullopt);
}

TEST(FactFiles, DamagedOrMisfiledFilesAreNoFact) {
  TempDir dir;
  const FactFiles facts(dir.path());
  facts.write("a", "value of a");
  const std::string bytes = kjit::test::read_file_or_die(fact_path(dir, "a"));
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= 0x20;
    kjit::test::write_file(fact_path(dir, "a"), damaged);
    EXPECT_EQ(facts.read("a"), std::nullopt) << "byte " << i;
  }
  kjit::test::write_file(fact_path(dir, "b"), bytes);  // a's file under b's name
  EXPECT_EQ(facts.read("b"), std::nullopt);
  kjit::test::write_file(fact_path(dir, "a"), bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(facts.read("a"), std::nullopt);
}

TEST(FactFiles, AFactTooLargeIsRefused) {
  TempDir dir;
  const FactFiles facts(dir.path());
  EXPECT_THROW(facts.write("big", std::string(FactFiles::kMaxFactBytes, 'x')), kjit::Error);
  EXPECT_EQ(facts.read("big"), std::nullopt);
}

}  // namespace
