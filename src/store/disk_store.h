// The entries of the disk tier: payload files (entry_files.h), one per entry, and their rows
// in the index database (index_db.h), which keep the totals, the listing and the order of
// eviction. A hit reads the file alone, without the index.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/entry.h"
#include "store/entry_files.h"
#include "store/index_db.h"

namespace kjit {

// Row summary used by list().
struct EntryInfo {
  std::string key, target, kernels;
  uint64_t bytes = 0;
  int64_t created = 0, last_used = 0;
  double compile_ms = 0;
};

// Safe to use from any thread; every call but get() opens the index if needed and throws
// kjit::Error (DatabaseCorrupt for a damaged index) when it cannot be used.
class DiskStore {
 public:
  // The index database's file name (IndexDb::kFileName), for the compile worker.
  static constexpr const char* kFileName = IndexDb::kFileName;

  // The entries of `db`'s cache directory (IndexDb::dir()); `db` outlives the store.
  explicit DiskStore(IndexDb& db);
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  const std::string& path() const { return db_.path(); }  // of the index
  bool read_only() const { return db_.read_only(); }
  const EntryFiles& files() const { return files_; }

  // The entry's payload file, read without the index: nullptr when absent. A file that
  // fails verification is removed with its row (unless read-only) and
  // Error(KJIT_ERROR_CACHE_CORRUPT) thrown. A hit records its use in the file's time.
  EntryPtr get(const std::string& key);
  // Writes of the caller made inside the transaction that stores an entry (Cache releases
  // the key's claim there: claims.h).
  using AlsoLocked = std::function<void(SqliteConn&)>;
  // Stores the entry: its payload file, put in place under the index's write lock with its
  // row, in one transaction (which also runs `also`, when given), then evicts
  // least-recently-used entries down to the low-water mark if the database passed
  // `max_bytes` (0 = unbounded). Returns the number evicted. An entry larger than
  // `max_bytes` itself is not stored (and a copy stored before is removed).
  uint64_t put(const Entry& entry, uint64_t max_bytes, const AlsoLocked& also = {});
  bool remove(const std::string& key);
  // Every entry goes, rows and files.
  void clear();
  uint64_t prune(uint64_t max_bytes);  // evict LRU until bytes <= max_bytes; returns count
  void totals(uint64_t* entries, uint64_t* bytes);
  void list(const std::function<bool(const EntryInfo&)>& fn);
  std::vector<std::string> keys();
  // Whether the key has a row, inside the caller's transaction (Claims::Stored).
  static bool has_row_locked(SqliteConn& c, const std::string& key);

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
  // What opening the index does once per process (Cache::open_index), and following an
  // index another process replaced: removes temporaries of dead writers
  // (EntryFiles::sweep_stale_temps), and when the index has no rows while payload files
  // exist (it was deleted or replaced), indexes them (reconcile()). Returns what the
  // reconciliation did (all zero when none was needed).
  Reconciled adopt_if_orphaned();

 private:
  // Evicts least recently used entries (never `keep`) until the total is <= target_bytes.
  uint64_t evict_locked(SqliteConn& c, uint64_t target_bytes, const std::string& keep = {});
  void insert_row(SqliteConn& c, const Entry& e, int64_t created, int64_t last_used);
  // Deletes the row (true when there was one) and dooms the file: purge_locked() removes it
  // in a later write transaction, unless the key was stored again.
  bool delete_locked(SqliteConn& c, const std::string& key);
  void purge_locked(SqliteConn& c);
  void purge();  // purge_locked() in a write transaction of its own
  // Logs a corrupt entry, removes it unless read-only, throws KJIT_ERROR_CACHE_CORRUPT.
  [[noreturn]] void discard_corrupt(const std::string& key, const std::string& why);

  IndexDb& db_;
  EntryFiles files_;
};

}  // namespace kjit
