#include "store/cache.h"

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

// "1G", "512M", "100k", "12345" -> bytes; 0 when malformed.
uint64_t parse_size(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || v < 0) return 0;
  double mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1024.0;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      break;
    case 't':
    case 'T':
      mult = 1024.0 * 1024 * 1024 * 1024;
      break;
    case '\0':
      break;
    default:
      return 0;
  }
  return static_cast<uint64_t>(v * mult);
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0;
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
  std::snprintf(buf, sizeof buf, "%s|%ld|%s|%p", host, static_cast<long>(getpid()), start.c_str(),
                handle);
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
      memory_(config_.memory_max_bytes ? config_.memory_max_bytes : kDefaultMemoryBytes) {
  flights_pid_ = counters_pid_ = static_cast<long>(getpid());
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
  later_.finish();  // pending writes are finished
  flush_counters(/*closing=*/true);
}

void Cache::open_disk() {
  auto unavailable = [&](const std::string& why) {
    disk_.reset();
    disk_state_ = KJIT_DISK_UNAVAILABLE;
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = why;
    log_warn("kernel cache disk tier disabled, compiling without it: " + why);
  };
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (!make_directories(dir_, 0700)) {
      return unavailable("cannot create cache directory " + dir_ + ": " + std::strerror(errno));
    }
    if (::stat(dir_.c_str(), &st) != 0) {
      return unavailable("cannot stat " + dir_ + ": " + std::strerror(errno));
    }
  }
  if (st.st_uid != geteuid()) {
    return unavailable("cache directory " + dir_ + " is not owned by the current user");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return unavailable("cache directory " + dir_ + " is writable by group or others");
  }
  const std::string db = join_path(dir_, IndexDb::kFileName);
  if (::stat(db.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return unavailable("cache database " + db + " is not a regular file");
    }
    if (st.st_uid != geteuid()) {
      return unavailable("cache database " + db + " is not owned by the current user");
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      return unavailable("cache database " + db + " is writable by group or others");
    }
  }
  bool read_only = config_.read_only;
  if (!read_only && ::access(dir_.c_str(), W_OK) != 0) {
    read_only = true;
    read_only_note_ = "cache directory " + dir_ + " is not writable; using it read-only";
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = read_only_note_;
  }
  const std::string netfs = network_fs_type(dir_);
  if (!netfs.empty()) {
    log_info("cache directory " + dir_ + " is on a network file system (" + netfs +
             "); using a rollback journal instead of WAL");
  }
  // Hits read payload files; the index opens when something first needs it (index()).
  disk_ = std::make_unique<DiskTier>(dir_, read_only, netfs.empty());
  disk_state_ = read_only ? KJIT_DISK_READ_ONLY : KJIT_DISK_OK;
}

DiskTier* Cache::index() {
  if (!disk_) return nullptr;
  std::call_once(index_once_, [this] { open_index(); });
  return disk_off_.load(std::memory_order_acquire) ? nullptr : disk_.get();
}

DiskStore* Cache::disk() {
  DiskTier* d = index();
  return d ? &d->entries : nullptr;
}

void Cache::open_index() {
  auto unavailable = [&](const std::string& why) {
    disk_state_ = KJIT_DISK_UNAVAILABLE;
    disk_off_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(state_mu_);
    message_ = why;
    log_warn("kernel cache disk tier disabled, compiling without it: " + why);
  };
  IndexDb& index = disk_->index;
  const bool read_only = index.read_only();
  const std::string& db = index.path();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    // SQLite opens these itself: anything but a regular file (a FIFO, a device) is not used.
    struct stat st;
    if (::stat((db + suffix).c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      return unavailable("cache database file " + db + suffix + " is not a regular file");
    }
  }
  bool moved_aside = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      index.open();
      if (!read_only_note_.empty()) log_warn(read_only_note_);
      try {
        if (!read_only && disk_->counter_log.pending()) {
          disk_->counters.add([this] { return disk_->counter_log.take_all(); });
        }
      } catch (const std::exception& e) {
        disk_failed(e, "adding the counts of earlier processes");
      }
      // The payload files stay where they were: the new index takes them in.
      if (moved_aside) reconcile_after_switch();
      if (!read_only) {
        try {
          // An index deleted or replaced beside its files; those that do not verify are
          // removed and counted as corrupt entries.
          const DiskStore::Reconciled r = disk_->entries.adopt_if_orphaned();
          count(Counter::corrupt_entries, r.files_removed + r.files_kept);
        } catch (const std::exception& e) {
          disk_failed(e, "indexing the payload files");
        }
      }
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
      count(Counter::corrupt_entries);
      moved_aside = true;
    } catch (const Error& e) {
      if (!read_only && ::access(db.c_str(), F_OK) == 0 && attempt == 0 &&
          e.status() == KJIT_ERROR_READ_ONLY) {
        continue;
      }
      return unavailable(read_only_note_.empty() ? e.message()
                                                 : read_only_note_ + ": " + e.message());
    } catch (const std::exception& e) {
      return unavailable(e.what());
    }
  }
}

void Cache::reconcile_after_switch() {
  try {
    disk_->entries.reconcile();
  } catch (const std::exception& e) {
    disk_failed(e, "indexing the payload files");
  }
}

void Cache::follow_replaced_index(DiskTier& d) {
  if (!d.index.replaced()) return;
  d.index.reopen();
  try {
    d.entries.adopt_if_orphaned();  // a deleted index: the new one takes in the payload files
  } catch (const std::exception& e) {
    log_warn("could not index the payload files of " + d.index.path() + ": " + e.what());
  }
}

std::string Cache::owner() {
  const long pid = static_cast<long>(getpid());
  std::lock_guard<std::mutex> lock(owner_mu_);
  // Made when first needed (a claim, that is a miss): reading /proc costs a process that
  // only hits. A forked child claims under its own identity.
  if (owner_.empty() || pid != owner_pid_) {
    owner_ = process_owner_id(this);
    owner_pid_ = pid;
  }
  return owner_;
}

bool Cache::quarantine_disk(const DatabaseCorrupt& e) {
  count(Counter::corrupt_entries);
  if (!disk_) return false;
  try {
    disk_->index.quarantine(e.message());  // logs what it did
  } catch (const std::exception& ex) {
    disk_failed(ex, "moving a corrupt cache database aside");
    return false;
  }
  reconcile_after_switch();
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
  DiskTier* d = files();
  if (!d) return nullptr;
  try {
    return d->entries.get(key);
  } catch (const DatabaseCorrupt& e) {
    quarantine_disk(e);
    if (corrupt) *corrupt = true;
  } catch (const Error& e) {
    if (e.status() == KJIT_ERROR_CACHE_CORRUPT) {
      count(Counter::corrupt_entries);
      if (corrupt) *corrupt = true;
    } else if (index()) {  // (opening the index says once when the disk tier is unusable)
      disk_failed(e, "reading a cache entry");
    }
  }
  return nullptr;
}

namespace {

// Why a write to the disk tier failed, as a user reads it: "disk full" for a full disk or
// quota (the file system's or SQLite's words), else the failure itself.
std::string store_failure(const std::exception& ex) {
  const std::string what = ex.what();
  for (const char* full : {"No space left", "disk is full", "Disk quota exceeded", "ENOSPC"}) {
    if (what.find(full) != std::string::npos) return "disk full (" + what + ")";
  }
  return "storing it failed: " + what;
}

}  // namespace

std::string Cache::no_disk_reason() {
  if (disk_state_ == KJIT_DISK_DISABLED) {
    return config_.memory_only ? "the cache keeps results in memory only"
                               : "the disk cache is disabled (KJIT_CACHE_DISABLE)";
  }
  if (disk_ && disk_->index.read_only() && !disk_off_.load(std::memory_order_acquire)) {
    return "the cache is read-only";
  }
  std::lock_guard<std::mutex> lock(state_mu_);
  return "the disk cache cannot be used" + (message_.empty() ? std::string() : ": " + message_);
}

uint64_t Cache::put_entry(DiskTier& d, const Entry& e) {
  const uint64_t evicted =
      d.entries.put(e, max_bytes_, [&](SqliteConn& c) { Claims::settle_locked(c, e.key); });
  Claims::settled(e.key);
  return evicted;
}

bool Cache::disk_put(const Entry& e, std::string* why) {
  DiskTier* d = index();
  if (!d || d->index.read_only()) {
    if (why) *why = no_disk_reason();
    return false;
  }
  for (int attempt = 0;; ++attempt) {
    try {
      count(Counter::evictions, put_entry(*d, e));
      if (max_bytes_ > 0 && e.bytes() > max_bytes_) return false;  // too large to keep (put)
      if (!e.is_manifest()) stores_++;                             // kernels stored
      flush_counters();
      return true;
    } catch (const DatabaseCorrupt& ex) {
      if (attempt == 0 && quarantine_disk(ex)) continue;  // store it in the new database
      store_failures_++;
      disk_failed(ex, "storing a compiled kernel");
      if (why) *why = store_failure(ex);
      return false;
    } catch (const std::exception& ex) {
      store_failures_++;
      disk_failed(ex, "storing a compiled kernel");
      if (why) *why = store_failure(ex);
      return false;
    }
  }
}

void Cache::remember(const EntryPtr& e, kjit_tier tier) {
  if (tier != KJIT_TIER_MEMORY) memory_.put(e);
}

void Cache::count_hit(const Entry& e, kjit_tier tier) {
  if (tier == KJIT_TIER_MEMORY) {
    count(Counter::memory_hits);
  } else if (tier == KJIT_TIER_DISK) {
    count(Counter::disk_hits);
  } else if (tier == KJIT_TIER_REMOTE) {
    count(Counter::remote_hits);
  }
  if (tier != KJIT_TIER_COMPILED) {
    count(Counter::compile_us_saved, static_cast<uint64_t>(e.compile_ms * 1000.0));
  }
}

EntryPtr Cache::stored(const std::string& key) {
  if (!files()) return memory_.get(key);
  return disk_get(key);
}

bool Cache::store(const EntryPtr& e, std::string* why) {
  const bool stored = disk_put(*e, why);
  memory_.put(e);
  publish(e);
  return stored;
}

EntryPtr Cache::lookup(const std::string& key, kjit_tier* tier, bool* corrupt) {
  EntryPtr e = find(key, tier, corrupt);
  if (e) count_hit(*e, *tier);
  return e;
}

EntryPtr Cache::lookup_manifest(const std::string& key) {
  kjit_tier tier;
  return find(key, &tier, nullptr);
}

EntryPtr Cache::find(const std::string& key, kjit_tier* tier, bool* corrupt) {
  if (EntryPtr e = memory_.get(key)) {
    *tier = KJIT_TIER_MEMORY;
    return e;
  }
  if (EntryPtr e = disk_get(key, corrupt)) {
    *tier = KJIT_TIER_DISK;  // the read recorded the use (EntryFiles::read)
    remember(e, *tier);
    return e;
  }
  if (remote_) {
    if (std::optional<Entry> fetched = remote_->get(key)) {
      auto e = std::make_shared<const Entry>(std::move(*fetched));
      *tier = KJIT_TIER_REMOTE;
      if (DiskTier* d = files(); d && !d->index.read_only()) later_.push(e);
      remember(e, *tier);
      return e;
    }
  }
  return nullptr;
}

void Cache::insert(const Entry& e) {
  DiskTier* d = index();
  if (!d) {
    memory_.put(std::make_shared<Entry>(e));
    return;
  }
  try {
    count(Counter::evictions, put_entry(*d, e));
  } catch (const DatabaseCorrupt& ex) {
    if (!quarantine_disk(ex)) throw;
    count(Counter::evictions, put_entry(*d, e));  // into the new database
  }
  stores_++;
  memory_.put(std::make_shared<Entry>(e));
}

bool Cache::remove(const std::string& key) {
  bool found = memory_.get(key) != nullptr;
  memory_.remove(key);
  if (DiskTier* d = index()) {
    try {
      found = d->entries.remove(key) || found;
    } catch (const DatabaseCorrupt& e) {
      if (!quarantine_disk(e)) throw;
    }
  }
  return found;
}

void Cache::clear() {
  memory_.clear();
  DiskTier* d = index();
  if (!d) return;
  try {
    // The entries, the claims and the named values go; the facts stay.
    d->entries.clear();
    d->claims.clear();
    d->values.clear();
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;  // the new database is empty
  }
}

uint64_t Cache::prune(uint64_t max_bytes) {
  DiskTier* d = index();
  if (!d) return 0;
  uint64_t n = 0;
  try {
    n = d->entries.prune(max_bytes);
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;
  }
  count(Counter::evictions, n);
  memory_.clear();
  return n;
}

void Cache::list(const std::function<bool(const EntryInfo&)>& fn) {
  DiskTier* d = index();
  if (!d) return;
  try {
    d->entries.list(fn);
  } catch (const DatabaseCorrupt& e) {
    if (!quarantine_disk(e)) throw;
  }
}

void Cache::verify(uint64_t* checked, uint64_t* bad) {
  *checked = *bad = 0;
  DiskTier* t = index();
  if (!t) return;
  DiskStore* d = &t->entries;
  // The file's structure first (b-trees, indexes against tables): entries reached through
  // a damaged index cannot be trusted one by one, so such a file is moved aside whole.
  std::string problems;
  std::vector<std::string> keys;
  DiskStore::Reconciled fixed;
  try {
    problems = t->index.integrity_problems();
    // Then the index and the files in step: rows without a file go, sound files without
    // a row are indexed, damaged ones removed (read-only: nothing changes).
    if (problems.empty()) fixed = d->reconcile();
    if (problems.empty()) keys = d->keys();
  } catch (const DatabaseCorrupt& e) {
    problems = e.message();
  }
  if (!problems.empty()) {
    uint64_t entries = 0, bytes = 0;
    try {
      d->totals(&entries, &bytes);
    } catch (const std::exception&) {
    }
    *checked = *bad = std::max<uint64_t>(entries, 1);
    const std::string first = problems.substr(0, problems.find('\n'));
    if (d->read_only()) {  // report it, move nothing
      fail(KJIT_ERROR_CACHE_CORRUPT, "cache database " + d->path() +
                                         " failed its integrity check (read-only: left as it "
                                         "is): " +
                                         first);
    }
    if (!quarantine_disk(DatabaseCorrupt("integrity check failed: " + first))) {
      fail(KJIT_ERROR_CACHE_CORRUPT,
           "cache database " + d->path() + " failed its integrity check: " + first);
    }
    return;
  }
  // Temporaries of writers that died are removed but are no entries: not counted.
  const uint64_t repaired = fixed.rows_dropped + fixed.files_removed;
  *checked = *bad = repaired + fixed.files_kept;
  count(Counter::corrupt_entries, repaired);
  for (size_t i = 0; i < keys.size(); ++i) {
    ++*checked;
    try {
      if (!d->get(keys[i])) ++*bad;  // a row without its file (read-only: not reconciled)
    } catch (const Error& e) {
      // A bad entry: removed by the store, or left in place when the cache is read-only.
      if (e.status() != KJIT_ERROR_CACHE_CORRUPT) throw;
      ++*bad;
      count(Counter::corrupt_entries);
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
  return write_export(
      path,
      [&](Entry* out) {
        while (index < keys.size()) {
          kjit_tier tier;
          if (EntryPtr e = lookup(keys[index++], &tier)) {  // verified, or skipped
            *out = *e;
            return true;
          }
        }
        return false;
      },
      signing_key);
}

void Cache::import_file(const std::string& path, uint64_t* imported, uint64_t* rejected) {
  *imported = *rejected = 0;
  const std::string key = export_key_from_environment();
  ImportReport report;
  try {
    read_export(
        path,
        [&](const Entry& e) {
          insert(e);
          ++*imported;
        },
        key, &report);
  } catch (...) {
    *rejected = report.rejected;
    throw;
  }
  *rejected = report.rejected;
}

}  // namespace kjit
