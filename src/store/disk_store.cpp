// The disk store's connections: opening one (open_connection, the open path: journal mode,
// then the schema check of disk_schema.cpp), the pool they are leased from, and raw SQL.
#include "store/disk_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "store/sqlite_conn.h"
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

DiskStore::DiskStore(std::string dir, bool read_only, bool use_wal, bool open_now)
    : dir_(std::move(dir)),
      path_(join_path(dir_, kFileName)),
      files_(dir_),
      read_only_(read_only),
      use_wal_(use_wal),
      pid_(static_cast<long>(getpid())) {
  if (open_now) open();
}

void DiskStore::open() {
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

DiskStore::~DiskStore() {
  if (static_cast<long>(getpid()) != pid_) {
    // A forked child that never used the store: the connections are the parent's.
    for (auto& c : pool_) Conn::close_quietly(std::move(c));
  }
}

std::unique_ptr<DiskStore::Conn> DiskStore::open_connection(bool initialise) {
  auto c = std::make_unique<Conn>();
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

DiskStore::Lease DiskStore::acquire() {
  open();
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
