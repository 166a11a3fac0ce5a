// The persistent cache through the public C API (and the store): counters summed over
// processes, hits that never open the index, caches of other schemas rebuilt, values and
// claims of the disk store.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/claims.h"
#include "store/fact_files.h"
#include "store/index_db.h"
#include "support/cache_api.h"
#include "support/db.h"
#include "support/entry_file_edit.h"
#include "support/old_database.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using namespace kjit::test::capi;

TEST(CacheTotals, CountsOfEveryProcessAddUp) {
  TempDir dir;
  {
    Cache a(dir.path());
    compile(a.c, kSaxpySource);
    compile(a.c, kSaxpySource);
  }
  {
    Cache b(dir.path());
    EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_DISK);
    kjit_cache_stats s = b.stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.total_compiles, 1u);
    EXPECT_EQ(s.total_misses, 1u);
    EXPECT_EQ(s.total_memory_hits, 1u);
    EXPECT_EQ(s.total_disk_hits, 1u) << "this handle's unflushed hit is included";
    EXPECT_GT(s.total_compile_ms_saved, 0.0);
    EXPECT_EQ(s.remote_state, KJIT_REMOTE_NONE);
  }
  Cache c(dir.path(), /*read_only=*/true);
  compile(c.c, kSaxpySource);
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.total_disk_hits, 2u);
  EXPECT_EQ(s.total_compiles, 1u);
}

// The record of the schema that kjit keeps to notice damage: SHA-256 over the fields of
// sqlite_master, as kjit 0.1.0 computed it.
std::string schema_record(const std::string& db) {
  sqlite3* h = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h,
                               "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
                               "ORDER BY type, name",
                               -1, &s, nullptr),
            SQLITE_OK);
  kjit::Sha256 sha;
  while (sqlite3_step(s) == SQLITE_ROW) {
    for (int i = 0; i < 4; ++i) {
      const unsigned char* t = sqlite3_column_text(s, i);
      sha.field(std::string(t ? reinterpret_cast<const char*>(t) : "",
                            size_t(sqlite3_column_bytes(s, i))));
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(h);
  return kjit::to_hex(sha.finish());
}

// A database of kjit 0.1.0 in `dir` holding the entries of the cache in `from`, a fact, a
// value and a counter.
void write_release_010_database(const TempDir& dir, const TempDir& from) {
  kjit::test::write_schema3_database(db_path(dir), from.path());
  sql(db_path(dir), "INSERT INTO meta VALUES('kjit:schema', '" + schema_record(db_path(dir)) +
                        "'); INSERT INTO meta VALUES('test:fact', 'remembered'); "
                        "INSERT INTO kv VALUES('test', 'k', x'0102', 1); "
                        "INSERT INTO counters VALUES('compiles', 7);");
}

// A process that only hits never opens the index: its counts wait in a file, which the
// next process to open the index adds to the totals.
TEST(CacheTotals, CountsOfAProcessThatOnlyHitAreAddedByTheNextOpen) {
  TempDir dir;
  {
    Cache a(dir.path());
    ASSERT_EQ(compile(a.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
  }
  {
    Cache b(dir.path());
    EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_DISK);
  }
  EXPECT_TRUE(kjit::is_regular_file(dir.file("counters/pending")));
  // Eight processes that only hit, closing at once.
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
      o.directory = dir.path().c_str();
      kjit_cache* c = nullptr;
      const bool hit =
          kjit_cache_open(&o, &c) == KJIT_OK && compile(c, kSaxpySource).tier == KJIT_TIER_DISK;
      kjit_cache_close(c);
      _exit(hit ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.total_disk_hits, 9u);
  EXPECT_EQ(s.total_compiles, 1u);
  EXPECT_EQ(s.total_misses, 1u);
  EXPECT_TRUE(kjit::directory_names(dir.file("counters"))->empty()) << "added once";
  EXPECT_EQ(c.stats().total_disk_hits, 9u);
}

// The proof that a hit reads the payload file alone: with the index replaced by garbage, a
// hit is still served and the garbage left alone; the first process that needs the index
// moves it aside and indexes the files again.
TEST(Cache, HitsNeverOpenTheIndexAndANewIndexTakesTheFilesIn) {
  TempDir dir;
  Result a;
  {
    Cache c(dir.path());
    a = compile(c.c, kSaxpySource);
    ASSERT_EQ(a.status, KJIT_OK);
  }
  const std::string garbage(8192, 'g');
  write_file(db_path(dir), garbage);
  ::unlink((db_path(dir) + "-wal").c_str());
  ::unlink((db_path(dir) + "-shm").c_str());
  {
    Cache c(dir.path());
    Result b = compile(c.c, kSaxpySource);
    EXPECT_EQ(b.tier, KJIT_TIER_DISK);
    EXPECT_EQ(b.cubin, a.cubin);
  }
  EXPECT_EQ(read_file_or_die(db_path(dir)), garbage) << "a hit opened the index";
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_OK) << s.message;
  EXPECT_EQ(s.disk_entries, kjit::test::entry_files(dir.path()).size())
      << "the payload files were indexed again";
  EXPECT_GE(s.disk_entries, 1u);
  EXPECT_EQ(compile(c.c, kSaxpySource).tier, KJIT_TIER_DISK);
}

// The names in `dir` that begin with "kjit.db" (the index and its -wal, -shm; anything an
// older kjit's database became would be there too).
std::set<std::string> index_files(const TempDir& dir) {
  std::set<std::string> out;
  const std::optional<std::vector<std::string>> names = kjit::directory_names(dir.path());
  for (const std::string& name : names.value_or(std::vector<std::string>{})) {
    if (name.rfind("kjit.db", 0) == 0) out.insert(name);
  }
  return out;
}

// The tables of the index in `dir`, as plain SQLite sees them.
std::string tables_of(const TempDir& dir) {
  kjit::test::Db db(db_path(dir));
  return db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
}

const char* const kSchema6Tables = "claims\ncounters\ndoomed\nentries\nkv\ntotals\n";

// A cache of an older kjit is never migrated: its database, as kjit 0.1.0 (schema 3) and the
// versions after it (4, 5) wrote it, with entries, a fact, a value and counters, is rebuilt
// once (said once): nothing of it is read, and the new cache works as any new one.
TEST(CacheRebuild, DatabaseOfAnOlderSchemaIsRebuiltEmpty) {
  TempDir from;
  Result a;
  {
    Cache c(from.path());
    a = compile(c.c, kSaxpySource);
    ASSERT_EQ(a.status, KJIT_OK);
  }
  for (const int schema : {3, 4, 5}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir dir;
    if (schema == 3) {
      write_release_010_database(dir, from);
    } else {
      kjit::test::write_schema5_database(db_path(dir), from.path(), schema);
      sql(db_path(dir),
          "INSERT INTO kv VALUES('meta', 'test:fact', 'remembered', 1); "
          "INSERT INTO kv VALUES('test', 'k', x'0102', 1); INSERT INTO counters VALUES('compiles', "
          "7);");
    }
    LogCapture log;
    {
      Cache b(dir.path());
      kjit_cache_stats s = b.stats();
      EXPECT_EQ(s.disk_state, KJIT_DISK_OK) << s.message;
      EXPECT_EQ(s.disk_entries, 0u) << "nothing of the old cache is taken over";
      EXPECT_EQ(s.total_compiles, 0u) << "nor its counters";
      EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
    }
    {
      Cache again(dir.path());
      Result r = compile(again.c, kSaxpySource);
      EXPECT_EQ(r.tier, KJIT_TIER_DISK) << "the new cache works";
      EXPECT_EQ(r.cubin, a.cubin);
    }
    EXPECT_EQ(log.count("had schema " + std::to_string(schema) +
                        " of an older kjit: the cache was rebuilt"),
              1u)
        << "said once";
    EXPECT_EQ(log.count("migrated"), 0u);
    EXPECT_EQ(tables_of(dir), kSchema6Tables) << "the old tables are gone";
    kjit::test::Db db(db_path(dir));
    EXPECT_EQ(db.text("PRAGMA user_version"), std::to_string(kjit::IndexDb::kSchemaVersion));
    EXPECT_EQ(db.text("SELECT count(*) FROM entries"), "1") << "the new entry only";
    EXPECT_EQ(db.text("SELECT count(*) FROM kv WHERE ns = 'test'"), "0");
    EXPECT_EQ(kjit::FactFiles(dir.path()).read("test:fact"), std::nullopt)
        << "no fact read from the old tables";
    EXPECT_EQ(kjit::test::entry_files(dir.path()).size(), 1u);
    EXPECT_EQ(index_files(dir), (std::set<std::string>{"kjit.db", "kjit.db-shm", "kjit.db-wal"}));
  }
}

// Many processes opening one old cache at once: one rebuilds it, every one gets the new.
TEST(CacheRebuild, ProcessesOpeningAnOldCacheAtOnceAllGetTheNewOne) {
  TempDir from, dir;
  {
    Cache c(from.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  write_release_010_database(dir, from);
  std::vector<pid_t> kids;
  for (int i = 0; i < 6; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        kjit::IndexDb index(dir.path(), false, true);  // opening rebuilds it
        kjit::test::Db db(db_path(dir));
        const bool ok =
            db.text("PRAGMA user_version") == std::to_string(kjit::IndexDb::kSchemaVersion) &&
            db.text("SELECT count(*) FROM entries") == "0";
        _exit(ok ? 0 : 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        _exit(2);
      }
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  EXPECT_EQ(tables_of(dir), kSchema6Tables);
  Cache c(dir.path());
  EXPECT_EQ(c.stats().disk_state, KJIT_DISK_OK) << c.stats().message;
  EXPECT_EQ(compile(c.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
}

// A process that cannot write leaves an old cache as it is, and says what would rebuild it.
TEST(CacheRebuild, DatabaseOfAnOlderSchemaOpenedReadOnlySaysHowToRebuild) {
  TempDir from, dir;
  {
    Cache c(from.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  write_release_010_database(dir, from);
  const std::string old_bytes = read_file_or_die(db_path(dir));
  {
    Cache ro(dir.path(), /*read_only=*/true);
    kjit_cache_stats s = ro.stats();
    EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE) << s.message;
    EXPECT_NE(std::string(s.message).find("older kjit"), std::string::npos) << s.message;
    EXPECT_NE(std::string(s.message).find("write access"), std::string::npos) << s.message;
    EXPECT_EQ(compile(ro.c, kSaxpySource).tier, KJIT_TIER_COMPILED) << "never an old entry";
  }
  EXPECT_THROW(kjit::IndexDb(dir.path(), true, true), kjit::Error);
  EXPECT_EQ(read_file_or_die(db_path(dir)), old_bytes) << "read-only: left as it is";
}

// A database of a newer kjit is not used, and left as it is: that kjit may still use it.
TEST(CacheRebuild, DatabaseOfANewerSchemaIsLeftAlone) {
  TempDir dir;
  { kjit::IndexDb index(dir.path(), false, true); }
  {
    kjit::test::Db db(db_path(dir));
    db.exec("PRAGMA user_version=" + std::to_string(kjit::IndexDb::kSchemaVersion + 1));
  }
  Cache c(dir.path());
  kjit_cache_stats s = c.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE);
  EXPECT_NE(std::string(s.message).find("newer kjit"), std::string::npos) << s.message;
  kjit::test::Db db(db_path(dir));
  EXPECT_EQ(db.text("PRAGMA user_version"), std::to_string(kjit::IndexDb::kSchemaVersion + 1));
}

TEST(CacheTotals, NewDatabaseIsCheckpointedEveryMebibyte) {
  TempDir dir;
  {
    Cache c(dir.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  kjit::IndexDb index(dir.path(), false, true);
  const kjit::IndexDb::Settings set = index.settings();
  EXPECT_EQ(set.journal_mode, "wal");
  EXPECT_EQ(set.wal_autocheckpoint, kjit::IndexDb::kWalCheckpointBytes / set.page_size)
      << "the log is checkpointed every MiB (pages of " << set.page_size;
  Cache again(dir.path());
  EXPECT_EQ(compile(again.c, kSaxpySource).tier, KJIT_TIER_DISK);
}

// The schema fingerprint, sorted by kjit since 0.2, is the one SQLite's ORDER BY gave: a
// database whose fingerprint an older kjit recorded still opens.
TEST(CacheTotals, SchemaFingerprintIsTheOneRecordedBefore) {
  TempDir dir;
  {
    Cache c(dir.path());
    ASSERT_EQ(compile(c.c, kSaxpySource).status, KJIT_OK);
  }
  const std::string as_before = schema_record(dir.path() + "/kjit.db");
  kjit::IndexDb index(dir.path(), true, true);  // opens: the recorded fingerprint is checked
  EXPECT_EQ(kjit::test::Db(db_path(dir))
                .text("SELECT value FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'"),
            as_before);
}

TEST(DiskStoreValues, ClearDropsValuesAndKeepsFacts) {
  TempDir dir;
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  kjit::Cache store(cfg);
  const kjit::FactFiles facts(dir.path());
  facts.write("fact", "1");
  store.facts().put_value("ns", "k", "v");
  store.facts().put_value("ns", "fact", "other");
  EXPECT_EQ(facts.read("fact"), std::optional<std::string>("1"));
  store.clear();
  EXPECT_EQ(facts.read("fact"), std::optional<std::string>("1"));
  EXPECT_EQ(store.facts().get_value("ns", "k"), std::nullopt);
  EXPECT_EQ(store.facts().get_value("ns", "fact"), std::nullopt);
}

TEST(DiskStoreClaims, NobodyHoldsAKeyUntilItIsClaimed) {
  TempDir dir;
  kjit::IndexDb index(dir.path(), false, true);
  kjit::Claims store(index);
  const auto stored = [](kjit::SqliteConn&, const std::string&) { return false; };
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string key(64, 'a');
  const std::string me = std::string(host) + "|" + std::to_string(getpid()) + "|1|test";
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::None);
  EXPECT_EQ(store.try_claim(key, me, stored).state, kjit::Claim::State::Claimed);
  const kjit::Claim held = store.read(key);
  EXPECT_EQ(held.state, kjit::Claim::State::Busy);
  EXPECT_EQ(held.owner, me);
  store.release(key, me);
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::None);
  EXPECT_EQ(store.try_claim(key, me, stored).state, kjit::Claim::State::Claimed);
  store.fail(key, me, "{}");
  EXPECT_EQ(store.read(key).state, kjit::Claim::State::Failed);
}

}  // namespace
