// Single flight: one compile of a key at a time across the threads of a process (flights)
// and across processes (claims in the database, claims.h); the others wait for its result.
#include <cjson/cJSON.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "store/cache.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// How long a process waits for another process's compile before compiling itself.
constexpr double kMaxClaimWaitMs = 15 * 60 * 1000.0;

std::string serialize_failure(const Outcome& o) {
  cJSON* j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "status", o.status);
  cJSON_AddStringToObject(j, "message", o.message.c_str());
  cJSON_AddStringToObject(j, "log", o.entry ? o.entry->log.c_str() : "");
  // The key the compile gave its failed result (kjit_binary_key, kjit_compute_key): for a
  // program that reads files it comes from what NVRTC read, which the waiter cannot know.
  cJSON_AddStringToObject(j, "key", o.entry ? o.entry->key.c_str() : "");
  char* text = cJSON_PrintUnformatted(j);
  std::string out = text ? text : "{}";
  cJSON_free(text);
  cJSON_Delete(j);
  return out;
}

Outcome parse_failure(const std::string& text) {
  Outcome o;
  o.status = KJIT_ERROR_COMPILE;
  o.message = "compile failed in another process";
  cJSON* j = cJSON_Parse(text.c_str());
  if (!j) return o;
  const cJSON* st = cJSON_GetObjectItemCaseSensitive(j, "status");
  const cJSON* msg = cJSON_GetObjectItemCaseSensitive(j, "message");
  const cJSON* log = cJSON_GetObjectItemCaseSensitive(j, "log");
  if (cJSON_IsNumber(st)) o.status = static_cast<kjit_status>(st->valueint);
  if (cJSON_IsString(msg)) o.message = msg->valuestring;
  if (o.status == KJIT_ERROR_COMPILE || o.status == KJIT_ERROR_NAME_NOT_FOUND) {  // log binary
    auto e = std::make_shared<Entry>();
    if (cJSON_IsString(log)) e->log = log->valuestring;
    const cJSON* key = cJSON_GetObjectItemCaseSensitive(j, "key");
    if (cJSON_IsString(key) && is_hex_key(key->valuestring)) e->key = key->valuestring;
    o.entry = e;
  }
  cJSON_Delete(j);
  return o;
}

// Failures that follow from the inputs alone (the key covers them all): every waiter gets
// the same answer. Cancellation, memory exhaustion or an NVRTC malfunction belong to the
// process that met them and are never handed to others.
bool deterministic_failure(kjit_status s) {
  return s == KJIT_ERROR_COMPILE || s == KJIT_ERROR_NAME_NOT_FOUND ||
         s == KJIT_ERROR_INVALID_OPTION;
}

// Renews a claim's lease from a helper thread while its owner compiles.
class LeaseKeeper {
 public:
  LeaseKeeper(Claims* claims, const std::string& key, const std::string& owner)
      : thread_([this, claims, key, owner] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, std::chrono::seconds(kClaimRenewSeconds),
                               [this] { return stop_; })) {
            lock.unlock();
            try {
              claims->renew(key, owner);
            } catch (const std::exception& e) {
              log_debug(std::string("could not renew a compile claim: ") + e.what());
            }
            lock.lock();
          }
        }) {}
  ~LeaseKeeper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

Outcome cancelled_outcome(const std::string& key) {
  return Outcome{KJIT_ERROR_CANCELLED,
                 "cancelled while waiting for another compile of " + key + " to finish", nullptr,
                 KJIT_TIER_COMPILED};
}

}  // namespace

Outcome Cache::get_or_compile(const std::string& key, const std::function<Outcome()>& compile,
                              const std::function<bool()>& cancelled, const FlightProbe& probe) {
  kjit_tier tier;
  if (EntryPtr e = lookup(key, &tier)) return Outcome{KJIT_OK, "", e, tier};

  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(flights_mu_);
    const long pid = static_cast<long>(getpid());
    if (pid != flights_pid_) {  // forked while other threads compiled: nobody leads those
      flights_.clear();
      flights_pid_ = pid;
    }
    auto it = flights_.find(key);
    if (it == flights_.end()) {
      flight = std::make_shared<Flight>();
      flights_.emplace(key, flight);
      leader = true;
    } else {
      flight = it->second;
    }
  }
  if (!leader) return wait_for_leader(key, *flight, compile, cancelled, probe);

  Outcome result;
  try {
    result = compile_with_claim(key, compile, cancelled, probe);
  } catch (...) {
    Outcome failed;
    failed.status = KJIT_ERROR_INTERNAL;
    failed.message = "the compiling thread failed";
    finish_flight(key, *flight, failed);
    throw;
  }
  finish_flight(key, *flight, result);
  return result;
}

void Cache::finish_flight(const std::string& key, Flight& flight, const Outcome& result) {
  std::lock_guard<std::mutex> lock(flights_mu_);
  {
    std::lock_guard<std::mutex> fl(flight.mu);
    flight.done = true;
    flight.outcome = result;
  }
  flight.cv.notify_all();
  flights_.erase(key);
}

Outcome Cache::wait_for_leader(const std::string& key, Flight& flight,
                               const std::function<Outcome()>& compile,
                               const std::function<bool()>& cancelled, const FlightProbe& probe) {
  waits_++;
  Outcome o;
  {
    std::unique_lock<std::mutex> lock(flight.mu);
    while (!flight.done) {
      if (cancelled && cancelled()) return cancelled_outcome(key);
      flight.cv.wait_for(lock, std::chrono::milliseconds(cancelled ? 20 : 1000));
    }
    o = flight.outcome;
  }
  if (o.status == KJIT_OK) {
    o.tier = KJIT_TIER_MEMORY;
    count(Counter::memory_hits);
    count(Counter::compile_us_saved, static_cast<uint64_t>(o.entry->compile_ms * 1000.0));
    return o;
  }
  if (deterministic_failure(o.status)) return o;
  // The leader was cancelled or failed for a reason of its own: try for ourselves.
  return get_or_compile(key, compile, cancelled, probe);
}

Outcome Cache::compile_with_claim(const std::string& key, const std::function<Outcome()>& compile,
                                  const std::function<bool()>& cancelled,
                                  const FlightProbe& probe) {
  bool stored = false;  // a stored entry also releases the claim, in the same transaction
  const std::function<Outcome()> run = [&]() {
    std::unique_ptr<FleetClaim> fleet_claim;  // released when this returns
    if (std::optional<Outcome> o = fleet_wait(key, cancelled, &fleet_claim, &stored)) {
      return *o;
    }
    if (probe) {
      if (std::optional<Outcome> found = probe()) return *found;
    }
    count(Counter::misses);
    count(Counter::compiles);
    Outcome o = compile();
    if (o.pch == PchOutcome::Created) count(Counter::pch_created);
    if (o.pch == PchOutcome::Used) count(Counter::pch_used);
    if (o.pch == PchOutcome::Failed) count(Counter::pch_failed);
    if (o.stored) return o;
    if (!o.cacheable) {
      count(Counter::not_stored);
      if (o.not_stored.empty()) o.not_stored = "the cache key cannot vouch for what NVRTC read";
      return o;
    }
    if (o.status == KJIT_OK) {
      o.not_stored.clear();
      stored = disk_put(*o.entry, &o.not_stored);
      memory_.put(o.entry);
      publish(o.entry, fleet_claim.get());
    }
    return o;
  };
  DiskTier* d = index();
  if (!d || d->index.read_only()) return run();

  const std::string me = owner();
  const double start = monotonic_ms();
  int unreadable = 0;  // the key is stored but could not be read: bounded retries
  bool waited = false;
  for (;;) {
    Claim claim;
    try {
      follow_replaced_index(*d);
      // Present: the key has its row, read in the claim's transaction.
      claim = d->claims.try_claim(key, me, DiskStore::has_row_locked, /*failures_answer=*/!probe);
    } catch (const DatabaseCorrupt& e) {
      if (quarantine_disk(e) && ++unreadable < 3) continue;
      return run();
    } catch (const std::exception& e) {
      disk_failed(e, "claiming a key to compile");
      return run();
    }
    if (claim.state == Claim::State::Present) {
      if (EntryPtr e = disk_get(key)) {
        remember(e, KJIT_TIER_DISK);
        count_hit(*e, KJIT_TIER_DISK);
        return Outcome{KJIT_OK, "", e, KJIT_TIER_DISK};
      }
      if (++unreadable >= 3) return run();
      continue;  // evicted or corrupt in between: claim again
    }
    if (claim.state == Claim::State::Failed) return parse_failure(claim.failure);
    if (claim.state == Claim::State::Claimed) {
      Outcome o;
      try {
        LeaseKeeper lease(&d->claims, key, me);
        o = run();
      } catch (...) {
        try {
          d->claims.release(key, me);
        } catch (...) {
        }
        throw;
      }
      try {
        if (o.status != KJIT_OK && o.cacheable &&
            (deterministic_failure(o.status) || o.remember_failure)) {
          d->claims.fail(key, me, serialize_failure(o));
        } else if (!stored) {
          d->claims.release(key, me);  // others compile for themselves
        }
      } catch (const std::exception& e) {
        disk_failed(e, "releasing a compile claim");
      }
      return o;
    }
    if (!waited) {
      waited = true;
      waits_++;
    }
    bool claim_again = false;
    Outcome o = wait_for_process(key, claim, start, run, cancelled, probe, &claim_again);
    if (!claim_again) return o;
  }
}

// Another live process is compiling this key: wait for its entry or its failure; ask to
// claim again (*claim_again) when its claim goes away (released, or its owner died).
Outcome Cache::wait_for_process(const std::string& key, const Claim& claim, double start,
                                const std::function<Outcome()>& run,
                                const std::function<bool()>& cancelled, const FlightProbe& probe,
                                bool* claim_again) {
  double sleep_ms = 2;
  for (;;) {
    if (cancelled && cancelled()) return cancelled_outcome(key);
    if (monotonic_ms() - start > kMaxClaimWaitMs) {
      log_warn("waited too long for another process to compile " + key + "; compiling here");
      return run();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(sleep_ms * 1000)));
    sleep_ms = std::min(sleep_ms * 1.5, 50.0);
    if (EntryPtr e = disk_get(key)) {
      remember(e, KJIT_TIER_DISK);
      count_hit(*e, KJIT_TIER_DISK);
      return Outcome{KJIT_OK, "", e, KJIT_TIER_DISK};
    }
    if (probe) {
      if (std::optional<Outcome> found = probe()) return *found;
    }
    Claim now;
    try {
      now = index()->claims.read(key);
    } catch (const std::exception& e) {
      disk_failed(e, "reading a compile claim");
      return run();
    }
    if (now.state == Claim::State::Failed) return parse_failure(now.failure);
    if (now.state != Claim::State::Busy || now.owner != claim.owner) {
      *claim_again = true;
      return Outcome{};
    }
  }
}

}  // namespace kjit
