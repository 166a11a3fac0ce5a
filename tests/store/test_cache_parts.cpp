// What Cache (store/cache.h) ties together of the disk tier's parts, none of which knows
// another: an entry and the release of its claim in one transaction, the counter log
// added when the index opens, an index replaced by another process followed before a
// claim, and lookups that count kernels but not dependency manifests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "store/cache.h"
#include "support/disk_tier.h"
#include "support/test_support.h"

namespace {

using kjit::Claim;
using kjit::test::OpenTier;
using kjit::test::synthetic_entry;
using kjit::test::TempDir;

kjit::CacheConfig config(const TempDir& dir) {
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  return cfg;
}

std::string owner(const std::string& handle) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "|" + std::to_string(getpid()) + "|1|" + handle;
}

int64_t counter(kjit::DiskTier& d, const std::string& name) {
  for (const auto& [n, v] : d.counters.read()) {
    if (n == name) return v;
  }
  return 0;
}

const kjit::Claims::Stored kStoredRow = [](kjit::SqliteConn& c, const std::string& key) {
  return kjit::DiskStore::has_row_locked(c, key);
};

TEST(CacheParts, StoringAnEntryReleasesItsClaim) {
  TempDir dir;
  const kjit::Entry e = synthetic_entry("claimed");
  OpenTier tier(dir.path());
  ASSERT_EQ(tier.claims.try_claim(e.key, owner("compiler"), kStoredRow).state,
            Claim::State::Claimed);
  kjit::Cache cache(config(dir));
  EXPECT_TRUE(cache.store(std::make_shared<kjit::Entry>(e)));
  EXPECT_EQ(tier.claims.read(e.key).state, Claim::State::None);
  EXPECT_EQ(tier.claims.try_claim(e.key, owner("newcomer"), kStoredRow).state,
            Claim::State::Present);
}

TEST(CacheParts, OpeningTheIndexAddsTheCounterLog) {
  TempDir dir;
  { OpenTier create(dir.path()); }
  ASSERT_TRUE(kjit::CounterLog(dir.path()).append({{"disk_hits", 3}}));
  {
    kjit::Cache cache(config(dir));
    EXPECT_EQ(cache.stats().total_disk_hits, 3u);
  }
  OpenTier tier(dir.path());
  EXPECT_EQ(counter(tier, "disk_hits"), 3);
  EXPECT_FALSE(tier.counter_log.pending());
}

TEST(CacheParts, AClaimFollowsAnIndexAnotherProcessReplaced) {
  TempDir dir;
  kjit::Cache cache(config(dir));
  ASSERT_TRUE(cache.store(std::make_shared<kjit::Entry>(synthetic_entry("kept"))));
  {
    OpenTier other(dir.path());
    other.index.quarantine("another process found it corrupt");
  }
  const std::string key = synthetic_entry("new").key;
  bool compiled = false;
  const kjit::Outcome o = cache.get_or_compile(key, [&] {
    compiled = true;
    OpenTier now(dir.path());
    EXPECT_EQ(now.claims.read(key).state, Claim::State::Busy)
        << "the claim is in the file every process shares";
    auto e = std::make_shared<kjit::Entry>(synthetic_entry("new"));
    return kjit::Outcome{KJIT_OK, "", e, KJIT_TIER_COMPILED};
  });
  EXPECT_TRUE(compiled);
  EXPECT_EQ(o.status, KJIT_OK);
  OpenTier now(dir.path());
  EXPECT_EQ(now.entries.keys().size(), 2u) << "the payload files were indexed again";
}

TEST(CacheParts, ManifestsAreFoundButNotCountedAsHits) {
  TempDir dir;
  kjit::Entry m = synthetic_entry("manifest");
  m.ptx.clear();
  m.kernels.clear();
  m.manifest = "{\"records\":[]}";
  const kjit::Entry k = synthetic_entry("kernel");
  {
    kjit::Cache cache(config(dir));
    ASSERT_TRUE(cache.store(std::make_shared<kjit::Entry>(m)));
    ASSERT_TRUE(cache.store(std::make_shared<kjit::Entry>(k)));
  }
  kjit::Cache cache(config(dir));
  kjit::EntryPtr found = cache.lookup_manifest(m.key);
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->is_manifest());
  EXPECT_NE(cache.lookup_manifest(m.key), nullptr) << "from memory now";
  EXPECT_EQ(cache.stats().disk_hits + cache.stats().memory_hits, 0u);
  kjit_tier tier;
  ASSERT_NE(cache.lookup(k.key, &tier), nullptr);
  EXPECT_EQ(tier, KJIT_TIER_DISK);
  ASSERT_NE(cache.lookup(k.key, &tier), nullptr);
  EXPECT_EQ(tier, KJIT_TIER_MEMORY);
  const kjit::CacheStats s = cache.stats();
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.compile_us_saved, 2000u) << "1 ms each";
}

}  // namespace
