// Usage counters summed over every process that shares a cache directory, kept in the
// index database (the counters table): name -> value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "store/index_db.h"

namespace kjit {

// The counters of one index database. Safe to use from any thread. Every call opens the
// index if needed and throws kjit::Error (DatabaseCorrupt) when it cannot be used; adding
// to a read-only index is a no-op.
class CounterTable {
 public:
  using Deltas = std::vector<std::pair<std::string, int64_t>>;
  explicit CounterTable(IndexDb& db) : db_(db) {}

  // Adds each delta to its counter, in one write transaction.
  void add(const Deltas& deltas);
  // Adds the counts `under_lock` returns, calling it inside the write transaction (so that
  // what it takes, e.g. CounterLog::take_all, is added by one process only).
  void add(const std::function<Deltas()>& under_lock);
  // Every counter and its value, in no particular order.
  Deltas read();

 private:
  IndexDb& db_;
};

}  // namespace kjit
