// Entries written to disk off the caller's path (a remote hit's copy: the first write of a
// process can cost an fsync of the WAL), in order, by one thread started on first use.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "store/entry.h"

namespace kjit {

class BackgroundWriter {
 public:
  // `write` runs on the writer's thread, one entry at a time; it must not throw.
  explicit BackgroundWriter(std::function<void(const Entry&)> write) : write_(std::move(write)) {}
  ~BackgroundWriter() { finish(); }

  // Queues `e` for writing. Thread-safe.
  void push(EntryPtr e);
  // Writes what is queued, then stops the thread; later pushes start it again.
  void finish();

 private:
  std::function<void(const Entry&)> write_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EntryPtr> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kjit
