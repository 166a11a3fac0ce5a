// The payload files of the disk tier: each entry (metadata and code) in one file named by
// its key, under <cache>/entries/<first two hex digits>/<key>; and the small facts
// (toolchain identity, toolkit discovery...) in <cache>/facts/. A fresh process reaches
// its first hit through these alone, without opening the SQLite index (disk_store.h),
// which keeps the rows for LRU eviction, totals, listing and single flight.
//
// A payload file is written whole to a temporary name and renamed into place, so a reader
// sees either the old file or the new one. Every read verifies it: the magic, the layout
// version, the key it was written for, the size of each part, and each part's checksum
// bound to the key (entry_checksum). A torn, truncated, swapped or foreign file is
// Corrupt, never another kernel's code. Files are not synced before the rename (the index
// runs with synchronous=NORMAL as well): after a power loss a file may be empty or torn,
// which the verification turns into a miss.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/entry.h"

namespace kjit {

class EntryFiles {
 public:
  // Version of the file layout, in every file's header: 2 holds the metadata in Entry's
  // binary form. A file of another layout (1, of development builds before 0.2.0, held it
  // as JSON) is Corrupt: a miss, removed and compiled again, never converted.
  static constexpr uint32_t kLayoutVersion = 2;
  // A file read as a hit whose time is older than this gets the current time: the last use
  // (the index learns it when it evicts, DiskStore::evict_locked).
  static constexpr int64_t kTouchSeconds = 3600;
  // Nothing kjit writes is larger: an entry file past kMaxEntryBytes is refused when written
  // and Corrupt when read (never allocated); a fact file past kMaxFactBytes reads as no fact.
  static constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;
  static constexpr size_t kMaxFactBytes = size_t(1) << 20;
  // The pending-counters log takes no append that would take it past kMaxPendingBytes (the
  // process then adds its counts to the index itself, write_pending_counters); a taken log
  // larger than kMaxTakenBytes is discarded unread.
  static constexpr uint64_t kMaxPendingBytes = 64 * 1024;
  static constexpr uint64_t kMaxTakenBytes = 4 * kMaxPendingBytes;
  // A temporary (.tmp-) file not changed for this long belongs to a writer that died: normal
  // operation removes it (sweep_stale_temps).
  static constexpr int64_t kStaleTempSeconds = 3600;

  explicit EntryFiles(std::string cache_dir);

  enum class Read { Missing, Ok, Corrupt };
  // Reads and verifies the entry stored under `key` into *e (all but the key's own field,
  // which the caller set): metadata, blobs, and last_used (the file's modification time).
  // `touch`: record this use in the file's time (see kTouchSeconds). On Corrupt, *why says
  // what is wrong. Never throws for a damaged file; throws Error for out of memory.
  Read read(const std::string& key, Entry* e, bool touch, std::string* why) const;

  // Writes `e` (its metadata with `created`) to a new temporary file in the directory of
  // its final place and returns the temporary's path. Throws Error(KJIT_ERROR_CACHE).
  std::string write_temp(const Entry& e, int64_t created) const;
  // Renames a file from write_temp() to `key`'s place, replacing any file there. Throws
  // Error(KJIT_ERROR_CACHE); the temporary is removed on failure.
  void install(const std::string& temp, const std::string& key) const;
  // Removes the file of `key`; false when there was none.
  bool remove(const std::string& key) const;
  static void remove_temp(const std::string& temp);
  // The file's modification time (the entry's last use), 0 when absent.
  int64_t last_use(const std::string& key) const;
  // Calls `fn` with the key of every payload file (not temporaries). Stops when fn returns true.
  void for_each(const std::function<bool(const std::string& key)>& fn) const;
  // True when at least one name under entries/ looks like a payload file.
  bool any_payload() const;
  // Removes temporaries older than `seconds` (a writer that died); returns how many.
  // *bytes_left (optional): the size of the temporaries that stay.
  uint64_t remove_stale_temps(int64_t seconds, uint64_t* bytes_left = nullptr) const;
  // remove_stale_temps(kStaleTempSeconds), at most once per kStaleTempSeconds / 6 for the
  // cache directory (the time is kept in entries/.swept): what opening the index does.
  // Returns how many it removed.
  uint64_t sweep_stale_temps() const;
  // Removes every payload file and temporary.
  void remove_all() const;

  // A fact by name (facts.h), nullopt when none is recorded or its file does not verify.
  std::optional<std::string> read_fact(const std::string& name) const;
  // Records a fact (temporary file, then rename). Throws Error(KJIT_ERROR_CACHE).
  void write_fact(const std::string& name, const std::string& value) const;

  // Counts of a process that closed without opening the index (Cache::flush_counters),
  // appended to <cache>/counters/pending and added to the index's counters by the next
  // process that opens it (DiskStore::add_pending_counters), which takes the log (renames
  // it to counters/taken-<pid>-<n>) and returns the paths of every taken log; it reads each
  // with read_taken_counters(). Call both under the index's write lock.
  //
  // No count is lost to a log taken while a process appends: the appender holds a shared
  // flock() on the log while it checks that the file it opened is still the one named
  // `pending` and writes; the taker renames first, then takes an exclusive flock() before
  // it reads. An appender that finds its file taken opens the new `pending`.
  //
  // write_pending_counters() returns false, writing nothing, when the log would pass
  // kMaxPendingBytes or `pending` is not a regular file (a link is never followed): the
  // caller then adds its counts to the index itself. Throws Error(KJIT_ERROR_CACHE).
  bool write_pending_counters(const std::string& text) const;
  std::vector<std::string> take_pending_counters() const;
  enum class Taken { Read, Busy, Unusable };
  // Busy: an appender still holds it (left for a later taker); Unusable (with *why): not
  // a regular file, or larger than kMaxTakenBytes (the caller removes it); Read: *text.
  Taken read_taken_counters(const std::string& file, std::string* text, std::string* why) const;
  // Called between the open and the lock of write_pending_counters (tests only).
  static void (*pending_hook_for_test)(const std::string& log);

  std::string path(const std::string& key) const;    // where `key`'s file lives
  const std::string& root() const { return root_; }  // <cache>/entries

 private:
  std::string cache_dir_, root_, facts_, counters_;
};

}  // namespace kjit
