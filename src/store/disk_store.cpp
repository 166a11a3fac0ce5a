// The disk store's connections: opening one (open_connection, the open path: journal mode,
// then the schema check of disk_schema.cpp), the pool they are leased from, and raw SQL.
#include "store/disk_store.h"

#include <sqlite3.h>
#include <unistd.h>

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
