// The cache's side of fleet-wide single flight (fleet_claim.h): before this node compiles
// a key that no tier holds, wait for another node's compile of it or claim it.
#include "store/cache.h"

namespace kjit {

std::optional<Outcome> Cache::fleet_wait(const std::string& key,
                                         const std::function<bool()>& cancelled,
                                         std::unique_ptr<FleetClaim>* claim, bool* stored) {
  if (!fleet_) return std::nullopt;
  std::optional<Entry> found;
  switch (fleet_->acquire(key, owner(), cancelled, &found, claim)) {
    case FleetClaims::Result::Compile:
      return std::nullopt;
    case FleetClaims::Result::Cancelled: {
      Outcome cancelled_result;
      cancelled_result.status = KJIT_ERROR_CANCELLED;
      cancelled_result.message = "cancelled while waiting for another node to compile " + key;
      return cancelled_result;
    }
    case FleetClaims::Result::Found:
      break;
  }
  auto e = std::make_shared<const Entry>(std::move(*found));
  count_hit(*e, KJIT_TIER_REMOTE);
  // Stored now (not later): the disk claim of this key is released with it, in one
  // transaction, and the processes of this machine waiting on it find it.
  *stored = disk_put(*e);
  remember(e, KJIT_TIER_REMOTE);
  Outcome hit;
  hit.entry = e;
  hit.tier = KJIT_TIER_REMOTE;
  return hit;
}

namespace {

std::string shared_value_key(const RemoteTier& remote, const std::string& ns,
                             const std::string& key) {
  return remote.config().prefix + "value:" + ns + ":" + key;
}

}  // namespace

std::optional<std::string> Cache::get_shared_value(const std::string& ns, const std::string& key,
                                                   bool* from_remote) {
  *from_remote = false;
  if (std::optional<std::string> v = facts_.get_value(ns, key)) return v;
  if (!remote_) return std::nullopt;
  // Bounded by KJIT_REMOTE_MAX_ENTRY_BYTES: a huge value is refused, not read whole.
  std::optional<std::string> v = remote_->get_value(shared_value_key(*remote_, ns, key));
  if (!v) return std::nullopt;
  *from_remote = true;
  return v;
}

void Cache::put_shared_value(const std::string& ns, const std::string& key,
                             const std::string& value) {
  facts_.put_value(ns, key, value);
  if (!remote_ || remote_->config().read_only) return;
  remote_->command({"SET", shared_value_key(*remote_, ns, key), value, "EX",
                    std::to_string(remote_->config().ttl_seconds)});
}

}  // namespace kjit
