// The index database of a cache directory (kjit.db, SQLite, WAL): opening it (journal mode,
// then the schema: checked, created, or rebuilt when an older kjit made it), the pool of
// connections the parts of the store lease from it, and the file itself (moved aside when
// corrupt, followed when another process replaced it). It holds the tables of every part
// (entries, claims, counters, named values) under one schema and one version, and knows
// nothing of what the parts keep in them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/sqlite_conn.h"

namespace kjit {

class IndexDb {
 public:
  static constexpr const char* kFileName = "kjit.db";
  // The index's schema (PRAGMA user_version; 6: metadata and code in payload files, the rows
  // keep the index). A database of another schema is never migrated: one of an older kjit
  // is rebuilt (its tables dropped, in one transaction, and this schema created); one of a
  // newer kjit is not used. docs/formats.md.
  static constexpr int kSchemaVersion = 6;
  // The namespace of the schema's own record in the named values' table (kv); clearing
  // the named values keeps it.
  static constexpr const char* kMetaNamespace = "meta";
  static constexpr int kApplicationId = 0x6b6a6974;  // "kjit"
  // Bytes of write-ahead log after which a commit checkpoints it. (Pages stay SQLite's
  // 4 KiB: 16 KiB pages cut the page reads of a large kernel by four, but a fresh process
  // then touches four times the memory for its first hit, which cost it more than it saved,
  // bench/RESULTS.md.)
  static constexpr int kWalCheckpointBytes = 1 << 20;

  // `dir`/kjit.db, opened (created if needed) now or, `open_now` false, when first needed
  // (open(), acquire()). Opening throws Error(KJIT_ERROR_CACHE) when the database cannot
  // be used and DatabaseCorrupt when the file is not a kjit database.
  IndexDb(std::string dir, bool read_only, bool use_wal, bool open_now = true);
  ~IndexDb();
  IndexDb(const IndexDb&) = delete;
  IndexDb& operator=(const IndexDb&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }
  // Opens the index now (see the constructor); no-op once open.
  void open();
  bool opened() const { return opened_.load(std::memory_order_acquire); }

  // A pooled connection, given back to the pool when the lease ends. Leases are taken by
  // one thread at a time each; any number of threads may hold leases at once.
  class Lease {
   public:
    Lease(IndexDb* db, SqliteConn* c) : db_(db), conn_(c) {}
    Lease(Lease&& o) noexcept : db_(o.db_), conn_(o.conn_) { o.conn_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (conn_) db_->release(conn_);
    }
    SqliteConn& operator*() { return *conn_; }
    SqliteConn* operator->() { return conn_; }

   private:
    IndexDb* db_;
    SqliteConn* conn_;
  };
  // Opens the index if needed (throws as open() does) and leases a connection.
  Lease acquire();

  // The database file was found corrupt while open: move it (and its -wal/-shm) aside as
  // kjit.db.corrupt-<time> unless another process already replaced it, then continue with
  // a fresh database. Returns the path it was moved to ("" if it was already replaced).
  // Throws Error(KJIT_ERROR_CACHE) if the fresh database cannot be created.
  std::string quarantine(const std::string& why);
  // True when the file at path() is no longer the one this index opened (another process
  // quarantined it, or it was deleted); reopen() then switches to the current file.
  bool replaced();
  void reopen();
  // `PRAGMA integrity_check`: "" when the database is sound, else SQLite's report.
  std::string integrity_problems();

  // What a connection of this index runs with, read back from SQLite (for tests and
  // diagnostics): the journal mode, the file's page size, the WAL checkpoint interval in
  // pages.
  struct Settings {
    std::string journal_mode;
    int page_size = 0;
    int wal_autocheckpoint = 0;
  };
  Settings settings();

 private:
  void release(SqliteConn* c);
  // Opens one more connection to path(); `initialise` (the first one, and after a switch
  // of file) also sets the journal mode and checks, creates or rebuilds the schema.
  std::unique_ptr<SqliteConn> open_connection(bool initialise);
  void switch_file(bool move_aside, const std::string& why, std::string* aside);
  // index_schema.cpp: checks, creates or rebuilds the schema of the file `c` opened.
  void initialise_schema(SqliteConn& c);

  std::string dir_, path_;
  bool read_only_;
  bool use_wal_;
  std::atomic<int> page_size_{4096};  // of the file, read when it is first opened
  long pid_;                          // connections are never reused across fork()
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<SqliteConn>> pool_;
  uint64_t generation_ = 0;  // bumped when the file is switched; older connections close
  std::string identity_;     // device:inode of the file the connections use
  std::mutex switch_mu_;     // serialises quarantine()/reopen()
  std::mutex open_mu_;
  std::atomic<bool> opened_{false};
};

}  // namespace kjit
