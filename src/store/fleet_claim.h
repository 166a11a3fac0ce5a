// Fleet-wide single flight over the remote tier: one compile of a key across every node
// sharing a Redis-protocol server. On a miss in every tier, a writer node claims the key
// in the server (a claim with a lease, renewed while it compiles), compiles, writes the
// entry and releases the claim; other nodes wait for the entry, polling with backoff.
//
// A claim is never a dependency: a wait ends at the deadline (claim_wait_ms), when the
// claim's owner stops renewing it for a lease (claim_lease_ms: it died), when the owner
// releases it without an entry (its compile failed), or at the first failure, timeout or
// unexpected reply of the server (the remote tier's breaker then works as for lookups).
// Then the node compiles itself, as it would without a remote tier.
//
// In the server: "<prefix>claim:<key>" holds "kjit-claim1 <lease_ms> <seq> <owner>" with
// a PX expiry of one lease; every renewal rewrites it (seq + 1), so a waiter also spots a
// claim that nobody renews even where the server kept it past its expiry (a stale claim
// left without one). Read-only nodes wait on claims but never take one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/entry.h"
#include "store/remote.h"

namespace kjit {

struct FleetCounters {
  uint64_t claims = 0;         // claims taken by this handle
  uint64_t waits = 0;          // misses that waited on another node's claim
  uint64_t wait_hits = 0;      // waits that ended with the entry from the remote tier
  uint64_t wait_timeouts = 0;  // waits that reached the deadline (then compiled here)
};

// A claim held by this node while it compiles; renewed from a helper thread until
// finish() or destruction, which releases it (only while this node still owns it).
class FleetClaim {
 public:
  // Starts renewing the claim that this node took with claim_value(lease_ms, 0, owner).
  FleetClaim(RemoteTier* remote, std::string claim_key, std::string owner, int lease_ms);
  ~FleetClaim();  // releases without an entry if finish() was not called
  FleetClaim(const FleetClaim&) = delete;
  FleetClaim& operator=(const FleetClaim&) = delete;

  // Writes `e` (when not null) to the remote tier on this thread, then releases the
  // claim: waiters find the entry as soon as the claim is gone. Without an entry (the
  // compile failed or is not to be shared) the claim is replaced by a "released" marker
  // for one lease, and waiters compile themselves. True when `e` was written.
  bool finish(const Entry* e);

 private:
  struct Renewer;
  RemoteTier* remote_;
  std::string claim_key_;
  int lease_ms_;
  std::unique_ptr<Renewer> renewer_;
  bool finished_ = false;
};

class FleetClaims {
 public:
  // `remote` must outlive this object.
  explicit FleetClaims(RemoteTier* remote);

  enum class Result { Compile, Found, Cancelled };

  // Called after a miss in every tier, before compiling `key`. Found: *found holds the
  // verified entry that another node compiled (while this one waited, or just before).
  // Compile: compile here; *held is set when this node took the claim (finish it after
  // the compile). Cancelled: `cancelled` returned true while waiting. Never throws for a
  // server's failure; blocks at most claim_wait_ms (plus one operation timeout at most).
  Result acquire(const std::string& key, const std::string& owner,
                 const std::function<bool()>& cancelled, std::optional<Entry>* found,
                 std::unique_ptr<FleetClaim>* held);

  FleetCounters counters() const;

 private:
  RemoteTier* remote_;
  std::atomic<uint64_t> claims_{0}, waits_{0}, wait_hits_{0}, wait_timeouts_{0};
  std::atomic<bool> unsupported_{false};  // the server refused the scripts
};

// The value of a claim. parse_claim_lease() gives the lease a claim value states, or
// `fallback` when it is not a well-formed claim.
std::string claim_value(int lease_ms, uint64_t seq, const std::string& owner);
int parse_claim_lease(const std::string& value, int fallback);
extern const char* const kClaimReleased;

}  // namespace kjit
