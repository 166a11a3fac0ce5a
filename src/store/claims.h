// Single flight across processes: a claim row in the index database says which process
// compiles a key, or which compile failure answers it for a while.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/index_db.h"

namespace kjit {

// What the database says about a key being compiled.
struct Claim {
  enum class State {
    None,     // nobody holds it (read_claim)
    Claimed,  // this caller holds it now and compiles (try_claim)
    Present,  // the entry is stored: read it (try_claim)
    Busy,     // a live owner compiles it: wait
    Failed    // a recent compile failure answers it: deliver `failure`
  } state = State::None;
  std::string owner;    // who holds it (Busy / Failed)
  std::string failure;  // serialized failure (Failed), as given to fail_claim()
};

// How long a recorded compile failure answers every request for its key (the key covers
// every input, so a compile error is deterministic; transient failures are never recorded).
constexpr int64_t kFailedClaimSeconds = 60;
// A compiling owner renews its claim every kClaimRenewSeconds; a claim not renewed for
// kClaimLeaseSeconds is taken over even if its process lives (it could not write: full
// disk, or it hangs). A dead owner is noticed at once.
constexpr int64_t kClaimRenewSeconds = 5;
constexpr int64_t kClaimLeaseSeconds = 30;

// Claims this process holds and compiles for. A claim row naming this process but not
// recorded live here was abandoned (its release failed, e.g. on a full disk).
void live_claim(const std::string& owner, const std::string& key, bool live);
// The entry of `key` is stored: nobody in this process compiles it any more.
void forget_live_claims(const std::string& key);

// A claim holds while its owner lives and renews its lease. True when the owner of a claim
// on `key` taken (or renewed) at `started` no longer holds it at `now`.
bool owner_is_dead(const std::string& owner, const std::string& key, int64_t started, int64_t now);

// The claims of one index database. Safe to use from any thread.
class Claims {
 public:
  explicit Claims(IndexDb& db) : db_(db) {}

  // Whether the key's entry is stored, asked inside the claim's write transaction (so that
  // a claim is never taken on a key stored meanwhile); the entries' part answers it.
  using Stored = std::function<bool(SqliteConn&, const std::string& key)>;

  // `owner` identifies this process and cache handle. try_claim: Present (`stored` says the
  // entry is there), Claimed (by us; also when the index is read-only and cannot
  // coordinate), Busy (a live owner compiles it) or Failed (a failure recorded less than
  // kFailedClaimSeconds ago: deliver it, don't retry). A claim whose owner died (same
  // host: the process is gone or a zombie) or stopped renewing it for kClaimLeaseSeconds is
  // taken over. `failures_answer` false: a recorded failure is not this caller's answer (it
  // is taken over as an expired one would be). Throws kjit::Error (DatabaseCorrupt) when
  // the index cannot be used.
  Claim try_claim(const std::string& key, const std::string& owner, const Stored& stored,
                  bool failures_answer = true);
  void release(const std::string& key, const std::string& owner);
  void renew(const std::string& key, const std::string& owner);  // the lease
  // Records a deterministic failure (a compile error) for every waiter and newcomer.
  void fail(const std::string& key, const std::string& owner, const std::string& failure);
  Claim read(const std::string& key);  // Busy (with owner), Failed, or None
  // The key's entry was stored: its claim goes, inside the caller's write transaction
  // (the one that stores the entry). settled() then forgets it in this process.
  static void settle_locked(SqliteConn& c, const std::string& key);
  static void settled(const std::string& key) { forget_live_claims(key); }
  // Every claim goes (clearing the cache).
  void clear();

 private:
  IndexDb& db_;
};

}  // namespace kjit
