// Cache databases as kjit wrote them before schema 6 (an entry's metadata and checksums in
// its row, its code in `blobs`), filled with the entries of a current cache, for the tests
// that such a cache is moved aside and rebuilt, never read.
#pragma once

#include <sqlite3.h>

#include <stdexcept>
#include <string>

#include "store/disk_store.h"
#include "store/entry.h"
#include "store/index_db.h"

namespace kjit::test {

// The schema of a database as kjit 0.1.0 created it (schema 3): the facts (toolchains,
// the schema's own record) in a `meta` table of their own, beside the values in `kv`.
inline const char* const kRelease010Schema = R"sql(
CREATE TABLE entries(
  key TEXT PRIMARY KEY NOT NULL,
  target TEXT NOT NULL,
  kernels TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created INTEGER NOT NULL,
  last_used INTEGER NOT NULL,
  compile_ms REAL NOT NULL,
  meta TEXT NOT NULL,
  meta_sum BLOB NOT NULL);
CREATE INDEX entries_lru ON entries(last_used);
CREATE TABLE blobs(
  key TEXT NOT NULL,
  kind INTEGER NOT NULL,
  sum BLOB NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(key, kind));
CREATE TABLE totals(
  id INTEGER PRIMARY KEY CHECK(id = 0),
  entries INTEGER NOT NULL,
  bytes INTEGER NOT NULL);
INSERT INTO totals VALUES(0, 0, 0);
CREATE TRIGGER entries_count_insert AFTER INSERT ON entries BEGIN
  UPDATE totals SET entries = entries + 1, bytes = bytes + new.bytes WHERE id = 0;
END;
CREATE TRIGGER entries_count_delete AFTER DELETE ON entries BEGIN
  UPDATE totals SET entries = entries - 1, bytes = bytes - old.bytes WHERE id = 0;
END;
CREATE TABLE claims(
  key TEXT PRIMARY KEY NOT NULL,
  owner TEXT NOT NULL,
  started INTEGER NOT NULL,
  failure TEXT);
CREATE TABLE meta(
  name TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL);
CREATE TABLE kv(
  ns TEXT NOT NULL,
  key TEXT NOT NULL,
  value BLOB NOT NULL,
  updated INTEGER NOT NULL,
  PRIMARY KEY(ns, key));
CREATE TABLE counters(name TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
PRAGMA application_id=1802135924;
PRAGMA user_version=3;
)sql";

// Creates `db` with kRelease010Schema (schema 3) holding every entry of the cache in
// `from_dir`, checksums bound to their keys as schemas 3 to 5 wrote them.
inline void write_schema3_database(const std::string& db, const std::string& from_dir) {
  sqlite3* h = nullptr;
  if (sqlite3_open(db.c_str(), &h) != SQLITE_OK ||
      sqlite3_exec(h, kRelease010Schema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error("cannot create " + db);
  }
  kjit::IndexDb from_index(from_dir, true, true);
  kjit::DiskStore from(from_index);
  sqlite3_stmt* row = nullptr;
  sqlite3_stmt* blob = nullptr;
  sqlite3_prepare_v2(h, "INSERT INTO entries VALUES(?1, ?2, '', ?3, ?4, ?4, ?5, ?6, ?7)", -1, &row,
                     nullptr);
  sqlite3_prepare_v2(h, "INSERT INTO blobs VALUES(?1, ?2, ?3, ?4)", -1, &blob, nullptr);
  for (const std::string& key : from.keys()) {
    const kjit::EntryPtr e = from.get(key);
    if (!e) continue;
    const std::string meta = e->metadata_json();
    const kjit::Checksum meta_sum = kjit::entry_checksum(key, kjit::EntryPart::Metadata, meta);
    sqlite3_bind_text(row, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(row, 2, e->target.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(row, 3, int64_t(e->bytes()));
    sqlite3_bind_int64(row, 4, e->created);
    sqlite3_bind_double(row, 5, e->compile_ms);
    sqlite3_bind_text(row, 6, meta.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(row, 7, meta_sum.data(), int(meta_sum.size()), SQLITE_TRANSIENT);
    sqlite3_step(row);
    sqlite3_reset(row);
    for (kjit::BlobKind k : {kjit::BlobKind::Ptx, kjit::BlobKind::Cubin, kjit::BlobKind::LtoIr}) {
      const std::string_view data = *e->blob(k);
      if (data.empty()) continue;
      const kjit::Checksum sum = kjit::entry_checksum(key, kjit::part_of(k), data);
      sqlite3_bind_text(blob, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int(blob, 2, int(k));
      sqlite3_bind_blob(blob, 3, sum.data(), int(sum.size()), SQLITE_TRANSIENT);
      sqlite3_bind_blob(blob, 4, data.data(), int(data.size()), SQLITE_TRANSIENT);
      sqlite3_step(blob);
      sqlite3_reset(blob);
    }
  }
  sqlite3_finalize(row);
  sqlite3_finalize(blob);
  sqlite3_close(h);
}

// The same as schema 4 or 5 left it: the facts of `meta` in `kv` (namespace 'meta').
inline void write_schema5_database(const std::string& db, const std::string& from_dir,
                                   int version = 5) {
  write_schema3_database(db, from_dir);
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  const std::string sql =
      "INSERT INTO kv SELECT 'meta', name, value, 1 FROM meta; DROP TABLE meta; "
      "PRAGMA user_version=" +
      std::to_string(version) + ";";
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(h);
  if (rc != SQLITE_OK) throw std::runtime_error("cannot make schema 5 of " + db);
}

}  // namespace kjit::test
