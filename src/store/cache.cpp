#include "store/cache.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "store/export.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit {
namespace {

constexpr uint64_t kDefaultMaxBytes = 1ull << 30;
constexpr uint64_t kDefaultMemoryBytes = 64ull << 20;
// How long a process waits for another process's compile before compiling itself.
constexpr double kMaxClaimWaitMs = 15 * 60 * 1000.0;

// "1G", "512M", "100k", "12345" -> bytes; 0 when malformed.
uint64_t parse_size(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || v < 0) return 0;
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; break;
    case 'm': case 'M': mult = 1024.0 * 1024; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    case '\0': break;
    default: return 0;
  }
  return static_cast<uint64_t>(v * mult);
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0;
}

std::string serialize_failure(const Outcome& o) {
  cJSON* j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "status", o.status);
  cJSON_AddStringToObject(j, "message", o.message.c_str());
  cJSON_AddStringToObject(j, "log", o.entry ? o.entry->log.c_str() : "");
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
  LeaseKeeper(DiskStore* disk, const std::string& key, const std::string& owner)
      : thread_([this, disk, key, owner] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, std::chrono::seconds(kClaimRenewSeconds),
                               [this] { return stop_; })) {
            lock.unlock();
            try {
              disk->renew_claim(key, owner);
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
                 "cancelled while waiting for another compile of " + key + " to finish",
                 nullptr, KJIT_TIER_COMPILED};
}

std::string process_owner_id(const void* handle) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string start;
  if (auto stat = read_file("/proc/self/stat")) {
    const size_t paren = stat->rfind(')');
    if (paren != std::string::npos) {
      size_t pos = paren + 2;
      for (int field = 3; field < 22 && pos != std::string::npos; ++field) {
        pos = stat->find(' ', pos);
        if (pos != std::string::npos) ++pos;
      }
      if (pos != std::string::npos) start = stat->substr(pos, stat->find(' ', pos) - pos);
    }
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s|%ld|%s|%p", host, static_cast<long>(getpid()),
                start.c_str(), handle);
  return buf;
}

}  // namespace

std::string default_cache_directory() {
  if (const char* d = std::getenv("KJIT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return join_path(x, "kjit");
  if (const char* h = std::getenv("HOME"); h && *h) return join_path(h, ".cache/kjit");
  const char* tmp = std::getenv("TMPDIR");
  return join_path(tmp && *tmp ? tmp : "/tmp", "kjit-" + std::to_string(getuid()));
}

Cache::Cache(CacheConfig config)
    : config_(std::move(config)),
      max_bytes_(config_.max_bytes ? config_.max_bytes
                                   : (parse_size(std::getenv("KJIT_CACHE_MAX_SIZE"))
                                          ? parse_size(std::getenv("KJIT_CACHE_MAX_SIZE"))
                                          : kDefaultMaxBytes)),
      owner_(process_owner_id(this)),
      memory_(config_.memory_max_bytes ? config_.memory_max_bytes : kDefaultMemoryBytes) {
  owner_pid_ = flights_pid_ = counters_pid_ = static_cast<long>(getpid());
  if (env_flag("KJIT_CACHE_READONLY")) config_.read_only = true;
  open_remote();
  if (config_.memory_only || env_flag("KJIT_CACHE_DISABLE")) {
    disk_state_ = KJIT_DISK_DISABLED;
    return;
  }
  dir_ = config_.directory.empty() ? default_cache_directory() : config_.directory;
  open_disk();
}

void Cache::open_remote() {
  if (config_.remote.url.empty()) return;
  try {
    remote_ = std::make_unique<RemoteTier>(config_.remote);
    if (config_.remote.claim_wait_ms > 0) fleet_ = std::make_unique<FleetClaims>(remote_.get());
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = "remote tier not used: " + e.message();
    log_warn(message_);
  }
}

void Cache::publish(const EntryPtr& e, FleetClaim* claim) {
  if (claim && claim->finish(e.get())) return;
  if (remote_) remote_->put(*e);
}

Cache::~Cache() {
  {
    std::lock_guard<std::mutex> lock(later_mu_);
    later_stop_ = true;
  }
  later_cv_.notify_all();
  if (later_thread_.joinable()) later_thread_.join();  // pending writes are finished
  flush_counters();
}

const char* const Cache::kCounterNames[kCounters] = {
    "memory_hits", "disk_hits", "remote_hits", "misses", "compiles",
    "corrupt_entries", "evictions", "remote_errors", "remote_timeouts", "compile_us_saved",
    "not_stored", "pch_created", "pch_used", "pch_failed", "remote_claims",
    "remote_claim_waits", "remote_claim_wait_hits", "remote_claim_wait_timeouts"};

Cache::Counts Cache::current_counts() {
  Counts c;
  c.v[0] = memory_hits_;
  c.v[1] = disk_hits_;
  c.v[2] = remote_hits_;
  c.v[3] = misses_;
  c.v[4] = compiles_;
  c.v[5] = corrupt_;
  c.v[6] = evictions_;
  if (remote_) {
    const RemoteStats r = remote_->stats();
    c.v[7] = r.errors + r.rejected;
    c.v[8] = r.timeouts;
  }
  c.v[9] = saved_us_;
  c.v[10] = not_stored_;
  c.v[11] = pch_created_;
  c.v[12] = pch_used_;
  c.v[13] = pch_failed_;
  if (fleet_) {
    const FleetCounters f = fleet_->counters();
    c.v[14] = f.claims;
    c.v[15] = f.waits;
    c.v[16] = f.wait_hits;
    c.v[17] = f.wait_timeouts;
  }
  return c;
}

// Adds what this handle counted since the last flush to the database's totals. Called
// after an entry is stored (a write transaction is being paid for anyway) and at close,
// so hits alone never write.
void Cache::flush_counters() {
  if (!disk_ || disk_->read_only()) return;
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
  for (size_t i = 0; i < kCounters; ++i) {
    if (now.v[i] > flushed_.v[i]) {
      deltas.emplace_back(kCounterNames[i], int64_t(now.v[i] - flushed_.v[i]));
    }
  }
  try {
    disk_->add_counters(deltas);
    flushed_ = now;
  } catch (const std::exception& e) {
    disk_failed(e, "recording usage counters");
  }
}

void Cache::store_later(const EntryPtr& e) {
  std::lock_guard<std::mutex> lock(later_mu_);
  later_.push_back(e);
  if (!later_thread_.joinable()) {
    later_thread_ = std::thread([this] {
      for (;;) {
        EntryPtr next;
        {
          std::unique_lock<std::mutex> l(later_mu_);
          later_cv_.wait(l, [&] { return later_stop_ || !later_.empty(); });
          if (later_.empty()) return;
          next = later_.front();
          later_.pop_front();
        }
        disk_put(*next);
      }
    });
  }
  later_cv_.notify_one();
}

void Cache::open_disk() {
  auto unavailable = [&](const std::string& why) {
    disk_.reset();
    disk_state_ = KJIT_DISK_UNAVAILABLE;
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = why;
    log_warn("kernel cache disk tier disabled, compiling without it: " + why);
  };
  if (!make_directories(dir_, 0700)) {
    return unavailable("cannot create cache directory " + dir_ + ": " + std::strerror(errno));
  }
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) {
    return unavailable("cannot stat " + dir_ + ": " + std::strerror(errno));
  }
  if (st.st_uid != geteuid()) {
    return unavailable("cache directory " + dir_ + " is not owned by the current user");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return unavailable("cache directory " + dir_ + " is writable by group or others");
  }
  const std::string db = join_path(dir_, DiskStore::kFileName);
  if (::stat(db.c_str(), &st) == 0) {
    if (st.st_uid != geteuid()) {
      return unavailable("cache database " + db + " is not owned by the current user");
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      return unavailable("cache database " + db + " is writable by group or others");
    }
  }
  bool read_only = config_.read_only;
  std::string read_only_note;  // logged once the database opened (else `unavailable` says why)
  if (!read_only && ::access(dir_.c_str(), W_OK) != 0) {
    read_only = true;
    read_only_note = "cache directory " + dir_ + " is not writable; using it read-only";
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = read_only_note;
  }
  const std::string netfs = network_fs_type(dir_);
  if (!netfs.empty()) {
    log_info("cache directory " + dir_ + " is on a network file system (" + netfs +
             "); using a rollback journal instead of WAL");
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      disk_ = std::make_unique<DiskStore>(dir_, read_only, netfs.empty());
      disk_state_ = read_only ? KJIT_DISK_READ_ONLY : KJIT_DISK_OK;
      if (!read_only_note.empty()) log_warn(read_only_note);
      return;
    } catch (const DatabaseCorrupt& e) {
      if (read_only || attempt > 0) return unavailable(e.message());
      const std::string aside = db + ".corrupt-" + std::to_string(unix_time());
      log_warn(e.message() + "; moving it aside to " + aside);
      if (std::rename(db.c_str(), aside.c_str()) != 0) {
        return unavailable(e.message() + "; could not move it aside: " + std::strerror(errno));
      }
      std::rename((db + "-wal").c_str(), (aside + "-wal").c_str());
      std::rename((db + "-shm").c_str(), (aside + "-shm").c_str());
      corrupt_++;
    } catch (const Error& e) {
      if (!read_only && ::access(db.c_str(), F_OK) == 0 && attempt == 0 &&
          e.status() == KJIT_ERROR_READ_ONLY) {
        continue;
      }
      return unavailable(read_only_note.empty() ? e.message() : read_only_note + ": " + e.message());
    } catch (const std::exception& e) {
      return unavailable(e.what());
    }
  }
}

std::string Cache::owner() {
  const long pid = static_cast<long>(getpid());
  std::lock_guard<std::mutex> lock(owner_mu_);
  if (pid != owner_pid_) {  // a forked child claims under its own identity
    owner_ = process_owner_id(this);
    owner_pid_ = pid;
  }
  return owner_;
}

bool Cache::quarantine_disk(const DatabaseCorrupt& e) {
  corrupt_++;
  if (!disk_) return false;
  try {
    disk_->quarantine(e.message());  // logs what it did
  } catch (const std::exception& ex) {
    disk_failed(ex, "moving a corrupt cache database aside");
    return false;
  }
  memory_.clear();  // nothing read from the damaged file is kept
  std::lock_guard<std::mutex> lock(state_mu_);
  message_ = "a corrupt cache database was moved aside: " + e.message();
  return true;
}

void Cache::disk_failed(const std::exception& e, const char* during) {
  std::lock_guard<std::mutex> lock(state_mu_);
  message_ = std::string(during) + ": " + e.what();
  if (!reported_) {
    reported_ = true;
    log_warn("kernel cache problem (further ones are counted, not logged): " + message_);
  } else {
    log_debug("kernel cache problem: " + message_);
  }
}

EntryPtr Cache::disk_get(const std::string& key, bool* corrupt) {
  if (!disk_) return nullptr;
  try {
    return disk_->get(key);
  } catch (const DatabaseCorrupt& e) {
    quarantine_disk(e);
    if (corrupt) *corrupt = true;
  } catch (const Error& e) {
    if (e.status() == KJIT_ERROR_CACHE_CORRUPT) {
      corrupt_++;
      if (corrupt) *corrupt = true;
    } else {
      disk_failed(e, "reading the cache database");
    }
  }
  return nullptr;
}

bool Cache::disk_put(const Entry& e) {
  if (!disk_ || disk_->read_only()) return false;
  for (int attempt = 0;; ++attempt) {
    try {
      evictions_ += disk_->put(e, max_bytes_);
      stores_++;
      flush_counters();
      return true;
    } catch (const DatabaseCorrupt& ex) {
      if (attempt == 0 && quarantine_disk(ex)) continue;  // store it in the new database
      store_failures_++;
      disk_failed(ex, "storing a compiled kernel");
      return false;
    } catch (const std::exception& ex) {
      store_failures_++;
      disk_failed(ex, "storing a compiled kernel");
      return false;
    }
  }
}

void Cache::remember(const EntryPtr& e, kjit_tier tier) {
  if (tier == KJIT_TIER_MEMORY) {
    memory_hits_++;
  } else if (tier == KJIT_TIER_DISK) {
    disk_hits_++;
  }
  if (tier != KJIT_TIER_COMPILED) {
    saved_us_ += static_cast<uint64_t>(e->compile_ms * 1000.0);
  }
  if (tier != KJIT_TIER_MEMORY) memory_.put(e);
}

EntryPtr Cache::lookup(const std::string& key, kjit_tier* tier, bool* corrupt) {
  if (EntryPtr e = memory_.get(key)) {
    *tier = KJIT_TIER_MEMORY;
    remember(e, *tier);
    return e;
  }
  if (EntryPtr e = disk_get(key, corrupt)) {
    *tier = KJIT_TIER_DISK;
    // Recency is recorded coarsely: only when the stored time is over an hour old.
    const int64_t now = unix_time();
    if (now - e->last_used > 3600 && disk_) disk_->touch(key, now);
    remember(e, *tier);
    return e;
  }
  if (remote_) {
    if (std::optional<Entry> fetched = remote_->get(key)) {
      auto e = std::make_shared<const Entry>(std::move(*fetched));
      *tier = KJIT_TIER_REMOTE;
      remote_hits_++;
      if (disk_ && !disk_->read_only()) store_later(e);
      remember(e, *tier);
      return e;
    }
  }
  return nullptr;
}

Outcome Cache::get_or_compile(const std::string& key, const std::function<Outcome()>& compile,
                              const std::function<bool()>& cancelled) {
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
  if (!leader) {
    waits_++;
    Outcome o;
    {
      std::unique_lock<std::mutex> lock(flight->mu);
      while (!flight->done) {
        if (cancelled && cancelled()) return cancelled_outcome(key);
        flight->cv.wait_for(lock, std::chrono::milliseconds(cancelled ? 20 : 1000));
      }
      o = flight->outcome;
    }
    if (o.status == KJIT_OK) {
      o.tier = KJIT_TIER_MEMORY;
      memory_hits_++;
      saved_us_ += static_cast<uint64_t>(o.entry->compile_ms * 1000.0);
      return o;
    }
    if (deterministic_failure(o.status)) return o;
    // The leader was cancelled or failed for a reason of its own: try for ourselves.
    return get_or_compile(key, compile, cancelled);
  }

  Outcome result;
  try {
    result = compile_with_claim(key, compile, cancelled);
  } catch (...) {
    std::lock_guard<std::mutex> lock(flights_mu_);
    {
      std::lock_guard<std::mutex> fl(flight->mu);
      flight->done = true;
      flight->outcome.status = KJIT_ERROR_INTERNAL;
      flight->outcome.message = "the compiling thread failed";
    }
    flight->cv.notify_all();
    flights_.erase(key);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(flights_mu_);
    {
      std::lock_guard<std::mutex> fl(flight->mu);
      flight->done = true;
      flight->outcome = result;
    }
    flight->cv.notify_all();
    flights_.erase(key);
  }
  return result;
}

Outcome Cache::compile_with_claim(const std::string& key,
                                  const std::function<Outcome()>& compile,
                                  const std::function<bool()>& cancelled) {
  bool stored = false;  // a stored entry also releases the claim, in the same transaction
  auto run = [&]() {
    std::unique_ptr<FleetClaim> fleet_claim;  // released when this returns
    if (std::optional<Outcome> o = fleet_wait(key, cancelled, &fleet_claim, &stored)) return *o;
    misses_++;
    compiles_++;
    Outcome o = compile();
    if (o.pch == 1) pch_created_++;
    if (o.pch == 2) pch_used_++;
    if (o.pch == 3) pch_failed_++;
    if (!o.cacheable) {
      not_stored_++;
      return o;
    }
    if (o.status == KJIT_OK) {
      stored = disk_put(*o.entry);
      memory_.put(o.entry);
      publish(o.entry, fleet_claim.get());
    }
    return o;
  };
  if (!disk_ || disk_->read_only()) return run();

  const std::string me = owner();
  const double start = monotonic_ms();
  int unreadable = 0;  // the key is stored but could not be read: bounded retries
  bool waited = false;
  for (;;) {
    Claim claim;
    try {
      claim = disk_->try_claim(key, me);
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
        return Outcome{KJIT_OK, "", e, KJIT_TIER_DISK};
      }
      if (++unreadable >= 3) return run();
      continue;  // evicted or corrupt in between: claim again
    }
    if (claim.state == Claim::State::Failed) return parse_failure(claim.failure);
    if (claim.state == Claim::State::Claimed) {
      Outcome o;
      try {
        LeaseKeeper lease(disk_.get(), key, me);
        o = run();
      } catch (...) {
        try {
          disk_->release_claim(key, me);
        } catch (...) {
        }
        throw;
      }
      try {
        if (o.status != KJIT_OK && o.cacheable &&
            (deterministic_failure(o.status) || o.remember_failure)) {
          disk_->fail_claim(key, me, serialize_failure(o));
        } else if (!stored) {
          disk_->release_claim(key, me);  // others compile for themselves
        }
      } catch (const std::exception& e) {
        disk_failed(e, "releasing a compile claim");
      }
      return o;
    }
    // Another live process is compiling this key: wait for its entry or its failure, and
    // claim again when its claim goes away (released, or its owner died).
    if (!waited) {
      waited = true;
      waits_++;
    }
    double sleep_ms = 2;
    for (;;) {
      if (cancelled && cancelled()) return cancelled_outcome(key);
      if (monotonic_ms() - start > kMaxClaimWaitMs) {
        log_warn("waited too long for another process to compile " + key + "; compiling here");
        return run();
      }
      std::this_thread::sleep_for(
          std::chrono::microseconds(static_cast<int64_t>(sleep_ms * 1000)));
      sleep_ms = std::min(sleep_ms * 1.5, 50.0);
      if (EntryPtr e = disk_get(key)) {
        remember(e, KJIT_TIER_DISK);
        return Outcome{KJIT_OK, "", e, KJIT_TIER_DISK};
      }
      Claim now;
      try {
        now = disk_->read_claim(key);
      } catch (const std::exception& e) {
        disk_failed(e, "reading a compile claim");
        return run();
      }
      if (now.state == Claim::State::Failed) return parse_failure(now.failure);
      if (now.state != Claim::State::Busy || now.owner != claim.owner) break;
    }
  }
}

void Cache::insert(const Entry& e) {
  if (!disk_) {
    memory_.put(std::make_shared<Entry>(e));
    return;
  }
  try {
    evictions_ += disk_->put(e, max_bytes_);
  } catch (const DatabaseCorrupt& ex) {
    if (!quarantine_disk(ex)) throw;
    evictions_ += disk_->put(e, max_bytes_);  // into the new database
  }
  stores_++;
  memory_.put(std::make_shared<Entry>(e));
}

bool Cache::remove(const std::string& key) {
  bool found = memory_.get(key) != nullptr;
  memory_.remove(key);
  if (disk_) {
    try {
      found = disk_->remove(key) || found;
    } catch (const DatabaseCorrupt& e) {
      if (!quarantine_disk(e)) throw;
    }
  }
  return found;
}

void Cache::clear() {
  memory_.clear();
  if (!disk_) return;
  try {
    disk_->clear();
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;  // the new database is empty
  }
}

uint64_t Cache::prune(uint64_t max_bytes) {
  if (!disk_) return 0;
  uint64_t n = 0;
  try {
    n = disk_->prune(max_bytes);
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;
  }
  evictions_ += n;
  memory_.clear();
  return n;
}

void Cache::list(const std::function<bool(const EntryInfo&)>& fn) {
  if (!disk_) return;
  try {
    disk_->list(fn);
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;
  }
}

void Cache::verify(uint64_t* checked, uint64_t* bad) {
  *checked = *bad = 0;
  if (!disk_) return;
  // The file's structure first (b-trees, indexes against tables): entries reached through
  // a damaged index cannot be trusted one by one, so such a file is moved aside whole.
  std::string problems;
  std::vector<std::string> keys;
  try {
    problems = disk_->integrity_problems();
    if (problems.empty()) keys = disk_->keys();
  } catch (const DatabaseCorrupt& e) {
    problems = e.message();
  }
  if (!problems.empty()) {
    uint64_t entries = 0, bytes = 0;
    try {
      disk_->totals(&entries, &bytes);
    } catch (const std::exception&) {
    }
    *checked = *bad = std::max<uint64_t>(entries, 1);
    const std::string first = problems.substr(0, problems.find('\n'));
    if (disk_->read_only()) {  // report it, move nothing
      fail(KJIT_ERROR_CACHE_CORRUPT, "cache database " + disk_->path() +
                                         " failed its integrity check (read-only: left as it "
                                         "is): " + first);
    }
    if (!quarantine_disk(DatabaseCorrupt("integrity check failed: " + first))) {
      fail(KJIT_ERROR_CACHE_CORRUPT, "cache database " + disk_->path() +
                                         " failed its integrity check: " + first);
    }
    return;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    ++*checked;
    try {
      disk_->get(keys[i]);
    } catch (const DatabaseCorrupt& e) {
      *bad += keys.size() - i;
      *checked = keys.size();
      if (disk_->read_only() || !quarantine_disk(e)) throw;
      return;
    } catch (const Error& e) {
      // A bad entry: removed by the store, or left in place when the cache is read-only.
      if (e.status() != KJIT_ERROR_CACHE_CORRUPT) throw;
      ++*bad;
      corrupt_++;
      memory_.remove(keys[i]);
    }
  }
}

uint64_t Cache::export_file(const std::string& path) {
  std::vector<std::string> keys;
  list([&](const EntryInfo& i) {
    keys.push_back(i.key);
    return false;
  });
  const std::string signing_key = export_key_from_environment();
  size_t index = 0;
  return write_export(path, [&](Entry* out) {
    while (index < keys.size()) {
      kjit_tier tier;
      if (EntryPtr e = lookup(keys[index++], &tier)) {  // verified, or skipped
        *out = *e;
        return true;
      }
    }
    return false;
  }, signing_key);
}

void Cache::import_file(const std::string& path, uint64_t* imported, uint64_t* rejected) {
  *imported = *rejected = 0;
  const std::string key = export_key_from_environment();
  ImportReport report;
  try {
    read_export(path, [&](const Entry& e) {
      insert(e);
      ++*imported;
    }, key, &report);
  } catch (...) {
    *rejected = report.rejected;
    throw;
  }
  *rejected = report.rejected;
}

CacheStats Cache::stats() {
  CacheStats s;
  s.disk_state = disk_state_;
  s.memory_hits = memory_hits_;
  s.disk_hits = disk_hits_;
  s.misses = misses_;
  s.compiles = compiles_;
  s.stores = stores_;
  s.store_failures = store_failures_;
  s.corrupt_entries = corrupt_;
  s.evictions = evictions_;
  s.waits = waits_;
  s.not_stored = not_stored_;
  s.compile_ms_saved = static_cast<double>(saved_us_.load()) / 1000.0;
  s.remote_hits = remote_hits_;
  if (remote_) {
    const RemoteStats r = remote_->stats();
    s.remote_errors = r.errors + r.rejected;
    s.remote_timeouts = r.timeouts;
    s.remote_state = r.breaker_open ? KJIT_REMOTE_BACKOFF : KJIT_REMOTE_OK;
  } else if (!config_.remote.url.empty() && !remote_tier_built()) {
    s.remote_state = KJIT_REMOTE_NOT_BUILT;
  }
  // Totals: what the database holds plus what this handle has not added to it yet.
  Counts totals;
  if (disk_) {
    try {
      for (const auto& [name, value] : disk_->counters()) {
        for (size_t i = 0; i < kCounters; ++i) {
          if (name == kCounterNames[i]) totals.v[i] = uint64_t(value);
        }
      }
    } catch (const std::exception& e) {
      disk_failed(e, "reading usage counters");
    }
  }
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    const Counts now = current_counts();
    const bool unflushable = !disk_ || disk_->read_only();
    for (size_t i = 0; i < kCounters; ++i) {
      const uint64_t base = unflushable ? 0 : flushed_.v[i];
      if (now.v[i] > base) totals.v[i] += now.v[i] - base;
    }
  }
  s.total_memory_hits = totals.v[0];
  s.total_disk_hits = totals.v[1];
  s.total_remote_hits = totals.v[2];
  s.total_misses = totals.v[3];
  s.total_compiles = totals.v[4];
  s.total_corrupt_entries = totals.v[5];
  s.total_evictions = totals.v[6];
  s.total_remote_errors = totals.v[7];
  s.total_remote_timeouts = totals.v[8];
  s.total_compile_ms_saved = static_cast<double>(totals.v[9]) / 1000.0;
  s.pch_created = pch_created_;
  s.pch_used = pch_used_;
  s.pch_failed = pch_failed_;
  s.total_not_stored = totals.v[10];
  s.total_pch_created = totals.v[11];
  s.total_pch_used = totals.v[12];
  s.total_pch_failed = totals.v[13];
  {
    const Counts now = current_counts();
    s.remote_claims = now.v[14];
    s.remote_claim_waits = now.v[15];
    s.remote_claim_wait_hits = now.v[16];
    s.remote_claim_wait_timeouts = now.v[17];
  }
  s.total_remote_claims = totals.v[14];
  s.total_remote_claim_waits = totals.v[15];
  s.total_remote_claim_wait_hits = totals.v[16];
  s.total_remote_claim_wait_timeouts = totals.v[17];
  memory_.totals(&s.memory_entries, &s.memory_bytes);
  if (disk_) {
    try {
      disk_->totals(&s.disk_entries, &s.disk_bytes);
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

std::optional<std::string> Cache::get_meta(const std::string& name) {
  if (!disk_) return std::nullopt;
  try {
    return disk_->get_meta(name);
  } catch (const std::exception& e) {
    disk_failed(e, "reading cache metadata");
    return std::nullopt;
  }
}

void Cache::set_meta(const std::string& name, const std::string& value) {
  if (!disk_) return;
  try {
    disk_->set_meta(name, value);
  } catch (const std::exception& e) {
    disk_failed(e, "writing cache metadata");
  }
}

std::optional<std::string> Cache::get_value(const std::string& ns, const std::string& key) {
  if (!disk_) return std::nullopt;
  try {
    return disk_->get_value(ns, key);
  } catch (const std::exception& e) {
    disk_failed(e, "reading a cached value");
    return std::nullopt;
  }
}

void Cache::put_value(const std::string& ns, const std::string& key, const std::string& value) {
  if (!disk_ || disk_->read_only()) return;
  try {
    disk_->put_value(ns, key, value);
  } catch (const std::exception& e) {
    disk_failed(e, "writing a cached value");
  }
}

}  // namespace kjit
