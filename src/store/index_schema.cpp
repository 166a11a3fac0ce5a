// The schema of the index database: every part's tables, created, checked at open, and
// rebuilt when an older kjit made them (a cache is rebuilt, never migrated).
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/index_db.h"
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
  if (st.version == IndexDb::kSchemaVersion) {
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
  c.exec(("PRAGMA user_version=" + std::to_string(IndexDb::kSchemaVersion)).c_str(),
         "set schema version");
}

// Drops the tables of an older kjit's schema, inside the caller's write transaction.
void drop_foreign_schema(SqliteConn& c) {
  // Every table an older kjit made (their indexes and triggers go with them), in the
  // caller's write transaction: another process sees the old schema or the new one.
  std::vector<std::string> tables;
  sqlite3_stmt* s =
      c.stmt("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  while (c.step(s, "read the old schema") == SQLITE_ROW) tables.push_back(col_text(s, 0));
  sqlite3_reset(s);
  for (const std::string& t : tables) {
    std::string quoted = "\"";
    for (char ch : t) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    c.exec(("DROP TABLE " + quoted + "\"").c_str(), "drop the old schema");
  }
}

}  // namespace

void IndexDb::initialise_schema(SqliteConn& c) {
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
  if (st.version == kSchemaVersion && (st.has_record || read_only_)) return;
  if (read_only_ && st.version != 0) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " + std::to_string(st.version) +
                               " from an older kjit and is read-only here; open it once with "
                               "write access to rebuild the cache (schema " +
                               std::to_string(kSchemaVersion) + ")");
  }
  if (read_only_) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is not initialised and is read-only");
  }
  Txn txn(c, true);
  // Re-read under the write lock: another process may have created or rebuilt it meanwhile
  // (then only the record may be missing).
  const int found = read_int(c, "PRAGMA user_version");
  if (found != 0 && found != kSchemaVersion) drop_foreign_schema(c);
  if (found != kSchemaVersion) create_schema(c);
  // Recorded with the schema it describes.
  sqlite3_stmt* s = c.stmt(
      "INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES('meta', 'kjit:schema', ?1, ?2)");
  const std::string fp = schema_fingerprint(c);
  sqlite3_bind_text(s, 1, fp.data(), int(fp.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 2, unix_time());
  c.step(s, "record schema fingerprint");
  sqlite3_reset(s);
  txn.commit();
  if (found != 0 && found != kSchemaVersion) {
    log_info("cache database " + path_ + " had schema " + std::to_string(found) +
             " of an older kjit: the cache was rebuilt, its kernels are compiled again when "
             "next used");
    // The old entries' pages go back to the file system (best effort: another connection
    // reading the file makes it wait, and a later open need not).
    sqlite3_exec(c.db, "VACUUM", nullptr, nullptr, nullptr);
  }
}

}  // namespace kjit
