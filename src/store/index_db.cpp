// The index database's connections: opening one (open_connection, the open path: journal
// mode, then the schema check of index_schema.cpp), the pool they are leased from, and the
// file itself (moved aside when corrupt, followed when replaced).
#include "store/index_db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/fs.h"
#include "util/log.h"

namespace kjit {
namespace {

constexpr int kBusyTimeoutMs = 30000;
constexpr size_t kMaxPooledConnections = 8;

// What the database file's first bytes say, read before SQLite opens it for real.
struct FileHeader {
  bool wal = false;  // already in WAL mode: setting the journal mode again, which costs
                     // hundreds of microseconds, is skipped
  int page_size = 4096;
};

// Read through SQLite's own file handle: opening and closing another descriptor of the
// file would drop every POSIX lock this process holds on it, other connections' included.
FileHeader read_header(sqlite3* db) {
  FileHeader h;
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file ||
      !file->pMethods) {
    return h;
  }
  sqlite3_int64 size = 0;
  if (file->pMethods->xFileSize(file, &size) != SQLITE_OK) return h;
  unsigned char b[20] = {};
  if (size < sqlite3_int64(sizeof b) || file->pMethods->xRead(file, b, sizeof b, 0) != SQLITE_OK) {
    return h;
  }
  if (std::memcmp(b, "SQLite format 3", 16) == 0) {
    h.wal = b[18] == 2 && b[19] == 2;
    const int size_field = (b[16] << 8) | b[17];
    h.page_size = size_field == 1 ? 65536 : (size_field >= 512 ? size_field : 4096);
  }
  return h;
}

}  // namespace

IndexDb::IndexDb(std::string dir, bool read_only, bool use_wal, bool open_now)
    : dir_(std::move(dir)),
      path_(join_path(dir_, kFileName)),
      read_only_(read_only),
      use_wal_(use_wal),
      pid_(static_cast<long>(getpid())) {
  if (open_now) open();
}

void IndexDb::open() {
  if (opened_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(open_mu_);
  if (opened_.load(std::memory_order_relaxed)) return;
  auto first = open_connection(true);
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    identity_ = file_id(path_);
    pool_.push_back(std::move(first));
  }
  opened_.store(true, std::memory_order_release);
}

IndexDb::~IndexDb() {
  if (static_cast<long>(getpid()) != pid_) {
    // A forked child that never used the store: the connections are the parent's.
    for (auto& c : pool_) SqliteConn::close_quietly(std::move(c));
  }
}

std::unique_ptr<SqliteConn> IndexDb::open_connection(bool initialise) {
  auto c = std::make_unique<SqliteConn>();
  const int flags =
      read_only_ ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
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
    const FileHeader header = read_header(c->db);
    page_size_ = header.page_size;
    // Changing the journal mode needs the file to itself and SQLite reports "locked" at
    // once, without its busy handler, while another process opens the same new database:
    // retry for as long as any other lock is waited for.
    const double give_up = monotonic_ms() + kBusyTimeoutMs;
    while (!read_only_ && !(use_wal_ && header.wal)) {
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
  c->exec(read_only_ ? "PRAGMA synchronous=NORMAL"
                     : "PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=67108864",
          "configure");
  if (use_wal_ && !read_only_) {
    // The -wal and -shm files stay when the last connection closes (emptied by the
    // checkpoint at close): every process would otherwise create, size, map and delete
    // both, a large part of a short process's cost to reach its first hit.
    int persist = 1;
    sqlite3_file_control(c->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    // A process that ends without closing leaves its log for the next opener to read
    // into a new index: checkpoint every kWalCheckpointBytes (1 MiB) instead of SQLite's
    // 1000 pages, so that log stays small. The checkpoint runs on the committing thread
    // after a store, which follows a compile of tens of milliseconds or more.
    sqlite3_wal_autocheckpoint(c->db, std::max(1, kWalCheckpointBytes / page_size_));
  }
  return c;
}

IndexDb::Lease IndexDb::acquire() {
  open();
  const long pid = static_cast<long>(getpid());
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pid != pid_) {
      // After fork(): the parent's idle connections are closed without a checkpoint (see
      // SqliteConn::close_quietly) so that our own connections take real locks.
      for (auto& c : pool_) SqliteConn::close_quietly(std::move(c));
      pool_.clear();
      pid_ = pid;
    }
    if (!pool_.empty()) {
      SqliteConn* c = pool_.back().release();
      pool_.pop_back();
      return Lease(this, c);
    }
    generation = generation_;
  }
  auto c = open_connection(false);
  c->generation = generation;
  return Lease(this, c.release());
}

void IndexDb::release(SqliteConn* c) {
  std::unique_ptr<SqliteConn> conn(c);
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (static_cast<long>(getpid()) != pid_) {
    conn.release();  // a connection leased before fork(): it belongs to the parent
  } else if (conn->generation != generation_) {
    SqliteConn::close_quietly(std::move(conn));  // its file was moved aside
  } else if (pool_.size() < kMaxPooledConnections) {
    pool_.push_back(std::move(conn));
  }
}

std::string IndexDb::integrity_problems() {
  Lease c = acquire();
  sqlite3_stmt* s = c->stmt("PRAGMA integrity_check");
  std::string report;
  while (c->step(s, "check integrity") == SQLITE_ROW) report += col_text(s, 0) + "\n";
  sqlite3_reset(s);
  return report == "ok\n" ? std::string() : report;
}

IndexDb::Settings IndexDb::settings() {
  Lease c = acquire();
  Settings out;
  auto read = [&](const char* sql) {
    sqlite3_stmt* s = c->stmt(sql);
    c->step(s, sql);
    std::string v = col_text(s, 0);
    sqlite3_reset(s);
    return v;
  };
  out.journal_mode = read("PRAGMA journal_mode");
  out.page_size = std::atoi(read("PRAGMA page_size").c_str());
  out.wal_autocheckpoint = std::atoi(read("PRAGMA wal_autocheckpoint").c_str());
  return out;
}

void IndexDb::switch_file(bool move_aside, const std::string& why, std::string* aside) {
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
  std::vector<std::unique_ptr<SqliteConn>> old;
  {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    ++generation_;
    old.swap(pool_);
  }
  for (auto& c : old) SqliteConn::close_quietly(std::move(c));
  auto fresh = open_connection(true);
  std::lock_guard<std::mutex> pool_lock(pool_mu_);
  fresh->generation = generation_;
  identity_ = file_id(path_);
  if (static_cast<long>(getpid()) == pid_) pool_.push_back(std::move(fresh));
}

std::string IndexDb::quarantine(const std::string& why) {
  if (read_only_) {
    fail(KJIT_ERROR_CACHE,
         "cache database " + path_ + " is corrupt (" + why + ") and read-only here");
  }
  std::string aside;
  switch_file(true, why, &aside);
  return aside;
}

bool IndexDb::replaced() {
  const std::string current = file_id(path_);
  std::lock_guard<std::mutex> lock(pool_mu_);
  return current != identity_;
}

void IndexDb::reopen() {
  switch_file(false, "", nullptr);
}

}  // namespace kjit
