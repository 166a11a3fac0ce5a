// The usage counters of a cache handle, their totals over every process, and stats().
#include <unistd.h>

#include <limits>

#include "store/cache.h"

namespace kjit {
namespace {

const char* const kCounterNames[kCounterCount] = {
#define KJIT_COUNTER_NAME(name) #name,
    KJIT_CACHE_COUNTERS(KJIT_COUNTER_NAME)
#undef KJIT_COUNTER_NAME
};

}  // namespace

Counts Cache::current_counts() {
  Counts c;
  for (size_t i = 0; i < kCounterCount; ++i) c.v[i] = counts_[i];
  if (remote_) {
    const RemoteStats r = remote_->stats();
    c[Counter::remote_errors] = r.errors + r.rejected;
    c[Counter::remote_timeouts] = r.timeouts;
  }
  if (fleet_) {
    const FleetCounters f = fleet_->counters();
    c[Counter::remote_claims] = f.claims;
    c[Counter::remote_claim_waits] = f.waits;
    c[Counter::remote_claim_wait_hits] = f.wait_hits;
    c[Counter::remote_claim_wait_timeouts] = f.wait_timeouts;
  }
  return c;
}

// Adds what this handle counted since the last flush to the database's totals. Called
// after an entry is stored (a write transaction is being paid for anyway) and at close,
// so hits alone never write. `closing` with the index never opened (a process that only
// hit): the counts go to a file instead, which the next process to open the index adds.
void Cache::flush_counters(bool closing) {
  const bool pending = closing && disk_ && !disk_off_.load() && !disk_->index.opened();
  DiskTier* d = pending ? disk_.get() : index();
  if (!d || d->index.read_only()) return;
  std::lock_guard<std::mutex> lock(counters_mu_);
  const Counts now = current_counts();
  const long pid = static_cast<long>(getpid());
  if (counters_pid_ != pid) {
    // A forked child starts from the parent's counts, which are the parent's to report.
    counters_pid_ = pid;
    flushed_ = now;
    return;
  }
  std::vector<std::pair<std::string, int64_t>> deltas;
  for (size_t i = 0; i < kCounterCount; ++i) {
    if (now.v[i] > flushed_.v[i]) {
      deltas.emplace_back(kCounterNames[i], int64_t(now.v[i] - flushed_.v[i]));
    }
  }
  if (deltas.empty()) return;
  try {
    bool written = false;
    if (pending) {
      written = d->counter_log.append(deltas);
      // The log is at its cap (CounterLog::kMaxPendingBytes) or unusable: this process adds
      // its counts to the index itself (opening it also takes the log).
      if (!written) d = index();
    }
    if (!written && d && !d->index.read_only()) d->counters.add(deltas);
    flushed_ = now;
  } catch (const std::exception& e) {
    disk_failed(e, "recording usage counters");
  }
}

CacheStats Cache::stats() {
  CacheStats s;
  DiskTier* d = index();  // opening it settles the disk tier's state
  s.disk_state = disk_state_;
  s.stores = stores_;
  s.store_failures = store_failures_;
  s.waits = waits_;
  if (remote_) {
    s.remote_state = remote_->stats().breaker_open ? KJIT_REMOTE_BACKOFF : KJIT_REMOTE_OK;
  } else if (!config_.remote.url.empty() && !remote_tier_built()) {
    s.remote_state = KJIT_REMOTE_NOT_BUILT;
  }
  // Totals: what the database holds plus what this handle has not added to it yet.
  Counts totals;
  if (d) {
    try {
      for (const auto& [name, value] : d->counters.read()) {
        for (size_t i = 0; i < kCounterCount; ++i) {
          if (name == kCounterNames[i]) totals.v[i] = uint64_t(value);
        }
      }
    } catch (const std::exception& e) {
      disk_failed(e, "reading usage counters");
    }
  }
  Counts handle;
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    handle = current_counts();
    const bool unflushable = !d || d->index.read_only();
    for (size_t i = 0; i < kCounterCount; ++i) {
      const uint64_t base = unflushable ? 0 : flushed_.v[i];
      if (handle.v[i] > base) totals.v[i] += handle.v[i] - base;
    }
  }
#define KJIT_COUNTER_STATS(name)  \
  s.name = handle[Counter::name]; \
  s.total_##name = totals[Counter::name];
  KJIT_CACHE_COUNTERS(KJIT_COUNTER_STATS)
#undef KJIT_COUNTER_STATS
  memory_.totals(&s.memory_entries, &s.memory_bytes);
  if (d) {
    try {
      d->entries.totals(&s.disk_entries, &s.disk_bytes);
      // Temporaries take room too: a writer's in progress, or one of a writer that died
      // (removed once an hour old, EntryFiles::sweep_stale_temps).
      uint64_t temp_bytes = 0;
      d->entries.files().remove_stale_temps(std::numeric_limits<int64_t>::max(), &temp_bytes);
      s.disk_bytes += temp_bytes;
    } catch (const DatabaseCorrupt& e) {
      if (!quarantine_disk(e)) disk_failed(e, "reading cache totals");
    } catch (const std::exception& e) {
      disk_failed(e, "reading cache totals");
    }
  }
  s.max_size_bytes = max_bytes_;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    s.message = message_;
  }
  return s;
}

}  // namespace kjit
