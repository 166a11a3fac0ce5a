// Entries of the disk store: reading and verifying them, storing, removing, evicting the
// least recently used, and recording use.
#include <sqlite3.h>
#include <unistd.h>

#include <vector>

#include "store/disk_store.h"
#include "store/sqlite_conn.h"
#include "util/checksum.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

namespace kjit {
namespace {

constexpr size_t kTouchBatch = 64;

// Rows of `key` found through a key index. Rows are then read by rowid and their own key
// checked: a damaged index can point at another entry's rows, whose checksums are valid.
std::vector<int64_t> rowids(SqliteConn& c, const std::string& key, const char* sql,
                            const char* what) {
  std::vector<int64_t> out;
  sqlite3_stmt* s = c.stmt(sql);
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  while (c.step(s, what) == SQLITE_ROW) out.push_back(sqlite3_column_int64(s, 0));
  sqlite3_reset(s);
  return out;
}

// Reads and verifies the entry row into *entry. "" when sound, else what is wrong.
std::string read_entry_row(SqliteConn& c, const std::string& key,
                           const std::vector<int64_t>& entry_rows, Entry* entry) {
  sqlite3_stmt* s = c.stmt("SELECT key, meta, meta_sum, last_used FROM entries WHERE rowid = ?1");
  sqlite3_bind_int64(s, 1, entry_rows.front());
  std::string why, meta, meta_sum;
  if (entry_rows.size() != 1) {
    why = "the key index lists the entry " + std::to_string(entry_rows.size()) + " times";
  } else if (c.step(s, "read entry") != SQLITE_ROW || col_text(s, 0) != key) {
    why = "the key index points at another row";
  } else {
    meta = col_blob(s, 1);
    meta_sum = col_blob(s, 2);
    entry->last_used = sqlite3_column_int64(s, 3);
  }
  sqlite3_reset(s);
  if (!why.empty()) return why;
  // Checksums are bound to the key asked for: rows moved here from another key fail.
  if (!checksum_equals(meta_sum, entry_checksum(key, EntryPart::Metadata, meta))) {
    return "metadata checksum mismatch";
  }
  try {
    entry->load_metadata(meta);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// Reads and verifies one blob row into *entry. "" when sound, else what is wrong.
std::string read_blob_row(SqliteConn& c, const std::string& key, int64_t rowid, Entry* entry) {
  sqlite3_stmt* s = c.stmt("SELECT key, kind, sum, data FROM blobs WHERE rowid = ?1");
  sqlite3_bind_int64(s, 1, rowid);
  if (c.step(s, "read blob") != SQLITE_ROW || col_text(s, 0) != key) {
    sqlite3_reset(s);
    return "the blob index points at another row";
  }
  std::string why;
  const int kind = sqlite3_column_int(s, 1);
  std::string* dst =
      (kind == 1 || kind == 2 || kind == 4) ? entry->blob(static_cast<BlobKind>(kind)) : nullptr;
  const std::string sum = col_blob(s, 2);
  const void* data = sqlite3_column_blob(s, 3);
  const size_t len = data ? size_t(sqlite3_column_bytes(s, 3)) : 0;
  if (!dst) {
    why = "unknown blob kind " + std::to_string(kind);
  } else if (!dst->empty()) {
    why = "blob kind " + std::to_string(kind) + " stored twice";
  } else if (!checksum_equals(sum, entry_checksum(key, static_cast<EntryPart>(kind), data, len))) {
    why = "blob checksum mismatch";
  } else {
    dst->assign(static_cast<const char*>(data), len);
  }
  sqlite3_reset(s);
  return why;
}

// Reads the blobs of an entry whose row verified, and checks them against what its
// metadata promises. "" when sound, else what is wrong.
std::string read_blobs(SqliteConn& c, const std::string& key, Entry* entry) {
  size_t parts = 0;
  for (int64_t rowid : rowids(c, key, "SELECT rowid FROM blobs WHERE key = ?1", "find blobs")) {
    std::string why = read_blob_row(c, key, rowid, entry);
    if (!why.empty()) return why;
    ++parts;
  }
  // Every part the metadata promises must be present with its recorded size.
  const auto& rs = entry->recorded_sizes;
  if (entry->ptx.size() != rs.ptx || entry->cubin.size() != rs.cubin ||
      entry->ltoir.size() != rs.ltoir) {
    return "parts missing or of the wrong size (" + std::to_string(parts) + " blobs)";
  }
  if (entry->ptx.empty() && entry->cubin.empty() && entry->ltoir.empty() &&
      !entry->is_manifest()) {
    return "entry has no code";
  }
  return "";
}

}  // namespace

EntryPtr DiskStore::get(const std::string& key) {
  Lease c = acquire();
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  std::string why;
  {
    Txn txn(*c, false);
    const std::vector<int64_t> entry_rows =
        rowids(*c, key, "SELECT rowid FROM entries WHERE key = ?1", "find entry");
    if (entry_rows.empty()) {
      txn.commit();
      return nullptr;
    }
    why = read_entry_row(*c, key, entry_rows, entry.get());
    if (why.empty()) why = read_blobs(*c, key, entry.get());
    txn.commit();
  }
  if (!why.empty()) discard_corrupt(key, why);
  return entry;
}

void DiskStore::discard_corrupt(const std::string& key, const std::string& why) {
  log_warn("cache entry " + key + " in " + path_ + " is corrupt (" + why + "); " +
           (read_only_ ? "not removed: the cache is read-only" : "removed"));
  if (!read_only_) {
    try {
      remove(key);
    } catch (const std::exception& e) {
      log_warn(std::string("could not remove corrupt entry: ") + e.what());
    }
  }
  fail(KJIT_ERROR_CACHE_CORRUPT, "cache entry " + key + " is corrupt: " + why);
}

void DiskStore::delete_locked(Conn& c, const std::string& key) {
  sqlite3_stmt* s = c.stmt("DELETE FROM blobs WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  c.step(s, "delete blobs");
  s = c.stmt("DELETE FROM entries WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  c.step(s, "delete entry");
}

uint64_t DiskStore::put(const Entry& e, uint64_t max_bytes) {
  if (read_only_) fail(KJIT_ERROR_READ_ONLY, "cache database " + path_ + " is read-only");
  if (!is_hex_key(e.key)) {
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "cache entry key '" + e.key + "' is not 64 lowercase hex digits");
  }
  const std::string meta = e.metadata_json();
  const Checksum meta_sum = entry_checksum(e.key, EntryPart::Metadata, meta);
  std::string kernels;
  for (const auto& k : e.kernels) kernels += (kernels.empty() ? "" : ",") + k;
  const int64_t now = unix_time();
  Lease c = acquire();
  Txn txn(*c, true);
  delete_locked(*c, e.key);
  sqlite3_stmt* s = c->stmt(
      "INSERT INTO entries(key, target, kernels, bytes, created, last_used, compile_ms, meta, "
      "meta_sum) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  sqlite3_bind_text(s, 1, e.key.data(), int(e.key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, e.target.data(), int(e.target.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 3, kernels.data(), int(kernels.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, int64_t(e.bytes()));
  sqlite3_bind_int64(s, 5, e.created ? e.created : now);
  sqlite3_bind_int64(s, 6, now);
  sqlite3_bind_double(s, 7, e.compile_ms);
  sqlite3_bind_text(s, 8, meta.data(), int(meta.size()), SQLITE_STATIC);
  sqlite3_bind_blob(s, 9, meta_sum.data(), int(meta_sum.size()), SQLITE_STATIC);
  c->step(s, "insert entry");
  for (BlobKind k : {BlobKind::Ptx, BlobKind::Cubin, BlobKind::LtoIr}) {
    const std::string& data = *e.blob(k);
    if (data.empty()) continue;
    const Checksum sum = entry_checksum(e.key, part_of(k), data);
    s = c->stmt("INSERT INTO blobs(key, kind, sum, data) VALUES(?1, ?2, ?3, ?4)");
    sqlite3_bind_text(s, 1, e.key.data(), int(e.key.size()), SQLITE_STATIC);
    sqlite3_bind_int(s, 2, int(k));
    sqlite3_bind_blob(s, 3, sum.data(), int(sum.size()), SQLITE_STATIC);
    sqlite3_bind_blob64(s, 4, data.data(), data.size(), SQLITE_STATIC);
    c->step(s, "insert blob");
  }
  s = c->stmt("DELETE FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, e.key.data(), int(e.key.size()), SQLITE_STATIC);
  c->step(s, "release claim");
  flush_touches_locked(*c);
  uint64_t evicted = 0;
  if (max_bytes > 0) {
    uint64_t entries = 0, bytes = 0;
    s = c->stmt("SELECT entries, bytes FROM totals WHERE id = 0");
    if (c->step(s, "read totals") == SQLITE_ROW) {
      entries = uint64_t(sqlite3_column_int64(s, 0));
      bytes = uint64_t(sqlite3_column_int64(s, 1));
    }
    sqlite3_reset(s);
    (void)entries;
    if (bytes > max_bytes) evicted = evict_locked(*c, max_bytes - max_bytes / 5);
  }
  txn.commit();
  forget_live_claims(e.key);  // the claim row went with the same transaction
  return evicted;
}

uint64_t DiskStore::evict_locked(Conn& c, uint64_t target_bytes) {
  uint64_t removed = 0;
  for (;;) {
    sqlite3_stmt* s = c.stmt("SELECT bytes FROM totals WHERE id = 0");
    uint64_t bytes = 0;
    if (c.step(s, "read totals") == SQLITE_ROW) bytes = uint64_t(sqlite3_column_int64(s, 0));
    sqlite3_reset(s);
    if (bytes <= target_bytes) break;
    // Least recently used first; among equal times (seconds), the oldest insert first.
    s = c.stmt("SELECT key FROM entries ORDER BY last_used ASC, rowid ASC LIMIT 16");
    std::vector<std::string> victims;
    while (c.step(s, "select victims") == SQLITE_ROW) victims.push_back(col_text(s, 0));
    sqlite3_reset(s);
    if (victims.empty()) break;
    for (const auto& key : victims) {
      delete_locked(c, key);
      ++removed;
      s = c.stmt("SELECT bytes FROM totals WHERE id = 0");
      if (c.step(s, "read totals") == SQLITE_ROW) bytes = uint64_t(sqlite3_column_int64(s, 0));
      sqlite3_reset(s);
      if (bytes <= target_bytes) break;
    }
  }
  return removed;
}

bool DiskStore::remove(const std::string& key) {
  if (read_only_) fail(KJIT_ERROR_READ_ONLY, "cache database " + path_ + " is read-only");
  Lease c = acquire();
  Txn txn(*c, true);
  delete_locked(*c, key);
  const bool existed = sqlite3_changes(c->db) > 0;
  txn.commit();
  return existed;
}

void DiskStore::clear() {
  if (read_only_) fail(KJIT_ERROR_READ_ONLY, "cache database " + path_ + " is read-only");
  Lease c = acquire();
  Txn txn(*c, true);
  // The values go; the facts (namespace 'meta': toolchains, the schema's record) stay.
  c->exec(
      "DELETE FROM blobs; DELETE FROM entries; DELETE FROM claims; "
      "DELETE FROM kv WHERE ns <> 'meta';",
      "clear");
  txn.commit();
  {
    std::lock_guard<std::mutex> lock(touch_mu_);
    touches_.clear();
  }
}

uint64_t DiskStore::prune(uint64_t max_bytes) {
  if (read_only_) fail(KJIT_ERROR_READ_ONLY, "cache database " + path_ + " is read-only");
  Lease c = acquire();
  Txn txn(*c, true);
  flush_touches_locked(*c);
  const uint64_t removed = evict_locked(*c, max_bytes);
  txn.commit();
  return removed;
}

void DiskStore::totals(uint64_t* entries, uint64_t* bytes) {
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("SELECT entries, bytes FROM totals WHERE id = 0");
  *entries = *bytes = 0;
  if (c->step(s, "read totals") == SQLITE_ROW) {
    *entries = uint64_t(sqlite3_column_int64(s, 0));
    *bytes = uint64_t(sqlite3_column_int64(s, 1));
  }
  sqlite3_reset(s);
}

void DiskStore::list(const std::function<bool(const EntryInfo&)>& fn) {
  Lease c = acquire();
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
    info.last_used = sqlite3_column_int64(s, 5);
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

void DiskStore::touch(const std::string& key, int64_t last_used) {
  if (read_only_) return;
  bool flush = false;
  {
    std::lock_guard<std::mutex> lock(touch_mu_);
    touches_.emplace_back(key, last_used);
    flush = touches_.size() >= kTouchBatch;
  }
  if (flush) flush_touches();
}

void DiskStore::flush_touches_locked(Conn& c) {
  std::vector<std::pair<std::string, int64_t>> pending;
  {
    std::lock_guard<std::mutex> lock(touch_mu_);
    pending.swap(touches_);
  }
  for (const auto& [key, t] : pending) {
    sqlite3_stmt* s = c.stmt("UPDATE entries SET last_used = max(last_used, ?2) WHERE key = ?1");
    sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, t);
    c.step(s, "record last use");
  }
}

void DiskStore::flush_touches() {
  if (read_only_ || static_cast<long>(getpid()) != pid_) return;
  {
    std::lock_guard<std::mutex> lock(touch_mu_);
    if (touches_.empty()) return;
  }
  Lease c = acquire();
  Txn txn(*c, true);
  flush_touches_locked(*c);
  txn.commit();
}

}  // namespace kjit
