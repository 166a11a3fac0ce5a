// Entries of the disk tier: reading them (from their payload files), storing, removing,
// evicting the least recently used, and bringing the index and the files back in step.
#include "store/disk_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "util/checksum.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"
#include "util/sha256.h"

namespace kjit {

DiskStore::DiskStore(IndexDb& db) : db_(db), files_(db.dir()) {}

EntryPtr DiskStore::get(const std::string& key) {
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  std::string why;
  switch (files_.read(key, entry.get(), !read_only(), &why)) {
    case EntryFiles::Read::Missing:
      return nullptr;
    case EntryFiles::Read::Corrupt:
      discard_corrupt(key, why);
    case EntryFiles::Read::Ok:
      break;
  }
  return entry;
}

void DiskStore::discard_corrupt(const std::string& key, const std::string& why) {
  std::string outcome = "not removed: the cache is read-only";
  if (!read_only()) {
    try {
      remove(key);
      struct stat st;
      outcome = ::lstat(files_.path(key).c_str(), &st) == 0
                    ? "could not be removed (" + file_kind(files_.path(key)) + " stays)"
                    : "removed";
    } catch (const std::exception& e) {
      outcome = std::string("could not be removed: ") + e.what();
    }
  }
  log_warn("cache entry " + key + " in " + path() + " is corrupt (" + why + "); " + outcome);
  fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry " + key + " is corrupt: " + why);
}

bool DiskStore::delete_locked(SqliteConn& c, const std::string& key) {
  sqlite3_stmt* s = c.stmt("DELETE FROM entries WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  c.step(s, "delete entry");
  const bool existed = sqlite3_changes(c.db) > 0;
  // The file goes in a later write transaction (purge_locked): removed in this one, a
  // process killed before the commit would leave the row without its file; removed after
  // the commit, outside the lock, it could be the file another writer just stored again.
  s = c.stmt("INSERT OR IGNORE INTO doomed(key) VALUES(?1)");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  c.step(s, "doom a file");
  return existed;
}

bool DiskStore::has_row_locked(SqliteConn& c, const std::string& key) {
  sqlite3_stmt* s = c.stmt("SELECT 1 FROM entries WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  const bool found = c.step(s, "find entry") == SQLITE_ROW;
  sqlite3_reset(s);
  return found;
}

void DiskStore::purge_locked(SqliteConn& c) {
  sqlite3_stmt* s = c.stmt("SELECT key FROM doomed");
  std::vector<std::string> keys;
  while (c.step(s, "list doomed files") == SQLITE_ROW) keys.push_back(col_text(s, 0));
  sqlite3_reset(s);
  if (keys.empty()) return;
  // Rows deleted by a committed transaction: unless the key was stored again since (it has
  // a row, and its new file), its file goes. A crash here leaves `doomed` as it was.
  for (const std::string& key : keys) {
    if (!has_row_locked(c, key)) files_.remove(key);
  }
  c.exec("DELETE FROM doomed", "forget doomed files");
}

void DiskStore::purge() {
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  purge_locked(*c);
  txn.commit();
}

void DiskStore::insert_row(SqliteConn& c, const Entry& e, int64_t created, int64_t last_used) {
  std::string kernels;
  for (const auto& k : e.kernels) kernels += (kernels.empty() ? "" : ",") + k;
  sqlite3_stmt* s = c.stmt(
      "INSERT INTO entries(key, target, kernels, bytes, created, last_used, "
      "compile_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  sqlite3_bind_text(s, 1, e.key.data(), int(e.key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, e.target.data(), int(e.target.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 3, kernels.data(), int(kernels.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, int64_t(e.bytes()));
  sqlite3_bind_int64(s, 5, created);
  sqlite3_bind_int64(s, 6, last_used);
  sqlite3_bind_double(s, 7, e.compile_ms);
  c.step(s, "insert entry");
}

uint64_t DiskStore::put(const Entry& e, uint64_t max_bytes, const AlsoLocked& also) {
  if (read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + path() + " is read-only");
  if (!is_hex_key(e.key)) {
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "cache entry key '" + e.key + "' is not 64 lowercase hex digits");
  }
  if (max_bytes > 0 && e.bytes() > max_bytes) {
    // Larger than the whole cache may be: kept, it would stay past this store (the entry
    // being stored is never evicted), or push out everything else. Not stored; a copy
    // stored before goes.
    log_info("cache entry " + e.key + " (" + std::to_string(e.bytes()) +
             " bytes) is larger than the cache's size bound (" + std::to_string(max_bytes) +
             " bytes): not stored");
    remove(e.key);
    return 0;
  }
  const int64_t now = unix_time();
  const int64_t created = e.created ? e.created : now;
  // Written before the lock is taken; only the rename happens under it.
  std::string temp = files_.write_temp(e, created);
  uint64_t evicted = 0;
  try {
    IndexDb::Lease c = db_.acquire();
    Txn txn(*c, true);
    purge_locked(*c);  // files of entries deleted before (the file of `e` among them)
    sqlite3_stmt* s = c->stmt("DELETE FROM entries WHERE key = ?1");
    sqlite3_bind_text(s, 1, e.key.data(), int(e.key.size()), SQLITE_STATIC);
    c->step(s, "delete entry");
    insert_row(*c, e, created, now);
    if (also) also(*c);
    if (max_bytes > 0) {
      uint64_t bytes = 0;
      s = c->stmt("SELECT bytes FROM totals WHERE id = 0");
      if (c->step(s, "read totals") == SQLITE_ROW) bytes = uint64_t(sqlite3_column_int64(s, 0));
      sqlite3_reset(s);
      if (bytes > max_bytes) evicted = evict_locked(*c, max_bytes - max_bytes / 5, e.key);
    }
    // Last, so that nothing after it can fail but the commit: a file in place whose row
    // was rolled back is still a sound entry (reconcile() indexes it).
    files_.install(temp, e.key);
    temp.clear();
    txn.commit();
  } catch (...) {
    if (!temp.empty()) EntryFiles::remove_temp(temp);
    throw;
  }
  if (evicted) purge();  // the evicted entries' files
  return evicted;
}

uint64_t DiskStore::evict_locked(SqliteConn& c, uint64_t target_bytes, const std::string& keep) {
  uint64_t removed = 0;
  auto total_bytes = [&] {
    sqlite3_stmt* s = c.stmt("SELECT bytes FROM totals WHERE id = 0");
    uint64_t bytes = 0;
    if (c.step(s, "read totals") == SQLITE_ROW) bytes = uint64_t(sqlite3_column_int64(s, 0));
    sqlite3_reset(s);
    return bytes;
  };
  for (uint64_t bytes = total_bytes(); bytes > target_bytes;) {
    // Least recently used first; among equal times (seconds), the oldest insert first.
    sqlite3_stmt* s =
        c.stmt("SELECT key, last_used FROM entries ORDER BY last_used ASC, rowid ASC LIMIT 16");
    std::vector<std::pair<std::string, int64_t>> candidates;
    while (c.step(s, "select victims") == SQLITE_ROW) {
      candidates.emplace_back(col_text(s, 0), sqlite3_column_int64(s, 1));
    }
    sqlite3_reset(s);
    bool progressed = false;
    for (const auto& [key, row_time] : candidates) {
      if (key == keep) continue;  // the entry being stored
      progressed = true;
      // Hits record their use in the file's time (EntryFiles::read): a candidate used
      // since its row was written takes that time and stays for now.
      const int64_t file_time = files_.last_use(key);
      if (file_time > row_time) {
        s = c.stmt("UPDATE entries SET last_used = ?2 WHERE key = ?1");
        sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, file_time);
        c.step(s, "record last use");
        continue;
      }
      delete_locked(c, key);
      ++removed;
      if ((bytes = total_bytes()) <= target_bytes) break;
    }
    if (!progressed) break;
  }
  return removed;
}

bool DiskStore::remove(const std::string& key) {
  if (read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  struct stat st;
  const bool existed = delete_locked(*c, key) || ::lstat(files_.path(key).c_str(), &st) == 0;
  txn.commit();
  purge();
  return existed;
}

void DiskStore::clear() {
  if (read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  c->exec("DELETE FROM entries", "clear");
  txn.commit();
  // Then every file without a row, under the lock (a file stored since has its row).
  Txn purge(*c, true);
  c->exec("DELETE FROM doomed", "forget doomed files");
  files_.for_each([&](const std::string& key) {
    if (!has_row_locked(*c, key)) files_.remove(key);
    return false;
  });
  files_.remove_stale_temps(0);
  purge.commit();
}

uint64_t DiskStore::prune(uint64_t max_bytes) {
  if (read_only()) fail(KJIT_ERROR_READ_ONLY, "cache database " + path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  const uint64_t removed = evict_locked(*c, max_bytes);
  txn.commit();
  purge();
  return removed;
}

void DiskStore::totals(uint64_t* entries, uint64_t* bytes) {
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s = c->stmt("SELECT entries, bytes FROM totals WHERE id = 0");
  *entries = *bytes = 0;
  if (c->step(s, "read totals") == SQLITE_ROW) {
    *entries = uint64_t(sqlite3_column_int64(s, 0));
    *bytes = uint64_t(sqlite3_column_int64(s, 1));
  }
  sqlite3_reset(s);
}

void DiskStore::list(const std::function<bool(const EntryInfo&)>& fn) {
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, false);
  sqlite3_stmt* s = c->stmt(
      "SELECT key, target, kernels, bytes, created, last_used, compile_ms FROM entries "
      "ORDER BY last_used DESC, created DESC");
  while (c->step(s, "list entries") == SQLITE_ROW) {
    EntryInfo info;
    info.key = col_text(s, 0);
    info.target = col_text(s, 1);
    info.kernels = col_text(s, 2);
    info.bytes = uint64_t(sqlite3_column_int64(s, 3));
    info.created = sqlite3_column_int64(s, 4);
    // A hit records its use in the file (EntryFiles::read); the row learns it at eviction.
    info.last_used = std::max<int64_t>(sqlite3_column_int64(s, 5), files_.last_use(info.key));
    info.compile_ms = sqlite3_column_double(s, 6);
    if (fn(info)) break;
  }
  sqlite3_reset(s);
  txn.commit();
}

std::vector<std::string> DiskStore::keys() {
  std::vector<std::string> out;
  list([&](const EntryInfo& i) {
    out.push_back(i.key);
    return false;
  });
  return out;
}

DiskStore::Reconciled DiskStore::adopt_if_orphaned() {
  if (read_only()) return {};
  files_.sweep_stale_temps();
  uint64_t entries = 0, bytes = 0;
  totals(&entries, &bytes);
  if (entries > 0 || !files_.any_payload()) return {};
  // An index without rows beside payload files: the index was deleted or replaced (the
  // files stay hits, but without rows they are neither counted, listed nor evicted).
  const Reconciled r = reconcile();
  if (r.files_adopted) {
    log_info("cache index " + path() + " was empty beside " + std::to_string(r.files_adopted) +
             " payload file(s): indexed them again");
  }
  return r;
}

DiskStore::Reconciled DiskStore::reconcile() {
  Reconciled r;
  if (read_only()) return r;
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  purge_locked(*c);  // files whose rows went are not indexed again
  std::unordered_set<std::string> rows;
  sqlite3_stmt* s = c->stmt("SELECT key FROM entries");
  while (c->step(s, "list keys") == SQLITE_ROW) rows.insert(col_text(s, 0));
  sqlite3_reset(s);
  for (const std::string& key : rows) {
    struct stat st;
    if (::lstat(files_.path(key).c_str(), &st) == 0 && S_ISREG(st.st_mode)) continue;
    s = c->stmt("DELETE FROM entries WHERE key = ?1");
    sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
    c->step(s, "delete entry");
    ++r.rows_dropped;
  }
  files_.for_each([&](const std::string& key) {
    if (rows.count(key)) return false;
    Entry e;
    e.key = key;
    std::string why;
    const EntryFiles::Read read = files_.read(key, &e, false, &why);
    if (read == EntryFiles::Read::Ok) {
      insert_row(*c, e, e.created ? e.created : e.last_used, e.last_used);
      ++r.files_adopted;
    } else if (read == EntryFiles::Read::Corrupt) {
      if (files_.remove(key)) {
        log_warn("cache entry file " + files_.path(key) + " is corrupt (" + why + "); removed");
        ++r.files_removed;
      } else {
        log_warn("cache entry file " + files_.path(key) + " is corrupt (" + why +
                 ") and could not be removed: " + std::strerror(errno));
        ++r.files_kept;
      }
    }
    return false;
  });
  // Temporaries of writers that died are no entries: counted apart.
  r.temps_removed += files_.remove_stale_temps(EntryFiles::kStaleTempSeconds);
  txn.commit();
  return r;
}

}  // namespace kjit
