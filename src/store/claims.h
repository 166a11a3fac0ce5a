// Single flight across processes: a claim row in the database says which process compiles
// a key, or which compile failure answers it for a while (DiskStore's claim methods, in
// claims.cpp).
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace kjit
