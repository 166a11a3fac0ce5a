// Reliability of the shared cache: bounded size with LRU eviction.
#include <gtest/gtest.h>

#include "support/reliability.h"

namespace {

using namespace kjit::test::reliability;

// ---- 4: bounded size -----------------------------------------------------------------------

TEST(BoundedSize, FillingPastTheLimitKeepsTheNewestUnderTheBound) {
  TempDir dir;
  const uint64_t max = 1 << 20;
  kjit_cache* c = open_cache(dir.path(), max);
  ASSERT_NE(c, nullptr);
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, size_t>> inserted;
  uint64_t total = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t size = 1024 + rng() % (16 * 1024);
    const std::string tag = "fill" + std::to_string(i);
    internal(c).insert(synthetic(tag, size));
    inserted.emplace_back(tag, size);
    total += size;
    ASSERT_LE(stats_of(c).disk_bytes, max) << "after insert " << i;
  }
  const kjit_cache_stats s = stats_of(c);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.max_size_bytes, max);
  // The survivors are exactly the newest inserts: a suffix of the insertion order.
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  std::vector<bool> present;
  uint64_t kept = 0;
  for (const auto& [tag, size] : inserted) {
    const Got g = get_synthetic(c, tag, size);
    ASSERT_TRUE(g == Got::Right || g == Got::Missing) << tag;
    present.push_back(g == Got::Right);
    if (g == Got::Right) kept += size;
  }
  const size_t first = size_t(std::find(present.begin(), present.end(), true) - present.begin());
  ASSERT_LT(first, present.size());
  for (size_t i = first; i < present.size(); ++i) {
    EXPECT_TRUE(present[i]) << "entry " << i << " evicted though older entry " << first
                            << " survived";
  }
  EXPECT_LE(kept, max);
  EXPECT_GE(kept, max / 2) << "eviction goes down to a low-water mark, not to nothing";
  kjit_cache_close(c);
  const uint64_t on_disk = file_size(dir.file("kjit.db")) + file_size(dir.file("kjit.db-wal"));
  std::printf(
      "bounded size: inserted %llu KiB into a %llu KiB cache: %zu of %zu entries kept "
      "(%llu KiB), %llu evicted, files %llu KiB\n",
      (unsigned long long)(total >> 10), (unsigned long long)(max >> 10), present.size() - first,
      present.size(), (unsigned long long)(kept >> 10), (unsigned long long)s.evictions,
      (unsigned long long)(on_disk >> 10));
  // Pages are reused after eviction: the file tracks the bound, not what went through it.
  EXPECT_LT(file_size(dir.file("kjit.db")), 3 * max);
  EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
}

TEST(BoundedSize, RecentlyUsedEntriesSurviveEviction) {
  TempDir dir;
  const uint64_t max = 1 << 20;
  const size_t size = 8 << 10;
  kjit_cache* c = open_cache(dir.path(), max);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 100; ++i) internal(c).insert(synthetic("old" + std::to_string(i), size));
  // Make them two days old, the first inserted the oldest.
  ASSERT_TRUE(kjit::test::Db(dir.path() + "/kjit.db")
                  .exec("UPDATE entries SET last_used = "
                        "CAST(strftime('%s','now') AS INTEGER) - 172800 + rowid"));
  // Their files too: a hit records its use in the payload file's time.
  for (const std::string& f : kjit::test::entry_files(dir.path())) {
    const timespec two_days_ago[2] = {{time(nullptr) - 172800, 0}, {time(nullptr) - 172800, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, f.c_str(), two_days_ago, 0), 0);
  }
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  // Use the 20 oldest: hits record recency (coarsely, in the file's time, which eviction
  // reads), so they are now the most recently used.
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(get_synthetic(c, "old" + std::to_string(i), size), Got::Right);
  for (int i = 0; i < 40; ++i) internal(c).insert(synthetic("new" + std::to_string(i), size));
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  int evicted = 0;
  bool evicting = true;
  for (int i = 0; i < 100; ++i) {
    const Got g = get_synthetic(c, "old" + std::to_string(i), size);
    if (i < 20) {
      EXPECT_EQ(g, Got::Right) << "recently used old" << i << " was evicted";
      continue;
    }
    if (g == Got::Missing) {
      ++evicted;
      EXPECT_TRUE(evicting) << "old" << i << " evicted after a less recently used one survived";
    } else {
      EXPECT_EQ(g, Got::Right);
      evicting = false;
    }
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(get_synthetic(c, "new" + std::to_string(i), size), Got::Right) << "new" << i;
  }
  EXPECT_GT(evicted, 0);
  EXPECT_LE(stats_of(c).disk_bytes, max);
  std::printf("recency: 20 used entries kept, %d least recently used evicted\n", evicted);
  kjit_cache_close(c);
}

TEST(BoundedSize, EnvironmentSetsTheBound) {
  TempDir dir;
  setenv("KJIT_CACHE_MAX_SIZE", "300k", 1);
  kjit_cache* c = open_cache(dir.path());
  unsetenv("KJIT_CACHE_MAX_SIZE");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(stats_of(c).max_size_bytes, 300u << 10);
  for (int i = 0; i < 100; ++i) internal(c).insert(synthetic("env" + std::to_string(i), 8 << 10));
  EXPECT_LE(stats_of(c).disk_bytes, 300u << 10);
  EXPECT_GT(stats_of(c).evictions, 0u);
  kjit_cache_close(c);
}

TEST(BoundedSize, EvictionNeverTearsAConcurrentRead) {
  // One handle reads entries from disk (no memory tier) while another inserts, evicts and
  // prunes everything, in a loop: a read sees an entry whole or not at all.
  TempDir dir;
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  o.memory_max_bytes = 1;
  o.max_size_bytes = 256 << 10;
  kjit_cache* reader = nullptr;
  kjit_cache* writer = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &reader), KJIT_OK);
  ASSERT_EQ(kjit_cache_open(&o, &writer), KJIT_OK);
  std::atomic<bool> stop{false};
  std::atomic<int> writer_errors{0};
  std::thread churn([&] {
    for (int round = 0; !stop; ++round) {
      try {
        for (int i = 0; i < 8; ++i)
          internal(writer).insert(synthetic("churn" + std::to_string(i), 20000 + 1000 * size_t(i)));
      } catch (const std::exception&) {
        ++writer_errors;
      }
      uint64_t removed = 0;
      if (kjit_cache_prune(writer, round % 2 ? 0 : 64 << 10, &removed) != KJIT_OK) ++writer_errors;
    }
  });
  int right = 0, missing = 0, bad = 0;
  const double until = now_ms() + 1500;
  while (now_ms() < until) {
    for (int i = 0; i < 8; ++i) {
      const Got g = get_synthetic(reader, "churn" + std::to_string(i), 20000 + 1000 * size_t(i));
      if (g == Got::Right) {
        ++right;
      } else if (g == Got::Missing) {
        ++missing;
      } else {
        ++bad;
      }
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(bad, 0) << "a read saw a torn, corrupt or wrong entry";
  EXPECT_EQ(writer_errors, 0);
  EXPECT_GT(right, 0);
  EXPECT_EQ(stats_of(reader).corrupt_entries, 0u);
  std::printf("reads during eviction: %d whole, %d absent, %d torn\n", right, missing, bad);
  kjit_cache_close(reader);
  kjit_cache_close(writer);
}

}  // namespace
