// The payload files of the disk tier: each entry (metadata and code) in one file named by
// its key, under <cache>/entries/<first two hex digits>/<key>. A fresh process reaches
// its first hit through these alone (and the fact files, fact_files.h), without opening the
// SQLite index (index_db.h), which keeps the rows for LRU eviction, totals, listing and
// single flight.
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
  // and Corrupt when read (never allocated).
  static constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;
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

  std::string path(const std::string& key) const;    // where `key`'s file lives
  const std::string& root() const { return root_; }  // <cache>/entries

 private:
  std::string cache_dir_, root_;
};

}  // namespace kjit
