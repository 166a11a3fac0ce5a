// The disk tier: entries in payload files (entry_files.h), indexed by one SQLite database
// shared by every thread and process of the machine (rows for eviction, totals and
// listing; claims for single flight; counters; named values). A hit reads the file alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "store/claims.h"
#include "store/db_error.h"
#include "store/entry.h"
#include "store/entry_files.h"
#include "util/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kjit {

// Row summary used by list().
struct EntryInfo {
  std::string key, target, kernels;
  uint64_t bytes = 0;
  int64_t created = 0, last_used = 0;
  double compile_ms = 0;
};

struct SqliteConn;

class DiskStore {
 public:
  static constexpr const char* kFileName = "kjit.db";
  // The index's schema (PRAGMA user_version; 6: metadata and code in payload files, the rows
  // keep the index). A database of another schema is never migrated: one of an older kjit
  // is rebuilt (its tables dropped, in one transaction, and this schema created); one of a
  // newer kjit is not used. docs/formats.md.
  static constexpr int kSchemaVersion = 6;
  // The namespace of the schema's own record in the key/value table (spelled out in the SQL
  // of disk_schema.cpp and disk_entries.cpp; clear() keeps it).
  static constexpr const char* kMetaNamespace = "meta";
  static constexpr int kApplicationId = 0x6b6a6974;  // "kjit"
  // Bytes of write-ahead log after which a commit checkpoints it. (Pages stay SQLite's
  // 4 KiB: 16 KiB pages cut the page reads of a large kernel by four, but a fresh process
  // then touches four times the memory for its first hit, which cost it more than it saved,
  // bench/RESULTS.md.)
  static constexpr int kWalCheckpointBytes = 1 << 20;

  // Opens (creating if needed) `dir`/kjit.db. Throws Error(KJIT_ERROR_CACHE) when the
  // database cannot be used and DatabaseCorrupt when the file is not a kjit database.
  // `open_now` false: nothing is opened until the index is first needed (open(), or any
  // call but get()), which then throws as the constructor would.
  DiskStore(std::string dir, bool read_only, bool use_wal, bool open_now = true);
  ~DiskStore();
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

  // Opens the index now (see the constructor); no-op once open.
  void open();

  // The entry's payload file, read without the index: nullptr when absent. A file that
  // fails verification is removed with its row (unless read-only) and
  // Error(KJIT_ERROR_CACHE_CORRUPT) thrown. A hit records its use in the file's time.
  EntryPtr get(const std::string& key);
  // Stores the entry: its payload file, put in place under the index's write lock with its
  // row, in one transaction that also releases any claim on
  // the key, then evicts least-recently-used entries down to the low-water mark if the
  // database passed `max_bytes` (0 = unbounded). Returns the number evicted. An entry
  // larger than `max_bytes` itself is not stored (and a copy stored before is removed).
  uint64_t put(const Entry& entry, uint64_t max_bytes);
  bool remove(const std::string& key);
  void clear();
  uint64_t prune(uint64_t max_bytes);  // evict LRU until bytes <= max_bytes; returns count
  void totals(uint64_t* entries, uint64_t* bytes);
  void list(const std::function<bool(const EntryInfo&)>& fn);
  std::vector<std::string> keys();

  // Index and files agree again: rows whose file is missing go, files without a row that
  // verify get one (a crash between the two, a database moved aside), files that do not
  // verify and temporaries of dead writers go. Counts what it fixed.
  // files_removed: files that did not verify, removed; files_kept: such files that could
  // not be removed; temps_removed: temporaries of writers that died (no entries).
  struct Reconciled {
    uint64_t rows_dropped = 0, files_adopted = 0, files_removed = 0, files_kept = 0,
             temps_removed = 0;
  };
  Reconciled reconcile();
  // What opening the index does once per process (Cache::open_index): removes temporaries
  // of dead writers (EntryFiles::sweep_stale_temps), and when the index has no rows while
  // payload files exist (it was deleted or replaced), indexes them (reconcile()). Returns
  // what the reconciliation did (all zero when none was needed).
  Reconciled adopt_if_orphaned();

  const EntryFiles& files() const { return files_; }

  // Single flight across processes (claims.h, claims.cpp). `owner` identifies this process
  // and cache handle. try_claim: Present (entry stored), Claimed (by us; also when the
  // store is read-only and cannot coordinate), Busy (a live owner compiles it) or Failed (a
  // failure recorded less than kFailedClaimSeconds ago: deliver it, don't retry). A claim
  // whose owner died (same host: the process is gone or a zombie) or stopped renewing it
  // for kClaimLeaseSeconds is taken over.
  // `failures_answer` false: a recorded failure is not this caller's answer (it is taken
  // over as an expired one would be).
  Claim try_claim(const std::string& key, const std::string& owner, bool failures_answer = true);
  void release_claim(const std::string& key, const std::string& owner);
  void renew_claim(const std::string& key, const std::string& owner);  // the lease
  // Records a deterministic failure (a compile error) for every waiter and newcomer.
  void fail_claim(const std::string& key, const std::string& owner, const std::string& failure);
  Claim read_claim(const std::string& key);  // Busy (with owner), Failed, or None

  // The database file was found corrupt while open: move it (and its -wal/-shm) aside as
  // kjit.db.corrupt-<time> unless another process already replaced it, then continue with
  // a fresh database. Returns the path it was moved to ("" if it was already replaced).
  // Throws Error(KJIT_ERROR_CACHE) if the fresh database cannot be created.
  std::string quarantine(const std::string& why);
  // True when the file at path() is no longer the one this store opened (another process
  // quarantined it, or it was deleted); reopen() then switches to the current file.
  bool replaced();
  void reopen();
  // `PRAGMA integrity_check`: "" when the database is sound, else SQLite's report.
  std::string integrity_problems();

  // Usage counters summed over every process (name -> value); add() is one transaction.
  void add_counters(const std::vector<std::pair<std::string, int64_t>>& deltas);
  // Adds the counts `under_lock` returns, calling it inside the write transaction (so that
  // what it takes, e.g. CounterLog::take_all, is added by one process only).
  void add_counters(
      const std::function<std::vector<std::pair<std::string, int64_t>>()>& under_lock);
  bool opened() const { return opened_.load(std::memory_order_acquire); }
  std::vector<std::pair<std::string, int64_t>> counters();

  // Opaque values for other subsystems (e.g. GEMM plans), by namespace.
  std::optional<std::string> get_value(const std::string& ns, const std::string& key);
  void put_value(const std::string& ns, const std::string& key, const std::string& value);

  // Raw SQL for tests and tools (e.g. PRAGMA integrity_check); returns rows joined by '\n'.
  std::string exec_for_text(const std::string& sql);

 private:
  using Conn = SqliteConn;  // sqlite_conn.h
  // A pooled connection, given back to the store when the lease ends.
  struct Lease {
    DiskStore* store;
    Conn* conn;
    Lease(DiskStore* s, Conn* c) : store(s), conn(c) {}
    Lease(Lease&& o) noexcept : store(o.store), conn(o.conn) { o.conn = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (conn) store->release(conn);
    }
    Conn& operator*() { return *conn; }
    Conn* operator->() { return conn; }
  };
  Lease acquire();
  void release(Conn* c);
  // Opens one more connection to path(); `initialise` (the first one, and after a switch
  // of file) also sets the journal mode and checks, creates or rebuilds the schema.
  std::unique_ptr<Conn> open_connection(bool initialise);
  void switch_file(bool move_aside, const std::string& why, std::string* aside);
  // disk_schema.cpp: checks, creates or rebuilds the schema of the file `c` opened.
  void initialise_schema(Conn& c);
  // Drops the tables of an older kjit's schema, inside the caller's write transaction.
  void drop_foreign_schema(Conn& c);
  // Evicts least recently used entries (never `keep`) until the total is <= target_bytes.
  uint64_t evict_locked(Conn& c, uint64_t target_bytes, const std::string& keep = {});
  void insert_row(Conn& c, const Entry& e, int64_t created, int64_t last_used);
  // Deletes the row (true when there was one) and dooms the file: purge_locked() removes it
  // in a later write transaction, unless the key was stored again.
  bool delete_locked(Conn& c, const std::string& key);
  bool has_row_locked(Conn& c, const std::string& key);
  void purge_locked(Conn& c);
  void purge();  // purge_locked() in a write transaction of its own
  // Logs a corrupt entry, removes it unless read-only, throws KJIT_ERROR_CACHE_CORRUPT.
  [[noreturn]] void discard_corrupt(const std::string& key, const std::string& why);

  std::string dir_, path_;
  EntryFiles files_;
  bool read_only_;
  bool use_wal_;
  std::atomic<int> page_size_{4096};  // of the file, read when it is first opened
  long pid_;                          // connections are never reused across fork()
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> pool_;
  uint64_t generation_ = 0;  // bumped when the file is switched; older connections close
  std::string identity_;     // device:inode of the file the connections use
  std::mutex switch_mu_;     // serialises quarantine()/reopen()
  std::mutex open_mu_;
  std::atomic<bool> opened_{false};
};

}  // namespace kjit
