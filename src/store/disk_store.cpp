#include "store/disk_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "util/fs.h"
#include "util/log.h"
#include "util/checksum.h"
#include "util/sha256.h"

namespace kjit {
namespace {

constexpr int kBusyTimeoutMs = 30000;
constexpr size_t kMaxPooledConnections = 8;
constexpr size_t kTouchBatch = 64;
// A claim from a process we cannot check (another host) is taken over after this long.
constexpr int64_t kForeignClaimLeaseSeconds = 600;

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
CREATE TABLE IF NOT EXISTS meta(
  name TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kv(
  ns TEXT NOT NULL,
  key TEXT NOT NULL,
  value BLOB NOT NULL,
  updated INTEGER NOT NULL,
  PRIMARY KEY(ns, key));
)sql";

bool is_corruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& what) {
  std::string msg = "cache database: " + what + " failed: " +
                    (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + " (" +
                    sqlite3_errstr(rc) + ")";
  if (is_corruption(rc)) throw DatabaseCorrupt(msg);
  fail(KJIT_ERROR_CACHE, msg);
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Start time of a live process (clock ticks since boot), "" if it does not exist or has
// exited (a zombie not yet reaped by its parent compiles nothing any more).
std::string process_start_time(long pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return "";
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 > stat->size()) return "";
  std::istringstream in(stat->substr(paren + 2));
  std::string field;
  // Fields after the command: state(3) ... starttime is field 22, i.e. the 20th here.
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 3 && (field == "Z" || field == "X" || field == "x")) return "";
    if (i == 22) return field;
  }
  return "";
}

// Text column that is never NULL (a damaged record can hold NULL in a NOT NULL column).
std::string col_text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(s, i)))
           : std::string();
}

std::string col_blob(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  return p ? std::string(static_cast<const char*>(p), size_t(sqlite3_column_bytes(s, i)))
           : std::string();
}

// device:inode of a file, "" if it does not exist.
std::string file_id(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// Owner strings are "host|pid|starttime|thread". Dead if same host and the process is
// gone or is a different process with the same pid.
// Claims this process holds and is compiling for ("owner\nkey"): a claim row naming this
// process but not listed here was abandoned (its release failed, e.g. on a full disk).
std::mutex g_live_mu;
std::set<std::string> g_live_claims;

void live_claim(const std::string& owner, const std::string& key, bool live) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (live) {
    g_live_claims.insert(owner + "\n" + key);
  } else {
    g_live_claims.erase(owner + "\n" + key);
  }
}

void forget_live_claims(const std::string& key) {  // the entry is stored: nobody compiles it
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (auto it = g_live_claims.begin(); it != g_live_claims.end();) {
    const size_t nl = it->find('\n');
    it = it->compare(nl + 1, std::string::npos, key) == 0 ? g_live_claims.erase(it) : std::next(it);
  }
}

// A claim holds while its owner lives and renews its lease (every kClaimRenewSeconds while
// it compiles). Owner strings are "host|pid|starttime|handle". On this host the owner is
// dead when the process is gone, is a zombie, or is another process with the same pid; a
// live owner that stopped renewing (it could not write the database) lost the claim.
bool owner_is_dead(const std::string& owner, const std::string& key, int64_t started,
                   int64_t now) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(owner);
  while (std::getline(in, part, '|')) parts.push_back(part);
  if (parts.size() < 3) return true;
  if (parts[0] != hostname()) return now - started > kForeignClaimLeaseSeconds;
  if (parts[1].empty() || parts[2].empty()) return true;
  if (now - started > kClaimLeaseSeconds) return true;
  const long pid = std::strtol(parts[1].c_str(), nullptr, 10);
  if (pid == static_cast<long>(getpid())) {
    std::lock_guard<std::mutex> lock(g_live_mu);
    return g_live_claims.count(owner + "\n" + key) == 0;
  }
  return process_start_time(pid) != parts[2];
}

// True if the database file header already says WAL (bytes 18 and 19 are 2), so that
// setting the journal mode again, which costs hundreds of microseconds, can be skipped.
bool header_says_wal(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char header[20] = {};
  const bool ok = std::fread(header, 1, sizeof header, f) == sizeof header;
  std::fclose(f);
  return ok && std::memcmp(header, "SQLite format 3", 16) == 0 && header[18] == 2 &&
         header[19] == 2;
}

}  // namespace

// One SQLite connection with its prepared statements.
struct DiskStore::Conn {
  sqlite3* db = nullptr;
  uint64_t generation = 0;
  std::unordered_map<const char*, sqlite3_stmt*> stmts;

  ~Conn() {
    for (auto& [sql, stmt] : stmts) sqlite3_finalize(stmt);
    if (db) sqlite3_close_v2(db);
  }

  // Closing without the usual checkpoint (and WAL removal) on close: for connections
  // inherited across fork() (the parent still uses the WAL) and for a file moved aside.
  // Closing them, rather than leaking them, matters: SQLite shares lock state between the
  // connections of a process that open one file, so a child that kept the parent's
  // connections would believe it holds the parent's locks and run without real ones.
  static void close_quietly(std::unique_ptr<Conn> c) {
    if (c && c->db) sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  }

  void exec(const char* sql, const char* what) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errstr(rc);
      sqlite3_free(err);
      std::string full = std::string("cache database: ") + what + " failed: " + msg;
      if (is_corruption(rc)) throw DatabaseCorrupt(full);
      fail(KJIT_ERROR_CACHE, full);
    }
  }

  // Statement prepared once per connection, reset and unbound for reuse.
  sqlite3_stmt* stmt(const char* sql) {
    auto it = stmts.find(sql);
    if (it != stmts.end()) {
      sqlite3_reset(it->second);
      sqlite3_clear_bindings(it->second);
      return it->second;
    }
    sqlite3_stmt* s = nullptr;
    const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if ((rc & 0xff) == SQLITE_ERROR) {
      // kjit's own statements match its schema (checked at open): a table, column or
      // trigger that is missing or unparsable now means the schema itself was damaged.
      throw DatabaseCorrupt(std::string("cache database schema is damaged: ") +
                            sqlite3_errmsg(db) + " (preparing " + sql + ")");
    }
    if (rc != SQLITE_OK) throw_sqlite(db, rc, "prepare");
    stmts.emplace(sql, s);
    return s;
  }

  int step(sqlite3_stmt* s, const char* what) {
    const int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      sqlite3_reset(s);
      throw_sqlite(db, rc, what);
    }
    return rc;
  }
};

// Scoped transaction: BEGIN IMMEDIATE for writes (so a writer waits for the lock up front
// instead of failing on upgrade), BEGIN DEFERRED for consistent multi-statement reads.
class Txn {
 public:
  Txn(DiskStore::Conn& c, bool write) : c_(c) {
    c_.exec(write ? "BEGIN IMMEDIATE" : "BEGIN", "begin transaction");
  }
  void commit() {
    c_.exec("COMMIT", "commit");
    done_ = true;
  }
  ~Txn() {
    if (!done_) sqlite3_exec(c_.db, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  DiskStore::Conn& c_;
  bool done_ = false;
};

struct DiskStore::Lease {
  DiskStore* store;
  Conn* conn;
  Lease(DiskStore* s, Conn* c) : store(s), conn(c) {}
  Lease(Lease&& o) noexcept : store(o.store), conn(o.conn) { o.conn = nullptr; }
  ~Lease() {
    if (conn) store->release(conn);
  }
  Conn& operator*() { return *conn; }
  Conn* operator->() { return conn; }
};

DiskStore::DiskStore(std::string dir, bool read_only, bool use_wal)
    : dir_(std::move(dir)),
      path_(join_path(dir_, kFileName)),
      read_only_(read_only),
      use_wal_(use_wal),
      pid_(static_cast<long>(getpid())) {
  auto first = open_connection(true);
  identity_ = file_id(path_);
  std::lock_guard<std::mutex> lock(pool_mu_);
  pool_.push_back(std::move(first));
}

DiskStore::~DiskStore() {
  try {
    flush_touches();
  } catch (const std::exception& e) {
    log_warn(std::string("could not record last-use times: ") + e.what());
  }
  if (static_cast<long>(getpid()) != pid_) {
    // A forked child that never used the store: the connections are the parent's.
    for (auto& c : pool_) Conn::close_quietly(std::move(c));
  }
}

std::unique_ptr<DiskStore::Conn> DiskStore::open_connection(bool initialise) {
  auto c = std::make_unique<Conn>();
  const int flags = read_only_ ? SQLITE_OPEN_READONLY
                               : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path_.c_str(), &c->db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(c->db, rc, "open " + path_);
  sqlite3_busy_timeout(c->db, kBusyTimeoutMs);
  sqlite3_extended_result_codes(c->db, 1);
  if (read_only_ && ::access(dir_.c_str(), W_OK) != 0 &&
      sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) !=
          SQLITE_OK) {
    // A WAL database in a directory we cannot write: SQLite cannot create the -shm file
    // it reads through. Nobody without root can write here either, so read the file as
    // immutable (without locks or -shm).
    sqlite3_close_v2(c->db);
    c->db = nullptr;
    std::string uri = "file:";
    for (char ch : path_) {
      if (ch == '?' || ch == '#' || ch == '%') {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(ch));
        uri += buf;
      } else {
        uri += ch;
      }
    }
    uri += "?immutable=1";
    rc = sqlite3_open_v2(uri.c_str(), &c->db,
                         SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) throw_sqlite(c->db, rc, "open " + path_ + " (immutable)");
    sqlite3_extended_result_codes(c->db, 1);
  }
  // Reading the header forces SQLite to look at the file: garbage fails here.
  c->exec("PRAGMA mmap_size=0", "configure");
  if (initialise) {
    // Changing the journal mode needs the file to itself and SQLite reports "locked" at
    // once, without its busy handler, while another process opens the same new database:
    // retry for as long as any other lock is waited for.
    const double give_up = monotonic_ms() + kBusyTimeoutMs;
    while (!read_only_ && !(use_wal_ && header_says_wal(path_))) {
      rc = sqlite3_exec(c->db, use_wal_ ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE",
                        nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      const int primary = rc & 0xff;
      if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || monotonic_ms() > give_up) {
        throw_sqlite(c->db, rc, "set journal mode");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    initialise_schema(*c);
  }
  c->exec("PRAGMA synchronous=NORMAL", "configure");
  if (!read_only_) c->exec("PRAGMA journal_size_limit=67108864", "configure");
  if (use_wal_ && !read_only_) {
    // The -wal and -shm files stay when the last connection closes (emptied by the
    // checkpoint at close): every process would otherwise create, size, map and delete
    // both, a large part of a short process's cost to reach its first hit.
    int persist = 1;
    sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    // A process that ends without closing leaves its log for the next opener to read
    // into a new index: checkpoint every kWalCheckpointPages pages (1 MiB) instead of
    // SQLite's 4 MiB, so that log stays small. The checkpoint runs on the committing
    // thread after a store, which follows a compile of tens of milliseconds or more.
    c->exec(("PRAGMA wal_autocheckpoint=" + std::to_string(kWalCheckpointPages)).c_str(),
            "configure");
  }
  return c;
}

void DiskStore::initialise_schema(Conn& c) {
  auto read_int = [&](const char* sql) {
    sqlite3_stmt* s = c.stmt(sql);
    c.step(s, sql);
    const int v = sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    return v;
  };
  // One snapshot: read separately, another process creating the schema between the reads
  // makes a fresh kjit database look like a foreign one (no application id, some tables).
  int app, version, tables;
  std::string fingerprint, recorded;
  bool has_record = false;
  {
    Txn read(c, false);
    app = read_int("PRAGMA application_id");
    version = read_int("PRAGMA user_version");
    tables = read_int("SELECT count(*) FROM sqlite_master");
    if (version == kSchemaVersion) {
      fingerprint = schema_fingerprint(c);
      sqlite3_stmt* s = c.stmt("SELECT value FROM meta WHERE name = 'kjit:schema'");
      if (c.step(s, "read schema fingerprint") == SQLITE_ROW) {
        has_record = true;
        recorded = col_text(s, 0);
      }
      sqlite3_reset(s);
    }
    read.commit();
  }
  // The schema's text (tables, indexes, triggers) is what kjit created: a byte changed in
  // it would otherwise surface later as unexplained SQL errors, or worse, a trigger that
  // still parses but counts wrongly.
  if (has_record && recorded != fingerprint) {
    throw DatabaseCorrupt("cache database " + path_ + " has a damaged schema");
  }
  if (app != 0 && app != kApplicationId) {
    throw DatabaseCorrupt("cache database " + path_ + " belongs to another application");
  }
  if (app == 0 && tables > 0) {
    throw DatabaseCorrupt("cache database " + path_ + " is not a kjit database");
  }
  if (version > kSchemaVersion) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " +
                               std::to_string(version) + " from a newer kjit; this kjit reads " +
                               std::to_string(kSchemaVersion));
  }
  if (version == kSchemaVersion && (has_record || read_only_)) return;
  if (read_only_ && version > 0) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " has schema " + std::to_string(version) +
                               " from an older kjit and is read-only here; open it once with "
                               "write access to migrate it to schema " +
                               std::to_string(kSchemaVersion));
  }
  if (read_only_) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is not initialised and is read-only");
  }
  Txn txn(c, true);
  // Re-read under the write lock: another process may have initialised it meanwhile.
  version = read_int("PRAGMA user_version");
  const int found = version;
  uint64_t dropped = 0;
  if (version == 0) {
    c.exec(kSchema, "create schema");
    c.exec("PRAGMA application_id=1802135924", "set application id");
    version = 1;
  }
  // Migrations, one schema version at a time, in the same transaction.
  if (version == 1) {
    c.exec("CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY NOT NULL, "
           "value INTEGER NOT NULL)",
           "migrate schema 1 -> 2");
    version = 2;
  }
  if (version == 2) {
    // Schema 2 checksums covered the bytes only: a row moved to another key still verified
    // and would hand out another kernel's code. Such entries cannot be trusted; they go
    // (recompiled when next used), and so do claims on them. Counters, values and the
    // toolchain facts stay.
    dropped = uint64_t(read_int("SELECT count(*) FROM entries"));
    c.exec("DELETE FROM blobs; DELETE FROM entries; DELETE FROM claims;",
           "migrate schema 2 -> 3");
    version = 3;
  }
  c.exec(("PRAGMA user_version=" + std::to_string(version)).c_str(), "set schema version");
  // Recorded with the schema it describes (also for databases from before the record).
  sqlite3_stmt* s = c.stmt("INSERT OR REPLACE INTO meta(name, value) VALUES('kjit:schema', ?1)");
  const std::string fp = schema_fingerprint(c);
  sqlite3_bind_text(s, 1, fp.data(), int(fp.size()), SQLITE_TRANSIENT);
  c.step(s, "record schema fingerprint");
  sqlite3_reset(s);
  txn.commit();
  if (found > 0 && found <= 2) {  // entries of schema 1 and 2 were dropped
    log_info("cache database " + path_ + " migrated from schema " + std::to_string(found) +
             " to " + std::to_string(version) + ": dropped " + std::to_string(dropped) +
             " entries written by an older kjit (their checksums were not bound to their "
             "keys); they are compiled again when next used");
  }
}

std::string DiskStore::schema_fingerprint(Conn& c) {
  sqlite3_stmt* s = c.stmt(
      "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name");
  Sha256 h;
  while (c.step(s, "read schema") == SQLITE_ROW) {
    for (int i = 0; i < 4; ++i) h.field(col_text(s, i));
  }
  sqlite3_reset(s);
  return to_hex(h.finish());
}

DiskStore::Lease DiskStore::acquire() {
  const long pid = static_cast<long>(getpid());
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pid != pid_) {
      // After fork(): the parent's idle connections are closed without a checkpoint (see
      // Conn::close_quietly) so that our own connections take real locks.
      for (auto& c : pool_) Conn::close_quietly(std::move(c));
      pool_.clear();
      pid_ = pid;
    }
    if (!pool_.empty()) {
      Conn* c = pool_.back().release();
      pool_.pop_back();
      return Lease(this, c);
    }
    generation = generation_;
  }
  auto c = open_connection(false);
  c->generation = generation;
  return Lease(this, c.release());
}

void DiskStore::release(Conn* c) {
  std::unique_ptr<Conn> conn(c);
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (static_cast<long>(getpid()) != pid_) {
    conn.release();  // a connection leased before fork(): it belongs to the parent
  } else if (conn->generation != generation_) {
    Conn::close_quietly(std::move(conn));  // its file was moved aside
  } else if (pool_.size() < kMaxPooledConnections) {
    pool_.push_back(std::move(conn));
  }
}

void DiskStore::switch_file(bool move_aside, const std::string& why, std::string* aside) {
  std::lock_guard<std::mutex> lock(switch_mu_);
  const std::string current = file_id(path_);
  std::string ours;
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    ours = identity_;
  }
  if (move_aside && !current.empty() && current == ours) {
    std::string to = path_ + ".corrupt-" + std::to_string(unix_time());
    for (int i = 1; file_id(to) != ""; ++i) {
      to = path_ + ".corrupt-" + std::to_string(unix_time()) + "-" + std::to_string(i);
    }
    if (std::rename(path_.c_str(), to.c_str()) != 0) {
      fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is corrupt (" + why +
                                 ") and could not be moved aside: " + std::strerror(errno));
    }
    std::rename((path_ + "-wal").c_str(), (to + "-wal").c_str());
    std::rename((path_ + "-shm").c_str(), (to + "-shm").c_str());
    log_warn("cache database " + path_ + " is corrupt (" + why + "); moved it aside to " + to +
             " and started a new one");
    if (aside) *aside = to;
  } else if (move_aside && current != ours) {
    log_info("cache database " + path_ + " was already replaced by another process");
  }
  std::vector<std::unique_ptr<Conn>> old;
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    ++generation_;
    old.swap(pool_);
  }
  for (auto& c : old) Conn::close_quietly(std::move(c));
  auto fresh = open_connection(true);
  std::lock_guard<std::mutex> pool_lock(pool_mu_);
  fresh->generation = generation_;
  identity_ = file_id(path_);
  if (static_cast<long>(getpid()) == pid_) pool_.push_back(std::move(fresh));
}

std::string DiskStore::quarantine(const std::string& why) {
  if (read_only_) {
    fail(KJIT_ERROR_CACHE, "cache database " + path_ + " is corrupt (" + why +
                               ") and read-only here");
  }
  std::string aside;
  switch_file(true, why, &aside);
  return aside;
}

bool DiskStore::replaced() {
  const std::string current = file_id(path_);
  std::lock_guard<std::mutex> lock(pool_mu_);
  return current != identity_;
}

void DiskStore::reopen() { switch_file(false, "", nullptr); }

std::string DiskStore::integrity_problems() {
  const std::string report = exec_for_text("PRAGMA integrity_check");
  return report == "ok\n" ? std::string() : report;
}

EntryPtr DiskStore::get(const std::string& key) {
  Lease c = acquire();
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  bool bad = false;
  std::string why;
  {
    Txn txn(*c, false);
    // Rows are found through the key indexes, then read by rowid and their own key checked:
    // a damaged index can point at another entry's rows, whose checksums are valid.
    auto rowids = [&](const char* sql, const char* what) {
      std::vector<int64_t> out;
      sqlite3_stmt* s = c->stmt(sql);
      sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
      while (c->step(s, what) == SQLITE_ROW) out.push_back(sqlite3_column_int64(s, 0));
      sqlite3_reset(s);
      return out;
    };
    const std::vector<int64_t> entry_rows =
        rowids("SELECT rowid FROM entries WHERE key = ?1", "find entry");
    if (entry_rows.empty()) {
      txn.commit();
      return nullptr;
    }
    sqlite3_stmt* s = c->stmt("SELECT key, meta, meta_sum, last_used FROM entries WHERE rowid = ?1");
    sqlite3_bind_int64(s, 1, entry_rows.front());
    std::string meta, meta_sum;
    if (entry_rows.size() != 1) {
      bad = true;
      why = "the key index lists the entry " + std::to_string(entry_rows.size()) + " times";
    } else if (c->step(s, "read entry") != SQLITE_ROW || col_text(s, 0) != key) {
      bad = true;
      why = "the key index points at another row";
    } else {
      meta = col_blob(s, 1);
      meta_sum = col_blob(s, 2);
      entry->last_used = sqlite3_column_int64(s, 3);
    }
    sqlite3_reset(s);
    // Checksums are bound to the key asked for: rows moved here from another key fail.
    if (!bad && !checksum_equals(meta_sum, entry_checksum(key, EntryPart::Metadata, meta))) {
      bad = true;
      why = "metadata checksum mismatch";
    }
    if (!bad) {
      try {
        entry->load_metadata(meta);
      } catch (const Error& e) {
        bad = true;
        why = e.message();
      }
    }
    size_t parts = 0;
    const std::vector<int64_t> blob_rows =
        bad ? std::vector<int64_t>() : rowids("SELECT rowid FROM blobs WHERE key = ?1", "find blobs");
    for (int64_t rowid : blob_rows) {
      s = c->stmt("SELECT key, kind, sum, data FROM blobs WHERE rowid = ?1");
      sqlite3_bind_int64(s, 1, rowid);
      if (c->step(s, "read blob") != SQLITE_ROW || col_text(s, 0) != key) {
        sqlite3_reset(s);
        bad = true;
        why = "the blob index points at another row";
        break;
      }
      const int kind = sqlite3_column_int(s, 1);
      std::string* dst = (kind == 1 || kind == 2 || kind == 4)
                             ? entry->blob(static_cast<BlobKind>(kind))
                             : nullptr;
      const std::string sum = col_blob(s, 2);
      const void* data = sqlite3_column_blob(s, 3);
      const size_t len = data ? size_t(sqlite3_column_bytes(s, 3)) : 0;
      if (!dst) {
        why = "unknown blob kind " + std::to_string(kind);
      } else if (!dst->empty()) {
        why = "blob kind " + std::to_string(kind) + " stored twice";
      } else if (!checksum_equals(
                     sum, entry_checksum(key, static_cast<EntryPart>(kind), data, len))) {
        why = "blob checksum mismatch";
      } else {
        dst->assign(static_cast<const char*>(data), len);
        ++parts;
      }
      sqlite3_reset(s);
      if (!why.empty()) {
        bad = true;
        break;
      }
    }
    // Every part the metadata promises must be present with its recorded size.
    const auto& rs = entry->recorded_sizes;
    if (!bad && (entry->ptx.size() != rs.ptx || entry->cubin.size() != rs.cubin ||
                 entry->ltoir.size() != rs.ltoir)) {
      bad = true;
      why = "parts missing or of the wrong size (" + std::to_string(parts) + " blobs)";
    }
    if (!bad && entry->ptx.empty() && entry->cubin.empty() && entry->ltoir.empty()) {
      bad = true;
      why = "entry has no code";
    }
    txn.commit();
  }
  if (bad) {
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
  return entry;
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
  c->exec("DELETE FROM blobs; DELETE FROM entries; DELETE FROM claims; DELETE FROM kv;",
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

Claim DiskStore::try_claim(const std::string& key, const std::string& owner) {
  Claim out;
  if (read_only_) {
    out.state = Claim::State::Claimed;  // cannot coordinate; compile without a claim
    return out;
  }
  const int64_t now = unix_time();
  // Another process moved a corrupt file aside: claims only work on the shared file.
  if (replaced()) reopen();
  Lease c = acquire();
  Txn txn(*c, true);
  sqlite3_stmt* s = c->stmt("SELECT 1 FROM entries WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  const bool present = c->step(s, "check entry") == SQLITE_ROW;
  sqlite3_reset(s);
  if (present) {
    txn.commit();
    out.state = Claim::State::Present;
    return out;
  }
  s = c->stmt("SELECT owner, started, failure FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  bool take = true;
  if (c->step(s, "read claim") == SQLITE_ROW) {
    const std::string holder = col_text(s, 0);
    const int64_t started = sqlite3_column_int64(s, 1);
    const bool failed = sqlite3_column_type(s, 2) != SQLITE_NULL;
    if (failed && now - started <= kFailedClaimSeconds && now >= started) {
      // A recent compile error is the answer for everyone who asks: don't compile again.
      take = false;
      out.state = Claim::State::Failed;
      out.owner = holder;
      out.failure = col_text(s, 2);
    } else if (!failed && holder != owner && !owner_is_dead(holder, key, started, now)) {
      take = false;  // a live claim: wait for it
      out.state = Claim::State::Busy;
      out.owner = holder;
    }
  }
  sqlite3_reset(s);
  if (take) {
    s = c->stmt("INSERT OR REPLACE INTO claims(key, owner, started, failure) "
                "VALUES(?1, ?2, ?3, NULL)");
    sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
    sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now);
    c->step(s, "write claim");
    // Failed claims that expired are no longer anyone's answer.
    s = c->stmt("DELETE FROM claims WHERE failure IS NOT NULL AND started < ?1");
    sqlite3_bind_int64(s, 1, now - kFailedClaimSeconds);
    c->step(s, "expire claims");
    out.state = Claim::State::Claimed;
  }
  txn.commit();
  if (out.state == Claim::State::Claimed) live_claim(owner, key, true);
  return out;
}

void DiskStore::renew_claim(const std::string& key, const std::string& owner) {
  if (read_only_) return;
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt(
      "UPDATE claims SET started = ?3 WHERE key = ?1 AND owner = ?2 AND failure IS NULL");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, unix_time());
  c->step(s, "renew claim");
}

Claim DiskStore::read_claim(const std::string& key) {
  Claim out;
  out.state = Claim::State::Claimed;  // meaning: nobody holds it
  const int64_t now = unix_time();
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("SELECT owner, started, failure FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  if (c->step(s, "read claim") == SQLITE_ROW) {
    out.owner = col_text(s, 0);
    const int64_t started = sqlite3_column_int64(s, 1);
    if (sqlite3_column_type(s, 2) != SQLITE_NULL) {
      if (now - started <= kFailedClaimSeconds) {  // an expired failure answers nobody
        out.state = Claim::State::Failed;
        out.failure = col_text(s, 2);
      }
    } else if (!owner_is_dead(out.owner, key, started, now)) {
      out.state = Claim::State::Busy;
    }
  }
  sqlite3_reset(s);
  return out;
}

void DiskStore::release_claim(const std::string& key, const std::string& owner) {
  live_claim(owner, key, false);  // even if the row cannot be deleted, it is not live
  if (read_only_) return;
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("DELETE FROM claims WHERE key = ?1 AND owner = ?2");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  c->step(s, "release claim");
}

void DiskStore::fail_claim(const std::string& key, const std::string& owner,
                           const std::string& failure) {
  live_claim(owner, key, false);
  if (read_only_) return;
  Lease c = acquire();
  // `started` becomes the time of the failure, from which it answers for a while.
  sqlite3_stmt* s = c->stmt(
      "UPDATE claims SET failure = ?3, started = ?4 WHERE key = ?1 AND owner = ?2");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 3, failure.data(), int(failure.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, unix_time());
  c->step(s, "record failed compile");
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
  sqlite3_stmt* s = c->stmt("SELECT value FROM meta WHERE name = ?1");
  sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  std::optional<std::string> out;
  if (c->step(s, "read meta") == SQLITE_ROW) out = col_text(s, 0);
  sqlite3_reset(s);
  return out;
}

void DiskStore::set_meta(const std::string& name, const std::string& value) {
  if (read_only_) return;
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("INSERT OR REPLACE INTO meta(name, value) VALUES(?1, ?2)");
  sqlite3_bind_text(s, 1, name.data(), int(name.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, value.data(), int(value.size()), SQLITE_STATIC);
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

void DiskStore::put_value(const std::string& ns, const std::string& key,
                          const std::string& value) {
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

std::string DiskStore::exec_for_text(const std::string& sql) {
  Lease c = acquire();
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(c->db, sql.c_str(), -1, &s, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(c->db, rc, "prepare " + sql);
  std::string out;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(s); ++i) {
      const unsigned char* t = sqlite3_column_text(s, i);
      out += (i ? "|" : "");
      out += t ? reinterpret_cast<const char*>(t) : "";
    }
    out += "\n";
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) throw_sqlite(c->db, rc, sql);
  return out;
}

}  // namespace kjit
