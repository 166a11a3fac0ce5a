#include "store/fleet_claim.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "util/fs.h"
#include "util/log.h"

namespace kjit {

const char* const kClaimReleased = "kjit-claim1-released";

namespace {

constexpr const char* kClaimPrefix = "kjit-claim1 ";

// KEYS[1] entry, KEYS[2] claim; ARGV[1] new claim value, ARGV[2] lease (ms), ARGV[3] a
// stale claim value that may be replaced (or ""), ARGV[4] "1" to take a free claim,
// ARGV[5] "1" to pass over a stored entry (it failed verification), ARGV[6] the largest
// entry to return. Replies {1, entry} entry present, {2, value} claimed by another,
// {3, ''} claimed now, {0, ''} free, {4, ''} an entry larger than ARGV[6] (not sent).
constexpr const char* kClaimScript = R"lua(
if ARGV[5] ~= '1' then
  local size = redis.call('STRLEN', KEYS[1])
  if size > tonumber(ARGV[6]) then return {4, ''} end
  if size > 0 then return {1, redis.call('GET', KEYS[1])} end
end
local cur = redis.call('GET', KEYS[2])
if cur and cur ~= ARGV[3] then return {2, cur} end
if ARGV[4] ~= '1' then
  if cur then return {2, cur} end
  return {0, ''}
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {3, ''}
)lua";
// KEYS[1] claim; ARGV[1] the value this node wrote, ARGV[2] the next one ("" deletes),
// ARGV[3] lease (ms). Replaces the claim only while it still holds ARGV[1].
constexpr const char* kSwapScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
)lua";

}  // namespace

std::string claim_value(int lease_ms, uint64_t seq, const std::string& owner) {
  return kClaimPrefix + std::to_string(lease_ms) + " " + std::to_string(seq) + " " + owner;
}

int parse_claim_lease(const std::string& value, int fallback) {
  const size_t n = std::char_traits<char>::length(kClaimPrefix);
  if (value.compare(0, n, kClaimPrefix) != 0) return fallback;
  char* end = nullptr;
  const long lease = std::strtol(value.c_str() + n, &end, 10);
  if (end == value.c_str() + n || *end != ' ' || lease <= 0) return fallback;
  return int(std::min<long>(lease, 24L * 3600 * 1000));
}

// Renews the claim every third of a lease, rewriting its value (seq + 1).
struct FleetClaim::Renewer {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::string value;  // what the server holds, as far as this node knows
  std::string owner;
  uint64_t seq = 0;
  std::thread thread;

  void run(RemoteTier* remote, const std::string& claim_key, int lease_ms) {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(std::max(lease_ms / 3, 10)),
                        [this] { return stop; })) {
      const std::string next = claim_value(lease_ms, seq + 1, owner);
      const std::string current = value;
      lock.unlock();
      const auto r = remote->command(
          {"EVAL", kSwapScript, "1", claim_key, current, next, std::to_string(lease_ms)},
          lease_ms / 3);
      lock.lock();
      if (r && r->type == RemoteReply::Type::Integer && r->integer == 1) {
        value = next;
        ++seq;
      } else if (r) {
        log_debug("a fleet compile claim was taken over while renewing it: " + claim_key);
      }
    }
  }
};

FleetClaim::FleetClaim(RemoteTier* remote, std::string claim_key, std::string owner, int lease_ms)
    : remote_(remote),
      claim_key_(std::move(claim_key)),
      lease_ms_(lease_ms),
      renewer_(std::make_unique<Renewer>()) {
  renewer_->value = claim_value(lease_ms, 0, owner);
  renewer_->owner = std::move(owner);
  renewer_->thread = std::thread([this] { renewer_->run(remote_, claim_key_, lease_ms_); });
}

FleetClaim::~FleetClaim() {
  if (!finished_) finish(nullptr);
}

bool FleetClaim::finish(const Entry* e) {
  if (finished_) return false;
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(renewer_->mu);
    renewer_->stop = true;
  }
  renewer_->cv.notify_all();
  renewer_->thread.join();
  const bool written = e && remote_->put_now(*e);
  remote_->command({"EVAL", kSwapScript, "1", claim_key_, renewer_->value,
                    written ? std::string() : std::string(kClaimReleased),
                    std::to_string(lease_ms_)});
  return written;
}

FleetClaims::FleetClaims(RemoteTier* remote) : remote_(remote) {}

FleetCounters FleetClaims::counters() const {
  FleetCounters c;
  c.claims = claims_;
  c.waits = waits_;
  c.wait_hits = wait_hits_;
  c.wait_timeouts = wait_timeouts_;
  return c;
}

FleetClaims::Result FleetClaims::acquire(const std::string& key, const std::string& owner,
                                         const std::function<bool()>& cancelled,
                                         std::optional<Entry>* found,
                                         std::unique_ptr<FleetClaim>* held) {
  const RemoteConfig& cfg = remote_->config();
  if (unsupported_ || cfg.claim_wait_ms <= 0) return Result::Compile;
  const bool take = !cfg.read_only;
  const int lease = cfg.claim_lease_ms;
  const std::string entry_key = remote_->entry_name(key);
  const std::string claim_key = remote_->claim_name(key);
  const std::string mine = claim_value(lease, 0, owner);
  const double start = monotonic_ms(), deadline = start + cfg.claim_wait_ms;
  bool waited = false;
  std::string seen, stale;  // the claim value last seen, and one found not renewed
  bool pass_over = false;   // the stored entry failed verification: claim as if absent
  double seen_since = start;
  // A failed call may be a failover under way (behind Sentinels, or in a cluster whose
  // master of this key's slot has a replica): retried (the tier asks the Sentinels for
  // the new master, or reloads the slot map) for at most one lease, then compile. A
  // cluster master without a replica degrades its slots' keys at once.
  double failing_since = -1;
  for (;;) {
    const int budget = waited ? std::max(1, int(deadline - monotonic_ms())) : 0;
    std::string error;
    const auto r = remote_->command(
        {"EVAL", kClaimScript, "2", entry_key, claim_key, mine, std::to_string(lease), stale,
         take ? "1" : "0", pass_over ? "1" : "0", std::to_string(cfg.max_entry_bytes)},
        budget, &error);
    // A cluster slot being moved to another master refuses the script (it reads two keys)
    // until the move ends: a resharding, retried as a failover is.
    const bool migrating = !r && error.rfind("TRYAGAIN", 0) == 0;
    if ((!r && error.empty() && remote_->may_fail_over(claim_key)) || migrating) {
      const double now = monotonic_ms();
      if (failing_since < 0) failing_since = now;
      if (now - failing_since < lease && now < deadline && !(cancelled && cancelled())) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::max(lease / 20, 5)));
        continue;
      }
    }
    if (r) failing_since = -1;
    if (!r) {
      if (error.find("unknown command") != std::string::npos && !unsupported_.exchange(true)) {
        log_warn("remote cache tier " + cfg.url + " has no scripting (" + error +
                 "); compiling without fleet claims");
      } else if (!error.empty()) {
        log_debug("remote cache tier refused a fleet claim of " + key + ": " + error);
      }
      return Result::Compile;  // down, slow or odd: compile as without claims
    }
    const bool well_formed = r->type == RemoteReply::Type::Array && r->elements.size() == 2 &&
                             r->elements[0].type == RemoteReply::Type::Integer;
    const long long code = well_formed ? r->elements[0].integer : -1;
    if (code == 1 && r->elements[1].type == RemoteReply::Type::String) {
      // The entry is there (written since our lookup, or while we waited).
      Entry e;
      if (decode_envelope(r->elements[1].str, key, &e)) {
        *found = std::move(e);
        if (waited) wait_hits_++;
        return Result::Found;
      }
      // Garbage under the key: a claimed compile replaces it (put_now overwrites).
      pass_over = true;
      continue;
    }
    if (code == 4) {
      // Too large to fetch (another node allows larger entries): compile here, as for an
      // entry that fails verification.
      pass_over = true;
      continue;
    }
    if (code == 3) {
      claims_++;
      *held = std::make_unique<FleetClaim>(remote_, claim_key, owner, lease);
      return Result::Compile;
    }
    if (code != 2 || r->elements[1].type != RemoteReply::Type::String) return Result::Compile;
    const std::string& value = r->elements[1].str;
    if (value == kClaimReleased) return Result::Compile;  // its compile failed: ours then
    pass_over = false;  // someone compiles: its entry will replace what failed to verify
    if (!waited) {
      waited = true;
      waits_++;
    }
    const double now = monotonic_ms();
    if (value != seen) {
      seen = value;
      seen_since = now;
    } else if (now - seen_since > parse_claim_lease(value, lease)) {
      // Not renewed for a whole lease: its owner is gone, whatever the server says.
      if (!take) return Result::Compile;
      log_info("fleet compile claim of " + key + " was not renewed for its lease; taking it over");
      stale = value;
      continue;
    }
    if (now >= deadline) {
      wait_timeouts_++;
      log_warn("waited " + std::to_string(cfg.claim_wait_ms) + " ms for another node to compile " +
               key + "; compiling here");
      return Result::Compile;
    }
    if (cancelled && cancelled()) return Result::Cancelled;
    // Polls grow with the wait (an eighth of it, 2 to 50 ms): a short compile is seen
    // soon after it lands, a long one costs the server few polls.
    const double nap = std::min(std::clamp((now - start) / 8, 2.0, 50.0), deadline - now);
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(nap * 1000)));
  }
}

}  // namespace kjit
