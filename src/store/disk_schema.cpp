// The schema of the disk store: creating it, checking it at open, migrating older ones;
// and the small tables beside the entries (usage counters, key/value facts).
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
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

// Schema 5's entries (metadata and checksums in the row, code in `blobs`) become schema
// 6's index rows: the table rebuilt without them, its index and triggers with it.
const char* const kIndexRows = R"sql(
DROP TRIGGER entries_count_insert;
DROP TRIGGER entries_count_delete;
DROP INDEX entries_lru;
ALTER TABLE entries RENAME TO entries_v5;
CREATE TABLE entries(
  key TEXT PRIMARY KEY NOT NULL,
  target TEXT NOT NULL,
  kernels TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created INTEGER NOT NULL,
  last_used INTEGER NOT NULL,
  compile_ms REAL NOT NULL);
INSERT INTO entries SELECT key, target, kernels, bytes, created, last_used, compile_ms
  FROM entries_v5;
DROP TABLE entries_v5;
DROP TABLE blobs;
CREATE INDEX entries_lru ON entries(last_used);
CREATE TRIGGER entries_count_insert AFTER INSERT ON entries BEGIN
  UPDATE totals SET entries = entries + 1, bytes = bytes + new.bytes WHERE id = 0;
END;
CREATE TRIGGER entries_count_delete AFTER DELETE ON entries BEGIN
  UPDATE totals SET entries = entries - 1, bytes = bytes - old.bytes WHERE id = 0;
END;
CREATE TABLE doomed(
  key TEXT PRIMARY KEY NOT NULL);
UPDATE totals SET entries = (SELECT count(*) FROM entries),
  bytes = (SELECT coalesce(sum(bytes), 0) FROM entries) WHERE id = 0;
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

// Schema 5 kept an entry's code in `blobs`: reads and verifies them into *e, whose
// metadata is loaded. "" when sound, else what is wrong.
std::string read_v5_blobs(SqliteConn& c, Entry* e) {
  sqlite3_stmt* s = c.stmt("SELECT kind, sum, data FROM blobs WHERE key = ?1");
  sqlite3_bind_text(s, 1, e->key.data(), int(e->key.size()), SQLITE_STATIC);
  std::string why;
  while (why.empty() && c.step(s, "read blobs") == SQLITE_ROW) {
    const int kind = sqlite3_column_int(s, 0);
    Blob* dst =
        (kind == 1 || kind == 2 || kind == 4) ? e->blob(static_cast<BlobKind>(kind)) : nullptr;
    const void* data = sqlite3_column_blob(s, 2);
    const size_t len = data ? size_t(sqlite3_column_bytes(s, 2)) : 0;
    if (!dst || !dst->empty()) {
      why = "blob kind " + std::to_string(kind) + " unknown or stored twice";
    } else if (!checksum_equals(col_blob(s, 1),
                                entry_checksum(e->key, static_cast<EntryPart>(kind), data, len))) {
      why = "blob checksum mismatch";
    } else {
      dst->assign(std::string_view(static_cast<const char*>(data), len));
    }
  }
  sqlite3_reset(s);
  const auto& rs = e->recorded_sizes;
  if (why.empty() &&
      (e->ptx.size() != rs.ptx || e->cubin.size() != rs.cubin || e->ltoir.size() != rs.ltoir)) {
    why = "parts missing or of the wrong size";
  }
  if (why.empty() && e->ptx.empty() && e->cubin.empty() && e->ltoir.empty() && !e->is_manifest()) {
    why = "entry has no code";
  }
  return why;
}

// Schema 5 -> 6: every entry that verifies is written to its payload file; the others'
// rows go. Returns how many went.
uint64_t move_payloads_to_files(SqliteConn& c, const EntryFiles& files) {
  std::vector<std::string> bad;
  sqlite3_stmt* s = c.stmt("SELECT key, meta, meta_sum FROM entries");
  while (c.step(s, "read entries") == SQLITE_ROW) {
    Entry e;
    e.key = col_text(s, 0);
    const std::string meta = col_blob(s, 1);
    std::string why =
        checksum_equals(col_blob(s, 2), entry_checksum(e.key, EntryPart::Metadata, meta))
            ? ""
            : "metadata checksum mismatch";
    if (why.empty()) {
      try {
        e.load_metadata(meta);
      } catch (const Error& ex) {
        why = ex.message();
      }
    }
    if (why.empty()) why = read_v5_blobs(c, &e);
    if (!why.empty() || !is_hex_key(e.key)) {
      bad.push_back(e.key);
      continue;
    }
    files.install(files.write_temp(e, e.created), e.key);
  }
  sqlite3_reset(s);
  for (const std::string& key : bad) {
    s = c.stmt("DELETE FROM entries WHERE key = ?1");
    sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
    c.step(s, "drop an entry that does not verify");
  }
  return bad.size();
}

// Migrations from `version` to kSchemaVersion, one schema version at a time, inside the
// caller's write transaction (a new database gets kSchema at once). Returns the entries
// dropped on the way.
uint64_t migrate(SqliteConn& c, int version, const EntryFiles& files) {
  uint64_t dropped = 0;
  if (version == 0) {
    c.exec(kSchema, "create schema");
    c.exec("PRAGMA application_id=1802135924", "set application id");
    return 0;
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
  if (version == 5) {
    dropped += move_payloads_to_files(c, files);
    c.exec(kIndexRows, "migrate schema 5 -> 6");
    version = 6;
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
  // Another process created or migrated it since it was read: only the record may be missing.
  const bool current = found == kSchemaVersion;
  const uint64_t dropped = current ? 0 : migrate(c, found, files_);
  if (!current) {
    c.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str(), "set schema version");
  }
  // Recorded with the schema it describes (also for databases from before the record).
  sqlite3_stmt* s = c.stmt(
      "INSERT OR REPLACE INTO kv(ns, key, value, updated) VALUES('meta', 'kjit:schema', ?1, ?2)");
  const std::string fp = schema_fingerprint(c);
  sqlite3_bind_text(s, 1, fp.data(), int(fp.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 2, unix_time());
  c.step(s, "record schema fingerprint");
  sqlite3_reset(s);
  txn.commit();
  if (current) {
    // Nothing migrated: said nowhere.
  } else if (found > 0 && found <= 2) {  // entries of schema 1 and 2 were dropped
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) + " to " +
             std::to_string(kSchemaVersion) + ": dropped " + std::to_string(dropped) +
             " entries written by an older kjit (their checksums were not bound to their "
             "keys); they are compiled again when next used");
  } else if (found > 0 && dropped > 0) {
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) + " to " +
             std::to_string(kSchemaVersion) + ": dropped " + std::to_string(dropped) +
             " entries written by an older kjit (compiled from a possibly stale precompiled "
             "header, or not verifying); they are compiled again when next used");
  } else if (found > 0) {
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) + " to " +
             std::to_string(kSchemaVersion) + " (entries moved to payload files)");
  }
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
  if (std::optional<std::string> v = files_.read_fact(name)) return v;
  // Caches from before schema 6 kept facts in the key/value table (migrated along).
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("SELECT value FROM kv WHERE ns = 'meta' AND key = ?1");
  sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  std::optional<std::string> out;
  if (c->step(s, "read meta") == SQLITE_ROW) out = col_text(s, 0);
  sqlite3_reset(s);
  if (out) set_meta(name, *out);
  return out;
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
