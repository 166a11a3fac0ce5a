// The cache: the memory tier over the disk tier (its parts: DiskTier) over the remote tier,
// with statistics, single flight across threads and processes, and graceful degradation
// when the disk cannot be used. Cache composes the parts; none of them knows another.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "kjit/cache.h"
#include "kjit/compile.h"
#include "store/background_writer.h"
#include "store/claims.h"
#include "store/counter_log.h"
#include "store/counter_table.h"
#include "store/disk_store.h"
#include "store/fact_files.h"
#include "store/facts.h"
#include "store/fleet_claim.h"
#include "store/index_db.h"
#include "store/memory_tier.h"
#include "store/named_values.h"
#include "store/outcome.h"
#include "store/remote.h"

namespace kjit {

struct CacheConfig {
  std::string directory;  // "" = default location
  uint64_t max_bytes = 0;
  uint64_t memory_max_bytes = 0;
  bool read_only = false;
  bool memory_only = false;
  RemoteConfig remote;  // remote.url empty = no fleet tier
};

// The usage counters of a cache handle, each also summed over every process in the
// database under its name (the counters table). X(name) for each; compile_us_saved is in
// microseconds. remote_errors and remote_timeouts are the remote tier's own counts, the
// remote_claim* ones the fleet-wide claims' (fleet_claim.h).
#define KJIT_CACHE_COUNTERS(X) \
  X(memory_hits)               \
  X(disk_hits)                 \
  X(remote_hits)               \
  X(misses)                    \
  X(compiles)                  \
  X(corrupt_entries)           \
  X(evictions)                 \
  X(remote_errors)             \
  X(remote_timeouts)           \
  X(compile_us_saved)          \
  X(not_stored)                \
  X(pch_created)               \
  X(pch_used)                  \
  X(pch_failed)                \
  X(remote_claims)             \
  X(remote_claim_waits)        \
  X(remote_claim_wait_hits)    \
  X(remote_claim_wait_timeouts)

enum class Counter : size_t {
#define KJIT_COUNTER_ENUM(name) name,
  KJIT_CACHE_COUNTERS(KJIT_COUNTER_ENUM)
#undef KJIT_COUNTER_ENUM
};
#define KJIT_COUNTER_ONE(name) +1
constexpr size_t kCounterCount = 0 KJIT_CACHE_COUNTERS(KJIT_COUNTER_ONE);
#undef KJIT_COUNTER_ONE

// One value per counter.
struct Counts {
  uint64_t v[kCounterCount] = {};
  uint64_t& operator[](Counter c) { return v[size_t(c)]; }
  uint64_t operator[](Counter c) const { return v[size_t(c)]; }
};

// Counters and sizes of a cache handle (the C shim turns them into kjit_cache_stats).
struct CacheStats {
  int disk_state = 0;    // kjit_disk_state
  int remote_state = 0;  // kjit_remote_state
  // This handle's count of each counter (`name`) and the total over every process
  // (`total_name`): what the database holds plus what this handle has not added yet.
#define KJIT_COUNTER_FIELDS(name) uint64_t name = 0, total_##name = 0;
  KJIT_CACHE_COUNTERS(KJIT_COUNTER_FIELDS)
#undef KJIT_COUNTER_FIELDS
  uint64_t stores = 0, store_failures = 0, waits = 0;  // this handle only
  uint64_t memory_entries = 0, memory_bytes = 0, disk_entries = 0, disk_bytes = 0;
  uint64_t max_size_bytes = 0;
  std::string message;  // why the disk tier is not OK, or ""
};

// Asked by a flight before it compiles and while it waits for another process: a result
// that became available meanwhile (a dependency manifest another compile stored), or
// nullopt. Must not throw. A flight with a probe is keyed by a request whose files its key
// does not cover: a compile failure then answers the processes that waited for that
// compile, never a later request (the files may have been fixed since).
using FlightProbe = std::function<std::optional<Outcome>()>;

// The disk tier: the parts of one cache directory. Four keep their rows in the index
// database, which opens when one of them first needs it; the fact files and the counter
// log are files of their own, usable without it. Cache ties them together where two must
// agree: an entry's claim is released in the transaction that stores the entry, the
// counter log is added to the counters when the index opens, and the payload files are
// indexed again when the index was replaced.
struct DiskTier {
  DiskTier(const std::string& dir, bool read_only, bool use_wal)
      : index(dir, read_only, use_wal, /*open_now=*/false),
        entries(index),
        claims(index),
        counters(index),
        values(index),
        facts(dir, read_only),
        counter_log(dir) {}
  IndexDb index;           // kjit.db: connections, schema, a corrupt file moved aside
  DiskStore entries;       // payload files and their rows: hits, stores, eviction, listing
  Claims claims;           // single flight across processes
  CounterTable counters;   // usage counters summed over every process
  NamedValues values;      // opaque values by namespace (GEMM plans)
  FactFiles facts;         // small persistent facts (toolchain, toolkit), one file each
  CounterLog counter_log;  // counts of processes that ended without the index
};

// Default cache directory from the environment (KJIT_CACHE_DIR, XDG_CACHE_HOME, HOME, tmp).
std::string default_cache_directory();

class Cache {
 public:
  explicit Cache(CacheConfig config);  // never fails because of the disk
  ~Cache();

  const std::string& directory() const { return dir_; }

  // Memory, then disk, then remote; a hit is counted. nullptr on a miss; `tier` receives
  // where it was found. `corrupt` (optional) is set when a stored entry failed verification
  // (and was removed).
  EntryPtr lookup(const std::string& key, kjit_tier* tier, bool* corrupt = nullptr);
  // The dependency manifest under `key` (Entry::is_manifest), looked up as lookup() does but
  // not counted: a manifest is no kernel.
  EntryPtr lookup_manifest(const std::string& key);
  // The disk tier's entry under `key` (the memory tier's when there is no disk tier),
  // uncounted: for a read-modify-write of a dependency manifest.
  EntryPtr stored(const std::string& key);
  // Stores `e` in every tier (memory, disk, remote) as a compiled entry is. False when the
  // disk tier could not store it, with *why (when given) saying why (Outcome::not_stored).
  bool store(const EntryPtr& e, std::string* why = nullptr);

  // Lookup, else run `compile` exactly once across the threads of this process and the
  // processes sharing the database; others wait for its result. `compile` must not throw
  // for compile errors (it returns them), but may throw kjit::Error for other failures.
  // A compile error (deterministic: the key covers every input) is delivered to every
  // waiter; other failures (cancelled, out of memory...) are not shared: a waiter then
  // compiles itself. A waiter gives up with KJIT_ERROR_CANCELLED when `cancelled` (may be
  // empty) returns true; a process that died mid-compile is taken over within a poll
  // interval (at most 50 ms) of its death.
  // `probe` (may be empty) is asked before compiling and while waiting (FlightProbe).
  Outcome get_or_compile(const std::string& key, const std::function<Outcome()>& compile,
                         const std::function<bool()>& cancelled = {},
                         const FlightProbe& probe = {});

  // Raw insert/remove for tools. insert() throws on failure.
  void insert(const Entry& e);
  bool remove(const std::string& key);
  void clear();
  void clear_memory() { memory_.clear(); }
  uint64_t prune(uint64_t max_bytes);
  void list(const std::function<bool(const EntryInfo&)>& fn);
  void verify(uint64_t* checked, uint64_t* bad);

  // The portable export format (export.h). export_file() writes every disk entry that
  // verifies to `path` and returns how many, signed when $KJIT_EXPORT_KEY is set.
  // import_file() stores the records of `path` that verify (and, with $KJIT_EXPORT_KEY
  // set, carry a valid signature); *imported and *rejected are set even when it throws (a
  // file damaged after some valid records). Both throw kjit::Error, INVALID_ARGUMENT for a
  // $KJIT_EXPORT_KEY that is too short.
  uint64_t export_file(const std::string& path);
  void import_file(const std::string& path, uint64_t* imported, uint64_t* rejected);

  CacheStats stats();

  // Small persistent facts and named values kept in the database (facts.h).
  Facts& facts() { return facts_; }
  // Values shared across the fleet (GEMM plans; cache_fleet.cpp): the disk's, else the
  // remote tier's, which is not stored here: the caller verifies it, then keeps it with
  // facts().put_value(). *from_remote says where it came from. put_shared_value() is
  // facts().put_value() plus a write to a read-write remote tier (on this thread, bounded by its
  // timeout).
  std::optional<std::string> get_shared_value(const std::string& ns, const std::string& key,
                                              bool* from_remote);
  void put_shared_value(const std::string& ns, const std::string& key, const std::string& value);

  // For tests and tools: the disk tier's entries, or nullptr when the disk tier is off;
  // the remote tier, or nullptr when none is configured.
  // disk() opens the index (index()); disk_usable() does not.
  DiskStore* disk();
  RemoteTier* remote() { return remote_.get(); }
  bool disk_usable() const { return disk_ && !disk_off_.load(std::memory_order_acquire); }

 private:
  struct Flight {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Outcome outcome;
  };

  void open_disk();
  // The disk tier for what needs the index (stores, claims, listing, stats...): opened on
  // first need, as the constructor used to (a corrupt file moved aside, an unusable one
  // turning the disk tier off); nullptr when there is no usable disk tier.
  DiskTier* index();
  void open_index();
  // The disk tier for reading payload files (hits): never opens the index.
  DiskTier* files() { return disk_usable() ? disk_.get() : nullptr; }
  // The fact files of the disk tier, nullptr without one; never opens the index.
  const FactFiles* fact_files() { return disk_usable() ? &disk_->facts : nullptr; }
  // After the index was replaced by a new file: index the payload files there.
  void reconcile_after_switch();
  // Another process moved a corrupt index aside (or deleted it): continue with the file
  // now in its place, whose payload files are indexed if it is empty. Claims only work on
  // the file every process shares.
  void follow_replaced_index(DiskTier& d);
  // Stores `e` in the disk tier `d`, releasing its claim in the same transaction.
  uint64_t put_entry(DiskTier& d, const Entry& e);
  void disk_failed(const std::exception& e, const char* during);
  EntryPtr disk_get(const std::string& key, bool* corrupt = nullptr);
  // Stores `e` in the disk tier; false when it could not, with *why (when given) saying why:
  // no disk tier, read-only, "disk full", or the failure.
  bool disk_put(const Entry& e, std::string* why = nullptr);
  std::string no_disk_reason();
  // Single flight (cache_flight.cpp): the leader's compile under a cross-process claim,
  // a follower's wait for the leader, and the leader's hand-over of its result.
  Outcome compile_with_claim(const std::string& key, const std::function<Outcome()>& compile,
                             const std::function<bool()>& cancelled, const FlightProbe& probe);
  Outcome wait_for_leader(const std::string& key, Flight& flight,
                          const std::function<Outcome()>& compile,
                          const std::function<bool()>& cancelled, const FlightProbe& probe);
  void finish_flight(const std::string& key, Flight& flight, const Outcome& result);
  Outcome wait_for_process(const std::string& key, const Claim& claim, double start,
                           const std::function<Outcome()>& run,
                           const std::function<bool()>& cancelled, const FlightProbe& probe,
                           bool* claim_again);
  std::string owner();  // this process and handle (recomputed in a forked child)
  // The database file is corrupt: move it aside and continue with a new one. False when
  // that was not possible (then the problem is reported like any other disk failure).
  bool quarantine_disk(const DatabaseCorrupt& e);
  // Memory, then disk, then remote, uncounted (lookup(), lookup_manifest()).
  EntryPtr find(const std::string& key, kjit_tier* tier, bool* corrupt);
  // Keeps what was found in `tier` in the memory tier.
  void remember(const EntryPtr& e, kjit_tier tier);
  // Counts a hit of a kernel in `tier` and the compile time it saved.
  void count_hit(const Entry& e, kjit_tier tier);
  void open_remote();
  // Writes a compiled entry to the remote tier: through the fleet claim this node holds
  // (then releases it), else in the background.
  void publish(const EntryPtr& e, FleetClaim* claim = nullptr);
  // Before compiling `key` after a miss: another node's entry (an outcome to return, with
  // *stored set when it went to disk), or nullopt to compile here, holding *claim when this
  // node took the fleet claim (cache_fleet.cpp).
  std::optional<Outcome> fleet_wait(const std::string& key, const std::function<bool()>& cancelled,
                                    std::unique_ptr<FleetClaim>* claim, bool* stored);

  CacheConfig config_;
  std::string dir_;
  uint64_t max_bytes_;
  std::string owner_;
  long owner_pid_ = 0;
  std::mutex owner_mu_;
  MemoryTier memory_;
  std::unique_ptr<DiskTier> disk_;  // made by open_disk()
  std::once_flag index_once_;
  std::atomic<bool> disk_off_{false};  // the index could not be opened: no disk tier
  std::string read_only_note_;         // why the disk tier is read-only, if it was found so
  Facts facts_{[this] { return fact_files(); },
               [this] {
                 DiskTier* d = index();
                 return d ? &d->values : nullptr;
               },
               [this](const std::exception& e, const char* during) { disk_failed(e, during); }};
  std::unique_ptr<RemoteTier> remote_;
  std::unique_ptr<FleetClaims> fleet_;  // with remote_, unless claim_wait_ms is 0
  std::atomic<int> disk_state_{KJIT_DISK_DISABLED};
  std::mutex state_mu_;  // guards message_ and reporting
  std::string message_;
  bool reported_ = false;

  // Remote hits are written to disk in the background, off the caller's path.
  BackgroundWriter later_{[this](const Entry& e) { disk_put(e); }};

  std::mutex flights_mu_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;
  long flights_pid_ = 0;  // flights of a parent process have no leader in a forked child

  // Counters of this handle (remote_errors and remote_timeouts stay 0: the remote tier
  // keeps them), and the part of them already added to the database's totals
  // (cache_stats.cpp).
  std::atomic<uint64_t> counts_[kCounterCount] = {};
  std::atomic<uint64_t> stores_{0}, store_failures_{0}, waits_{0};
  void count(Counter c, uint64_t n = 1) { counts_[size_t(c)] += n; }
  Counts current_counts();
  void flush_counters(bool closing = false);
  std::mutex counters_mu_;
  Counts flushed_;
  long counters_pid_ = 0;
};

// The facts of `cache`, or null without one (for key/ and link/, which take only the facts).
inline Facts* facts_of(Cache* cache) {
  return cache ? &cache->facts() : nullptr;
}

}  // namespace kjit
