// The entries of the disk tier (store/disk_store.h) on their own: payload files and their
// rows in the index, stored together, evicted, cleared and brought back in step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "store/disk_store.h"
#include "store/index_db.h"
#include "support/db.h"
#include "support/disk_tier.h"
#include "support/entry_file_edit.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fs.h"

namespace {

using kjit::DiskStore;
using kjit::IndexDb;
using kjit::test::synthetic_entry;
using kjit::test::TempDir;

std::string payload(const TempDir& dir, const std::string& key) {
  return dir.file("entries/" + key.substr(0, 2) + "/" + key);
}

TEST(DiskStore, StoresReadsListsAndRemoves) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  const kjit::Entry e = synthetic_entry("one");
  EXPECT_EQ(store.get(e.key), nullptr);
  EXPECT_EQ(store.put(e, 0), 0u);
  const kjit::EntryPtr got = store.get(e.key);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->ptx, e.ptx);
  EXPECT_EQ(got->kernels, e.kernels);
  uint64_t entries = 0, bytes = 0;
  store.totals(&entries, &bytes);
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(bytes, e.bytes());
  EXPECT_EQ(store.keys(), std::vector<std::string>{e.key});
  std::vector<kjit::EntryInfo> listed;
  store.list([&](const kjit::EntryInfo& i) {
    listed.push_back(i);
    return false;
  });
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].kernels, "k_one");
  EXPECT_TRUE(store.remove(e.key));
  EXPECT_FALSE(store.remove(e.key));
  EXPECT_EQ(store.get(e.key), nullptr);
  EXPECT_FALSE(kjit::is_regular_file(payload(dir, e.key)));
}

TEST(DiskStore, HitsNeedNoIndex) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    DiskStore(db).put(synthetic_entry("hit"), 0);
  }
  IndexDb db(dir.path(), false, true, /*open_now=*/false);
  DiskStore store(db);
  EXPECT_NE(store.get(synthetic_entry("hit").key), nullptr);
  EXPECT_FALSE(db.opened());
}

TEST(DiskStore, TheCallersWritesShareTheStoringTransaction) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  const kjit::Entry e = synthetic_entry("also");
  bool row_seen = false;
  store.put(e, 0, [&](kjit::SqliteConn& c) { row_seen = DiskStore::has_row_locked(c, e.key); });
  EXPECT_TRUE(row_seen) << "runs after the row is written, before the commit";
  const kjit::Entry f = synthetic_entry("rolled back");
  EXPECT_THROW(store.put(f, 0, [](kjit::SqliteConn&) { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(store.get(f.key), nullptr) << "neither its row nor its file";
  EXPECT_FALSE(kjit::is_regular_file(payload(dir, f.key)));
  EXPECT_EQ(store.keys(), std::vector<std::string>{e.key});
}

TEST(DiskStore, EvictsTheLeastRecentlyUsedPastItsBound) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  const uint64_t size = 4096, max = 10 * size;
  uint64_t evicted = 0;
  for (int i = 0; i < 20; ++i) {
    evicted += store.put(synthetic_entry("e" + std::to_string(i), size), max);
  }
  uint64_t entries = 0, bytes = 0;
  store.totals(&entries, &bytes);
  EXPECT_GT(evicted, 0u);
  EXPECT_LE(bytes, max);
  EXPECT_EQ(entries + evicted, 20u);
  EXPECT_NE(store.get(synthetic_entry("e19").key), nullptr) << "the newest stays";
  EXPECT_EQ(store.prune(0), entries);
  store.totals(&entries, &bytes);
  EXPECT_EQ(entries, 0u);
  EXPECT_EQ(store.put(synthetic_entry("huge", 2 * max), max), 0u);
  EXPECT_EQ(store.get(synthetic_entry("huge").key), nullptr) << "larger than the bound";
}

TEST(DiskStore, ClearRemovesRowsAndFiles) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  for (int i = 0; i < 3; ++i) store.put(synthetic_entry("c" + std::to_string(i)), 0);
  store.clear();
  EXPECT_TRUE(store.keys().empty());
  EXPECT_EQ(kjit::test::entry_files(dir.path()).size(), 0u);
}

TEST(DiskStore, ReconcileBringsIndexAndFilesInStep) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  const kjit::Entry kept = synthetic_entry("kept"), lost = synthetic_entry("lost");
  store.put(kept, 0);
  store.put(lost, 0);
  ASSERT_EQ(::unlink(payload(dir, lost.key).c_str()), 0);  // a row without its file
  ASSERT_TRUE(kjit::test::Db(db.path()).exec("DELETE FROM entries WHERE key = '" + kept.key +
                                             "'"));  // a file without its row
  const DiskStore::Reconciled r = store.reconcile();
  EXPECT_EQ(r.rows_dropped, 1u);
  EXPECT_EQ(r.files_adopted, 1u);
  EXPECT_EQ(store.keys(), std::vector<std::string>{kept.key});
}

TEST(DiskStore, AnEmptyIndexBesidePayloadFilesAdoptsThem) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    DiskStore store(db);
    for (int i = 0; i < 3; ++i) store.put(synthetic_entry("o" + std::to_string(i)), 0);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((dir.file("kjit.db") + suffix).c_str());
  IndexDb db(dir.path(), false, true);
  DiskStore store(db);
  EXPECT_EQ(store.adopt_if_orphaned().files_adopted, 3u);
  EXPECT_EQ(store.keys().size(), 3u);
  EXPECT_EQ(store.adopt_if_orphaned().files_adopted, 0u) << "once";
}

TEST(DiskStore, AReadOnlyStoreReadsAndRefusesWrites) {
  TempDir dir;
  const kjit::Entry e = synthetic_entry("ro");
  {
    IndexDb db(dir.path(), false, true);
    DiskStore(db).put(e, 0);
  }
  IndexDb db(dir.path(), /*read_only=*/true, true);
  DiskStore store(db);
  EXPECT_TRUE(store.read_only());
  EXPECT_NE(store.get(e.key), nullptr);
  for (auto write :
       {+[](DiskStore& s) { s.put(synthetic_entry("new"), 0); }, +[](DiskStore& s) { s.clear(); },
        +[](DiskStore& s) { s.remove(synthetic_entry("ro").key); }}) {
    try {
      write(store);
      ADD_FAILURE() << "written";
    } catch (const kjit::Error& err) {
      EXPECT_EQ(err.status(), KJIT_ERROR_READ_ONLY);
    }
  }
}

TEST(DiskStore, AKeyThatIsNoKeyIsRefused) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  kjit::Entry e = synthetic_entry("bad");
  e.key = "../../etc/passwd";
  try {
    DiskStore(db).put(e, 0);
    FAIL() << "stored";
  } catch (const kjit::Error& err) {
    EXPECT_EQ(err.status(), KJIT_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
