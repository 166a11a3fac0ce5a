// The SQLite tier: one database file shared by every thread and process of the machine.
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
#include "store/entry.h"
#include "util/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kjit {

// Thrown when SQLite reports the database file itself as corrupt or not a database.
class DatabaseCorrupt : public Error {
 public:
  explicit DatabaseCorrupt(std::string message)
      : Error(KJIT_ERROR_CACHE_CORRUPT, std::move(message)) {}
};

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
  // 3: checksums bound to the entry's key (entry_checksum); entries of 1 and 2 are dropped.
  // 4: one key/value table: the facts of `meta` moved into `kv` (namespace kMetaNamespace).
  static constexpr int kSchemaVersion = 5;
  // The namespace of get_meta()/set_meta() in the key/value table (spelled out in the SQL
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
  DiskStore(std::string dir, bool read_only, bool use_wal);
  ~DiskStore();
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }

  // nullptr when absent. A blob or metadata that fails verification deletes the entry
  // and throws Error(KJIT_ERROR_CACHE_CORRUPT).
  EntryPtr get(const std::string& key);
  // Stores the entry, its blobs and metadata in one transaction, releasing any claim on
  // the key, then evicts least-recently-used entries down to the low-water mark if the
  // database passed `max_bytes` (0 = unbounded). Returns the number evicted.
  uint64_t put(const Entry& entry, uint64_t max_bytes);
  bool remove(const std::string& key);
  void clear();
  uint64_t prune(uint64_t max_bytes);  // evict LRU until bytes <= max_bytes; returns count
  void totals(uint64_t* entries, uint64_t* bytes);
  void list(const std::function<bool(const EntryInfo&)>& fn);
  std::vector<std::string> keys();

  // Recency: remember that `key` was used; written coarsely in batches.
  void touch(const std::string& key, int64_t last_used);
  void flush_touches();

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
  std::vector<std::pair<std::string, int64_t>> counters();

  // Toolchain facts and other metadata: the kMetaNamespace part of the key/value table.
  std::optional<std::string> get_meta(const std::string& name);
  void set_meta(const std::string& name, const std::string& value);

  // Opaque values for other subsystems (e.g. GEMM plans), by namespace.
  std::optional<std::string> get_value(const std::string& ns, const std::string& key);
  void put_value(const std::string& ns, const std::string& key, const std::string& value);

  // Raw SQL for tests and tools (e.g. PRAGMA integrity_check); returns rows joined by '\n'.
  std::string exec_for_text(const std::string& sql);

 private:
  using Conn = SqliteConn;  // sqlite_conn.h
  struct Lease;
  Lease acquire();
  void release(Conn* c);
  // Opens one more connection to path(); `initialise` (the first one, and after a switch
  // of file) also sets the journal mode and checks, creates or migrates the schema.
  std::unique_ptr<Conn> open_connection(bool initialise);
  void switch_file(bool move_aside, const std::string& why, std::string* aside);
  void initialise_schema(Conn& c);  // disk_schema.cpp
  uint64_t evict_locked(Conn& c, uint64_t target_bytes);
  void delete_locked(Conn& c, const std::string& key);
  // Logs a corrupt entry, removes it unless read-only, throws KJIT_ERROR_CACHE_CORRUPT.
  [[noreturn]] void discard_corrupt(const std::string& key, const std::string& why);
  void flush_touches_locked(Conn& c);

  std::string dir_, path_;
  bool read_only_;
  bool use_wal_;
  std::atomic<int> page_size_{4096};  // of the file, read when it is first opened
  long pid_;                          // connections are never reused across fork()
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> pool_;
  uint64_t generation_ = 0;  // bumped when the file is switched; older connections close
  std::string identity_;     // device:inode of the file the connections use
  std::mutex switch_mu_;     // serialises quarantine()/reopen()
  // The file has schema 3 and is read-only here: facts are read from its `meta` table.
  std::atomic<bool> legacy_meta_{false};
  std::mutex touch_mu_;
  std::vector<std::pair<std::string, int64_t>> touches_;
};

}  // namespace kjit
