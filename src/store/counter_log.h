// The counter log: the usage counts of processes that closed without opening the index
// (Cache::flush_counters), appended to <cache>/counters/pending, and added to the index's
// counters by the next process that opens it, which takes the log (renames it to
// counters/taken-<pid>-<n>) and reads every taken log. Written, parsed and stored here
// alone; the index adds what read() returns. Format: docs/formats.md.
//
// No count is lost to a log taken while a process appends: the appender holds a shared
// flock() on the log while it checks that the file it opened is still the one named
// `pending` and writes; the taker renames first, then takes an exclusive flock() before it
// reads. An appender that finds its file taken opens the new `pending`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kjit {

class CounterLog {
 public:
  using Deltas = std::vector<std::pair<std::string, int64_t>>;  // counter name -> count

  // The log takes no append that would take it past kMaxPendingBytes (the process then adds
  // its counts to the index itself); a taken log larger than kMaxTakenBytes is discarded
  // unread.
  static constexpr uint64_t kMaxPendingBytes = 64 * 1024;
  static constexpr uint64_t kMaxTakenBytes = 4 * kMaxPendingBytes;

  explicit CounterLog(const std::string& cache_dir);

  // Appends `deltas` in one write. False, writing nothing, when the log would pass
  // kMaxPendingBytes or `pending` is not a regular file (a link is never followed): the
  // caller then adds its counts to the index itself. Throws Error(KJIT_ERROR_CACHE).
  bool append(const Deltas& deltas) const;
  // Takes the log and returns the paths of every taken log (also those a process that died
  // took, or that an appender still held). Call take() and read() under the index's write
  // lock, so that no two processes add the same log.
  std::vector<std::string> take() const;
  enum class Taken { Read, Busy, Unusable };
  // Busy: an appender still holds it (left for a later taker); Unusable (with *why): not a
  // regular file, or larger than kMaxTakenBytes (the caller removes it); Read: *deltas, its
  // well-formed lines (malformed ones are skipped).
  Taken read(const std::string& file, Deltas* deltas, std::string* why) const;
  // True when counters/ holds anything (a log, a log taken but not added, something that is
  // no log: take_all() then has work). A link or a file in the directory's place is removed
  // (never followed), and false returned.
  bool pending() const;
  // take(), then read() each taken log and remove it: the sum of their well-formed lines.
  // Unusable logs are removed unread (logged); Busy ones stay for a later taker. Call under
  // the index's write lock (CounterTable::add): a crash before that commits loses
  // these counts (statistics), never doubles them. Never waits long for an appender.
  Deltas take_all() const;
  // The directory the log lives in.
  const std::string& dir() const { return dir_; }

  // Called between the open and the lock of append() (tests only).
  static void (*pending_hook_for_test)(const std::string& log);

 private:
  Taken read_text(const std::string& file, std::string* text, std::string* why) const;
  std::string cache_dir_, dir_;
};

}  // namespace kjit
