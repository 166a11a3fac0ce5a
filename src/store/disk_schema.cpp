// The schema of the disk store: creating it, checking it at open, moving a database of
// another schema aside (a cache is rebuilt, never migrated); and the small tables beside
// the entries (usage counters, key/value values).
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "store/disk_store.h"
#include "store/sqlite_conn.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// The schema a new database gets (kSchemaVersion).
const char* const kSchema = R"sql(
CREATE TABLE IF NOT EXISTS entries(
  key TEXT PRIMARY KEY NOT NULL,
  target TEXT NOT NULL,
  kernels TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created INTEGER NOT NULL,
  last_used INTEGER NOT NULL,
  compile_ms REAL NOT NULL);
CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_used);
CREATE TABLE IF NOT EXISTS totals(
  id INTEGER PRIMARY KEY CHECK(id = 0),
  entries INTEGER NOT NULL,
  bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES(0, 0, 0);
CREATE TRIGGER IF NOT EXISTS entries_count_insert AFTER INSERT ON entries BEGIN
  UPDATE totals SET entries = entries + 1, bytes = bytes + new.bytes WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS entries_count_delete AFTER DELETE ON entries BEGIN
  UPDATE totals SET entries = entries - 1, bytes = bytes - old.bytes WHERE id = 0;
END;
CREATE TABLE IF NOT EXISTS claims(
  key TEXT PRIMARY KEY NOT NULL,
  owner TEXT NOT NULL,
  started INTEGER NOT NULL,
  failure TEXT);
CREATE TABLE IF NOT EXISTS kv(
  ns TEXT NOT NULL,
  key TEXT NOT NULL,
  value BLOB NOT NULL,
  updated INTEGER NOT NULL,
  PRIMARY KEY(ns, key));
CREATE TABLE IF NOT EXISTS counters(
  name TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS doomed(
  key TEXT PRIMARY KEY NOT NULL);
)sql";

int read_int(SqliteConn& c, const char* sql) {
  sqlite3_stmt* s = c.stmt(sql);
  c.step(s, sql);
  const int v = sqlite3_column_int(s, 0);
  sqlite3_reset(s);
  return v;
}

// Hash of the schema's text (tables, indexes, triggers), its rows taken in (type, name)
// order. Sorted here rather than by ORDER BY, which would bring SQLite's sorter into every
// process's first open for a dozen rows.
std::string schema_fingerprint(SqliteConn& c) {
  sqlite3_stmt* s = c.stmt("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master");
  std::vector<std::array<std::string, 4>> rows;
  while (c.step(s, "read schema") == SQLITE_ROW) {
    rows.push_back({col_text(s, 0), col_text(s, 1), col_text(s, 2), col_text(s, 3)});
  }
  sqlite3_reset(s);
  // SQLite's ORDER BY on these text columns compares bytes (BINARY), as std::string does.
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a[0] != b[0] ? a[0] < b[0] : a[1] < b[1]; });
  Sha256 h;
  for (const auto& row : rows) {
    for (const std::string& field : row) h.field(field);
  }
  return to_hex(h.finish());
}

// What the file says about itself, read in one snapshot.
struct SchemaState {
  int app = 0, version = 0, tables = 0;
  bool has_record = false;
  std::string fingerprint, recorded;
};

SchemaState read_schema_state(SqliteConn& c) {
  // One snapshot: read separately, another process creating the schema between the reads
  // makes a fresh kjit database look like a foreign one (no application id, some tables).
  SchemaState st;
  Txn read(c, false);
  st.app = read_int(c, "PRAGMA application_id");
  st.version = read_int(c, "PRAGMA user_version");
  // Only a file without kjit's application id needs it (new, or someone else's).
  if (st.app == 0) st.tables = read_int(c, "SELECT count(*) FROM sqlite_master");
  if (st.version == DiskStore::kSchemaVersion) {
    st.fingerprint = schema_fingerprint(c);
    sqlite3_stmt* s = c.stmt("SELECT value FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'");
    if (c.step(s, "read schema fingerprint") == SQLITE_ROW) {
      st.has_record = true;
      st.recorded = col_text(s, 0);
    }
    sqlite3_reset(s);
  }
  read.commit();
  return st;
}

// A new database gets kSchema, inside the caller's write transaction.
void create_schema(SqliteConn& c) {
  c.exec(kSchema, "create schema");
  c.exec("PRAGMA application_id=1802135924", "set application id");
  c.exec(("PRAGMA user_version=" + std::to_string(DiskStore::kSchemaVersion)).c_str(),
         "set schema version");
}

}  // namespace

bool DiskStore::initialise_schema(Conn& c, bool last_try) {
  const SchemaState st = read_schema_state(c);
  // The schema's text (tables, indexes, triggers) is what kjit created: a byte changed in
  // it would otherwise surface later as unexplained SQL errors, or worse, a trigger that
  // still parses but counts wrongly.
  if (st.has_record && st.recorded != st.fingerprint) {
    throw DatabaseCorrupt("cache database " + path_ + " has a damaged schema");
  }
  if (st.app != 0 && st.app != kApplicationId) {
    throw DatabaseCorrupt("cache database " + path_ + " belongs to another application");
  }
  if (st.app == 0 && st.tables > 0) {
    throw DatabaseCorrupt("cache database " + path_ + " is not a kjit database");
  }
  if (st.version > kSchemaVersion) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " + std::to_string(st.version) +
                               " from a newer kjit; this kjit reads " +
                               std::to_string(kSchemaVersion));
  }
  // Another process moves this file aside (it marked it first): open the new one.
  if (st.version == kMovedAside && !last_try) return false;
  if (st.version == kSchemaVersion && (st.has_record || read_only_)) return true;
  if (read_only_ && st.version != 0) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " + std::to_string(st.version) +
                               " from an older kjit and is read-only here; open it once with "
                               "write access to rebuild the cache (schema " +
                               std::to_string(kSchemaVersion) + ")");
  }
  if (read_only_) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is not initialised and is read-only");
  }
  if (st.version != 0 && st.version != kSchemaVersion) {
    move_aside_foreign(c, st.version);  // by this process or, meanwhile, another
    return false;
  }
  Txn txn(c, true);
  // Re-read under the write lock: another process may have initialised it meanwhile (only
  // the record may be missing then), or marked it to be moved aside.
  const int found = read_int(c, "PRAGMA user_version");
  if (found != 0 && found != kSchemaVersion) return false;
  if (found == 0) create_schema(c);
  // Recorded with the schema it describes.
  sqlite3_stmt* s = c.stmt(
      "INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES('meta', 'kjit:schema', ?1, ?2)");
  const std::string fp = schema_fingerprint(c);
  sqlite3_bind_text(s, 1, fp.data(), int(fp.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 2, unix_time());
  c.step(s, "record schema fingerprint");
  sqlite3_reset(s);
  txn.commit();
  return true;
}

bool DiskStore::move_aside_foreign(Conn& c, int version) {
  {
    Txn txn(c, true);
    // Under the write lock: a process that waited for it on this file finds the mark, and
    // opens the new file instead of moving that one aside too.
    if (read_int(c, "PRAGMA user_version") != version) return false;
    c.exec(("PRAGMA user_version=" + std::to_string(kMovedAside)).c_str(), "mark moved aside");
    txn.commit();
  }
  // The log emptied into the file, so that nothing of it is left for the new database.
  sqlite3_exec(c.db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  const std::string stem = path_ + ".schema" + std::to_string(version) + "-";
  std::string to = stem + std::to_string(unix_time());
  for (int i = 1; file_id(to) != ""; ++i)
    to = stem + std::to_string(unix_time()) + "-" + std::to_string(i);
  if (std::rename(path_.c_str(), to.c_str()) != 0) {
    fail(KJIT_ERROR_CACHE,
         "cache database " + path_ + " has schema " + std::to_string(version) +
             " of another kjit and could not be moved aside: " + std::strerror(errno));
  }
  std::rename((path_ + "-wal").c_str(), (to + "-wal").c_str());
  std::rename((path_ + "-shm").c_str(), (to + "-shm").c_str());
  log_info("cache database " + path_ + " has schema " + std::to_string(version) +
           " of another kjit: moved aside to " + to + " and a new cache started (its kernels " +
           "are compiled again when next used; remove " + to + " when no older kjit needs it)");
  return true;
}

namespace {

// Adds each delta to its counter, inside the caller's write transaction.
void add_counters_locked(SqliteConn& c,
                         const std::vector<std::pair<std::string, int64_t>>& deltas) {
  for (const auto& [name, delta] : deltas) {
    sqlite3_stmt* s = c.stmt(
        "INSERT INTO counters(name, value) VALUES(?1, ?2) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value");
    sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, delta);
    c.step(s, "add counters");
  }
}

// The deltas of a pending-counters log: lines "name value"; malformed lines are skipped.
std::vector<std::pair<std::string, int64_t>> parse_counter_log(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = text.substr(start, nl - start);
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0) continue;
    std::string name = line.substr(0, sp);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    const long long value = std::strtoll(line.c_str() + sp + 1, nullptr, 10);
    if (value > 0) out.emplace_back(std::move(name), int64_t(value));
  }
  return out;
}

}  // namespace

void DiskStore::add_counters(const std::vector<std::pair<std::string, int64_t>>& deltas) {
  if (read_only_ || deltas.empty()) return;
  Lease c = acquire();
  Txn txn(*c, true);
  add_counters_locked(*c, deltas);
  txn.commit();
}

void DiskStore::add_pending_counters() {
  if (read_only_) return;
  // Anything in counters/ (a log, a log taken but not added, something that is no log).
  const std::string counters_dir = join_path(dir_, "counters");
  struct stat st;
  if (::lstat(counters_dir.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {  // a link (to a directory elsewhere) or a file: never followed
    log_warn(counters_dir + " is " + file_kind(counters_dir) + ", not a directory: removed");
    remove_any(counters_dir);
    return;
  }
  const auto names = directory_names(counters_dir);
  if (!names || names->empty()) return;
  Lease c = acquire();
  Txn txn(*c, true);
  // Taken, read and removed under the write lock: two processes never add the same log. A
  // crash before the commit loses those counts (statistics), never doubles them. The reads
  // are bounded (EntryFiles::kMaxTakenBytes) and never wait long for an appender.
  for (const std::string& file : files_.take_pending_counters()) {
    std::string text, why;
    switch (files_.read_taken_counters(file, &text, &why)) {
      case EntryFiles::Taken::Busy:
        break;  // an appender still holds it: a later process adds it
      case EntryFiles::Taken::Unusable:
        log_warn("cache counters log " + file + " removed unread: " + why);
        remove_any(file);
        break;
      case EntryFiles::Taken::Read:
        if (::unlink(file.c_str()) == 0 || errno == ENOENT) {
          add_counters_locked(*c, parse_counter_log(text));
        }
        break;
    }
  }
  txn.commit();
}

std::vector<std::pair<std::string, int64_t>> DiskStore::counters() {
  Lease c = acquire();
  std::vector<std::pair<std::string, int64_t>> out;
  sqlite3_stmt* s = c->stmt("SELECT name, value FROM counters");
  while (c->step(s, "read counters") == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                     sqlite3_column_int64(s, 1));
  }
  sqlite3_reset(s);
  return out;
}

std::optional<std::string> DiskStore::get_meta(const std::string& name) {
  return files_.read_fact(name);
}

void DiskStore::set_meta(const std::string& name, const std::string& value) {
  if (read_only_) return;
  files_.write_fact(name, value);
}

std::optional<std::string> DiskStore::get_value(const std::string& ns, const std::string& key) {
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("SELECT value FROM kv WHERE ns = ?1 AND key = ?2");
  sqlite3_bind_text(s, 1, ns.data(), int(ns.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, key.data(), int(key.size()), SQLITE_STATIC);
  std::optional<std::string> out;
  if (c->step(s, "read value") == SQLITE_ROW) {
    out.emplace(static_cast<const char*>(sqlite3_column_blob(s, 0)),
                size_t(sqlite3_column_bytes(s, 0)));
  }
  sqlite3_reset(s);
  return out;
}

void DiskStore::put_value(const std::string& ns, const std::string& key, const std::string& value) {
  if (read_only_) fail(KJIT_ERROR_READ_ONLY, "cache database " + path_ + " is read-only");
  Lease c = acquire();
  sqlite3_stmt* s =
      c->stmt("INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES(?1, ?2, ?3, ?4)");
  sqlite3_bind_text(s, 1, ns.data(), int(ns.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_blob(s, 3, value.data(), int(value.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, unix_time());
  c->step(s, "write value");
}

}  // namespace kjit
