// The index database (store/index_db.h) on its own: opening and the schema, the settings
// of its connections, a corrupt file moved aside, a file replaced by another process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "store/db_error.h"
#include "store/index_db.h"
#include "support/db.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fs.h"

namespace {

using kjit::IndexDb;
using kjit::test::TempDir;

TEST(IndexDb, OpeningCreatesTheSchemaOnce) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    EXPECT_TRUE(db.opened());
    EXPECT_EQ(db.path(), dir.file("kjit.db"));
  }
  kjit::test::Db raw(dir.file("kjit.db"));
  EXPECT_EQ(raw.text("PRAGMA user_version"), std::to_string(IndexDb::kSchemaVersion));
  EXPECT_EQ(raw.text("PRAGMA application_id"), std::to_string(IndexDb::kApplicationId));
  EXPECT_EQ(raw.text("SELECT count(*) FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'"), "1");
  kjit::test::LogCapture log;
  IndexDb again(dir.path(), false, true);
  EXPECT_EQ(log.count("rebuilt"), 0u);
  EXPECT_EQ(again.integrity_problems(), "");
}

TEST(IndexDb, OpensWhenFirstNeededUnlessToldToOpenNow) {
  TempDir dir;
  IndexDb db(dir.path(), false, true, /*open_now=*/false);
  EXPECT_FALSE(db.opened());
  EXPECT_FALSE(kjit::is_regular_file(dir.file("kjit.db")));
  { IndexDb::Lease c = db.acquire(); }
  EXPECT_TRUE(db.opened());
  EXPECT_TRUE(kjit::is_regular_file(dir.file("kjit.db")));
}

TEST(IndexDb, ConnectionsRunInWalWithACheckpointEveryMebibyte) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  const IndexDb::Settings s = db.settings();
  EXPECT_EQ(s.journal_mode, "wal");
  ASSERT_GT(s.page_size, 0);
  EXPECT_EQ(s.wal_autocheckpoint, IndexDb::kWalCheckpointBytes / s.page_size);
  IndexDb rollback(dir.path() + "/other", false, false, /*open_now=*/false);
  kjit::make_directories(dir.path() + "/other", 0700);
  EXPECT_EQ(rollback.settings().journal_mode, "delete");
}

TEST(IndexDb, AMissingDatabaseOpenedReadOnlyIsAClearError) {
  TempDir dir;
  try {
    IndexDb db(dir.path(), /*read_only=*/true, true);
    FAIL() << "opened";
  } catch (const kjit::Error& e) {
    EXPECT_EQ(e.status(), KJIT_ERROR_CACHE);
  }
}

TEST(IndexDb, AFileOfAnotherKindIsCorrupt) {
  TempDir dir;
  kjit::test::write_file(dir.file("kjit.db"), std::string(8192, 'x'));
  EXPECT_THROW(IndexDb(dir.path(), false, true), kjit::DatabaseCorrupt);
  TempDir other;
  {
    kjit::test::Db raw(other.file("kjit.db"), /*create=*/true);
    ASSERT_TRUE(raw.exec("CREATE TABLE theirs(x)"));
  }
  EXPECT_THROW(IndexDb(other.path(), false, true), kjit::DatabaseCorrupt);
}

TEST(IndexDb, QuarantineMovesTheFileAsideAndStartsAFreshOne) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  {
    IndexDb::Lease c = db.acquire();
    c->exec("INSERT INTO counters(name, value) VALUES('x', 1)", "test");
  }
  const std::string aside = db.quarantine("a test");
  ASSERT_FALSE(aside.empty());
  EXPECT_TRUE(kjit::is_regular_file(aside));
  EXPECT_EQ(kjit::test::Db(aside).text("SELECT value FROM counters"), "1");
  EXPECT_EQ(kjit::test::Db(db.path()).text("SELECT count(*) FROM counters"), "0");
  EXPECT_FALSE(db.replaced());
  EXPECT_EQ(db.integrity_problems(), "");
}

TEST(IndexDb, QuarantineOfAReadOnlyIndexMovesNothing) {
  TempDir dir;
  { IndexDb create(dir.path(), false, true); }
  IndexDb db(dir.path(), /*read_only=*/true, true);
  EXPECT_THROW(db.quarantine("a test"), kjit::Error);
  EXPECT_TRUE(kjit::is_regular_file(dir.file("kjit.db")));
}

TEST(IndexDb, AFileReplacedByAnotherProcessIsFollowed) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  EXPECT_FALSE(db.replaced());
  IndexDb other(dir.path(), false, true);
  other.quarantine("another process found it corrupt");
  EXPECT_TRUE(db.replaced());
  db.reopen();
  EXPECT_FALSE(db.replaced());
  {
    IndexDb::Lease c = db.acquire();
    c->exec("INSERT INTO counters(name, value) VALUES('seen', 1)", "test");
  }
  EXPECT_EQ(kjit::test::Db(dir.file("kjit.db")).text("SELECT value FROM counters"), "1")
      << "written to the file both now share";
}

TEST(IndexDb, IntegrityProblemsAreReported) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    IndexDb::Lease c = db.acquire();
    for (int i = 0; i < 400; ++i) {
      c->exec(("INSERT INTO counters(name, value) VALUES('counter number " + std::to_string(i) +
               "', 1)")
                  .c_str(),
              "test");
    }
    c->exec("PRAGMA wal_checkpoint(TRUNCATE)", "test");
  }
  // Damage the counters table's root page (an interior page over its 400 rows).
  const std::string path = dir.file("kjit.db");
  const size_t root = std::stoul(
      kjit::test::Db(path).text("SELECT rootpage FROM sqlite_master WHERE name = 'counters'"));
  std::string bytes = kjit::test::read_file_or_die(path);
  ASSERT_GE(bytes.size(), root * 4096);
  for (size_t i = (root - 1) * 4096; i < root * 4096; ++i) bytes[i] = char(0x5a);
  kjit::test::write_file(path, bytes);
  std::string problems;
  try {
    IndexDb db(dir.path(), false, true);
    problems = db.integrity_problems();
  } catch (const kjit::DatabaseCorrupt& e) {
    problems = e.message();
  }
  EXPECT_NE(problems, "");
}

}  // namespace
