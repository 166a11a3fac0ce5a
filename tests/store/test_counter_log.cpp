// The counter log (store/counter_log.h) on its own: appends, taking, parsing, its caps.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <string>

#include "store/counter_log.h"
#include "support/test_support.h"
#include "util/fs.h"

namespace {

using kjit::CounterLog;
using kjit::test::TempDir;

std::map<std::string, int64_t> summed(const CounterLog::Deltas& deltas) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, n] : deltas) out[name] += n;
  return out;
}

TEST(CounterLog, AppendsAreTakenOnceAndAddUp) {
  TempDir dir;
  const CounterLog log(dir.path());
  EXPECT_FALSE(log.pending());
  ASSERT_TRUE(log.append({{"disk_hits", 2}, {"misses", 1}}));
  ASSERT_TRUE(log.append({{"disk_hits", 3}}));
  EXPECT_TRUE(log.pending());
  const auto got = summed(log.take_all());
  EXPECT_EQ(got, (std::map<std::string, int64_t>{{"disk_hits", 5}, {"misses", 1}}));
  EXPECT_TRUE(log.take_all().empty()) << "taken once";
  EXPECT_FALSE(log.pending());
}

TEST(CounterLog, MalformedLinesAreSkipped) {
  TempDir dir;
  const CounterLog log(dir.path());
  ASSERT_TRUE(log.append({{"compiles", 1}}));
  kjit::test::write_file(dir.file("counters/pending"),
                         "compiles 1\nNot_lower 5\n 7\nmisses -3\nmisses x\nno_newline 4");
  EXPECT_EQ(summed(log.take_all()), (std::map<std::string, int64_t>{{"compiles", 1}}));
}

TEST(CounterLog, AnAppendPastTheCapIsRefused) {
  TempDir dir;
  const CounterLog log(dir.path());
  ASSERT_TRUE(kjit::make_directories(dir.file("counters"), 0700));
  kjit::test::write_file(dir.file("counters/pending"),
                         std::string(CounterLog::kMaxPendingBytes - 4, '#') + "\n");
  EXPECT_FALSE(log.append({{"disk_hits", 1}})) << "the caller adds its counts itself";
  EXPECT_TRUE(log.take_all().empty());
}

TEST(CounterLog, ATakenLogTooLargeIsRemovedUnread) {
  TempDir dir;
  const CounterLog log(dir.path());
  ASSERT_TRUE(log.append({{"disk_hits", 1}}));
  kjit::test::write_file(dir.file("counters/taken-1-0"),
                         "disk_hits 1\n" + std::string(CounterLog::kMaxTakenBytes, '#'));
  EXPECT_EQ(summed(log.take_all()), (std::map<std::string, int64_t>{{"disk_hits", 1}}));
  EXPECT_FALSE(kjit::is_regular_file(dir.file("counters/taken-1-0")));
}

TEST(CounterLog, AFileInPlaceOfTheDirectoryIsRemoved) {
  TempDir dir;
  kjit::test::write_file(dir.file("counters"), "disk_hits 1\n");
  const CounterLog log(dir.path());
  EXPECT_FALSE(log.pending());
  struct stat st;
  EXPECT_NE(::lstat(dir.file("counters").c_str(), &st), 0);
  EXPECT_TRUE(log.append({{"disk_hits", 1}}));
  EXPECT_EQ(summed(log.take_all()), (std::map<std::string, int64_t>{{"disk_hits", 1}}));
}

}  // namespace
