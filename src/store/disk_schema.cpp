// The schema of the disk store: creating it, checking it at open, migrating older ones;
// and the small tables beside the entries (usage counters, key/value facts).
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "store/disk_store.h"
#include "store/sqlite_conn.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

namespace kjit {
namespace {

const char* const kSchema = R"sql(
CREATE TABLE IF NOT EXISTS entries(
  key TEXT PRIMARY KEY NOT NULL,
  target TEXT NOT NULL,
  kernels TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created INTEGER NOT NULL,
  last_used INTEGER NOT NULL,
  compile_ms REAL NOT NULL,
  meta TEXT NOT NULL,
  meta_sum BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_used);
CREATE TABLE IF NOT EXISTS blobs(
  key TEXT NOT NULL,
  kind INTEGER NOT NULL,
  sum BLOB NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(key, kind));
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

// Where the schema fingerprint is recorded: with the other facts, in `meta` up to schema 3.
const char* fingerprint_query(int version) {
  return version <= 3 ? "SELECT value FROM meta WHERE name = 'kjit:schema'"
                      : "SELECT value FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'";
}

// What the file says about itself, read in one snapshot.
struct SchemaState {
  int app = 0, version = 0, tables = 0;
  bool has_record = false;
  std::string fingerprint, recorded;
};

// The fingerprint is checked for this schema and for 3, which is read or migrated as it is.
SchemaState read_schema_state(SqliteConn& c) {
  // One snapshot: read separately, another process creating the schema between the reads
  // makes a fresh kjit database look like a foreign one (no application id, some tables).
  SchemaState st;
  Txn read(c, false);
  st.app = read_int(c, "PRAGMA application_id");
  st.version = read_int(c, "PRAGMA user_version");
  // Only a file without kjit's application id needs it (new, or someone else's).
  if (st.app == 0) st.tables = read_int(c, "SELECT count(*) FROM sqlite_master");
  if (st.version == DiskStore::kSchemaVersion || st.version == 3) {
    st.fingerprint = schema_fingerprint(c);
    sqlite3_stmt* s = c.stmt(fingerprint_query(st.version));
    if (c.step(s, "read schema fingerprint") == SQLITE_ROW) {
      st.has_record = true;
      st.recorded = col_text(s, 0);
    }
    sqlite3_reset(s);
  }
  read.commit();
  return st;
}

// Migrations from `version` to kSchemaVersion, one schema version at a time, inside the
// caller's write transaction. Returns the entries dropped on the way.
uint64_t migrate(SqliteConn& c, int version) {
  uint64_t dropped = 0;
  if (version == 0) {
    c.exec(kSchema, "create schema");
    c.exec("PRAGMA application_id=1802135924", "set application id");
    version = 1;
  }
  if (version == 1) {
    c.exec(
        "CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY NOT NULL, "
        "value INTEGER NOT NULL)",
        "migrate schema 1 -> 2");
    version = 2;
  }
  if (version == 2) {
    // Schema 2 checksums covered the bytes only: a row moved to another key still verified
    // and would hand out another kernel's code. Such entries cannot be trusted; they go
    // (recompiled when next used), and so do claims on them. Counters, values and the
    // toolchain facts stay.
    dropped = uint64_t(read_int(c, "SELECT count(*) FROM entries"));
    c.exec("DELETE FROM blobs; DELETE FROM entries; DELETE FROM claims;", "migrate schema 2 -> 3");
    version = 3;
  }
  if (version == 3) {
    // The facts of `meta` join the values in `kv`, under the namespace 'meta'.
    if (read_int(c, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'")) {
      c.exec(
          "INSERT OR REPLACE INTO kv(ns, key, value, updated) "
          "SELECT 'meta', name, value, CAST(strftime('%s', 'now') AS INTEGER) FROM meta; "
          "DROP TABLE meta;",
          "migrate schema 3 -> 4");
    }
    version = 4;
  }
  if (version == 4) {
    // Entries of format 2 may hold code that NVRTC compiled from a precompiled header made
    // before a header edit (their key is right, their code old). Their keys are no longer
    // looked up (the format is in every key); they go now rather than with age.
    const char* const kOld = "substr(meta, 1, 12) != '{\"format\":3,'";
    dropped +=
        uint64_t(read_int(c, (std::string("SELECT count(*) FROM entries WHERE ") + kOld).c_str()));
    c.exec((std::string("DELETE FROM entries WHERE ") + kOld +
            "; DELETE FROM blobs WHERE key NOT IN (SELECT key FROM entries); DELETE FROM claims;")
               .c_str(),
           "migrate schema 4 -> 5");
    version = 5;
  }
  return dropped;
}

}  // namespace

void DiskStore::initialise_schema(Conn& c) {
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
  legacy_meta_ = read_only_ && st.version == 3;
  if (legacy_meta_) return;  // schema 3 differs only where the facts are kept
  if (st.version == kSchemaVersion && (st.has_record || read_only_)) return;
  if (read_only_ && st.version > 0) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " + std::to_string(st.version) +
                               " from an older kjit and is read-only here; open it once with "
                               "write access to migrate it to schema " +
                               std::to_string(kSchemaVersion));
  }
  if (read_only_) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is not initialised and is read-only");
  }
  Txn txn(c, true);
  // Re-read under the write lock: another process may have initialised it meanwhile.
  const int found = read_int(c, "PRAGMA user_version");
  const uint64_t dropped = migrate(c, found);
  c.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str(), "set schema version");
  // Recorded with the schema it describes (also for databases from before the record).
  sqlite3_stmt* s = c.stmt(
      "INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES('meta', 'kjit:schema', ?1, ?2)");
  const std::string fp = schema_fingerprint(c);
  sqlite3_bind_text(s, 1, fp.data(), int(fp.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 2, unix_time());
  c.step(s, "record schema fingerprint");
  sqlite3_reset(s);
  txn.commit();
  if (found > 0 && found <= 2) {  // entries of schema 1 and 2 were dropped
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) + " to " +
             std::to_string(kSchemaVersion) + ": dropped " + std::to_string(dropped) +
             " entries written by an older kjit (their checksums were not bound to their "
             "keys); they are compiled again when next used");
  } else if (found > 0 && dropped > 0) {
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) + " to " +
             std::to_string(kSchemaVersion) + ": dropped " + std::to_string(dropped) +
             " entries written by an older kjit (they may have been compiled from a stale "
             "precompiled header); they are compiled again when next used");
  }
}

void DiskStore::add_counters(const std::vector<std::pair<std::string, int64_t>>& deltas) {
  if (read_only_ || deltas.empty()) return;
  Lease c = acquire();
  Txn txn(*c, true);
  for (const auto& [name, delta] : deltas) {
    sqlite3_stmt* s = c->stmt(
        "INSERT INTO counters(name, value) VALUES(?1, ?2) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value");
    sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, delta);
    c->step(s, "add counters");
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
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt(legacy_meta_ ? "SELECT value FROM meta WHERE name = ?1"
                                         : "SELECT value FROM kv WHERE ns = 'meta' AND key = ?1");
  sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  std::optional<std::string> out;
  if (c->step(s, "read meta") == SQLITE_ROW) out = col_text(s, 0);
  sqlite3_reset(s);
  return out;
}

void DiskStore::set_meta(const std::string& name, const std::string& value) {
  if (read_only_) return;
  Lease c = acquire();
  sqlite3_stmt* s =
      c->stmt("INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES('meta', ?1, ?2, ?3)");
  sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, value.data(), int(value.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, unix_time());
  c->step(s, "write meta");
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
