// kjit cache: inspect and manage the on-disk cache through the public cache API.
#include <cjson/cJSON.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "cli.h"

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit cache SUBCOMMAND [ARGS...] [--json] [--cache-dir DIR]\n"
    "\n"
    "Inspect and manage the kjit cache (payload files indexed by an SQLite database,\n"
    "shared by every process).\n"
    "\n"
    "Subcommands:\n"
    "  path                  print the cache directory (--json: also its database file\n"
    "                        and whether it exists)\n"
    "  stats                 kernels, size and bound, state of the disk tier, stored\n"
    "                        compile time, kernels per target; dependency records apart\n"
    "  ls [-l] [-a]          list the kernels, most recently used first (-l: full keys;\n"
    "                        -a, --all: the dependency records too, listed apart)\n"
    "  show KEY [--ptx|--cubin|--ltoir] [-o FILE]\n"
    "                        show one entry (metadata, sizes, kernels, names, log); with\n"
    "                        -o write the chosen output (default cubin) to FILE; --ptx\n"
    "                        without -o prints the PTX\n"
    "  rm KEY...             remove entries\n"
    "  prune --max-size SIZE evict least-recently-used entries until the cache holds at\n"
    "                        most SIZE bytes (suffixes K, M, G, T: binary multiples)\n"
    "  clear                 remove every entry\n"
    "  verify                check every entry's checksums (bound to its key) and\n"
    "                        metadata; corrupt entries are listed and removed (on a\n"
    "                        read-only cache: listed and left in place); payload files\n"
    "                        found without an index row are indexed again and listed\n"
    "  export FILE           write every entry to FILE (kjit's portable export format),\n"
    "                        each record signed when KJIT_EXPORT_KEY is set\n"
    "  import FILE           read entries from an export file; each is verified before\n"
    "                        it is stored, bad ones are rejected; with KJIT_EXPORT_KEY\n"
    "                        set, records without a valid signature are rejected too\n"
    "\n"
    "KEY is the 64-hex-digit key or any unique prefix of it (as 'kjit cache ls' shows).\n"
    "\n"
    "Besides kernels, the cache holds dependency records (target 'manifest'): for a\n"
    "program with #include, what NVRTC read when it compiled it, which leads a later\n"
    "compile to its kernel. They are counted and listed apart from the kernels.\n"
    "\n"
    "An export file is trusted input: importing someone else's export is running their\n"
    "code. Import checks each record for damage and consistency, not who wrote it; use\n"
    "'kjit warm' with a manifest to share kernels between machines (each compiles its\n"
    "own), or signed exports: set KJIT_EXPORT_KEY to the same secret (16 bytes or more)\n"
    "on the exporting and importing machines.\n"
    "\n"
    "The subcommands that only read (path, stats, ls, show, verify, export) never create\n"
    "the cache: where it has no database yet, path, stats and ls show an empty cache\n"
    "(status 0) and the others fail (3).\n"
    "\n"
    "Environment: KJIT_EXPORT_KEY signs exports and makes imports require signatures;\n"
    "KJIT_CACHE_READONLY=1 opens the cache read-only.\n"
    "\n"
    "Exit status: 0 ok; 2 usage; 3 error (no cache at DIR, disk cache disabled or\n"
    "unusable -- stats and path print their report first --, file unreadable, import\n"
    "FILE not a kjit export, ...); 4 no entry with that KEY (show, rm); 5 corrupt\n"
    "entries found (show, verify, import).\n";

struct Row {
  std::string key, target, kernels;
  uint64_t bytes = 0;
  int64_t created = 0, last_used = 0;
  double compile_ms = 0;
  // A dependency record (the library lists it with target "manifest"): what NVRTC read for
  // a program with #include, not a kernel.
  bool is_record() const { return target == "manifest"; }
};

int collect_row(const kjit_cache_entry_info* info, void* user) {
  auto* rows = static_cast<std::vector<Row>*>(user);
  Row r;
  r.key = info->key ? info->key : "";
  r.target = info->target ? info->target : "";
  r.kernels = info->kernels ? info->kernels : "";
  r.bytes = info->bytes;
  r.created = info->created;
  r.last_used = info->last_used;
  r.compile_ms = info->compile_ms;
  rows->push_back(std::move(r));
  return 0;
}

std::vector<Row> list_rows(kjit_cache* cache) {
  std::vector<Row> rows;
  const kjit_status st = kjit_cache_list(cache, collect_row, &rows);
  if (st != KJIT_OK)
    fail_status(st, std::string("cannot list cache '") + kjit_cache_directory(cache) + "'");
  return rows;
}

bool is_hex(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

// Resolves a full key or a unique prefix. Returns "" when nothing matches.
std::string resolve_key(kjit_cache* cache, const std::string& cmd, std::string key) {
  if (!is_hex(key) || key.size() > 64) {
    usage_error(cmd, "'" + key + "' is not a cache key (hex digits, as 'kjit cache ls' shows)");
  }
  std::transform(key.begin(), key.end(), key.begin(), [](char c) {
    return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  });
  if (key.size() == 64) return key;
  std::vector<std::string> matches;
  for (const Row& r : list_rows(cache)) {
    if (r.key.compare(0, key.size(), key) == 0) matches.push_back(r.key);
  }
  if (matches.size() > 1) {
    usage_error(cmd, "key prefix '" + key + "' is ambiguous: " + std::to_string(matches.size()) +
                         " entries match; give more digits");
  }
  return matches.empty() ? std::string() : matches[0];
}

// True when KJIT_EXPORT_KEY is set: the library then signs exports and requires signatures
// on import (and refuses a key that is too short, with its own message).
bool export_key_set() {
  const char* k = std::getenv("KJIT_EXPORT_KEY");
  return k && *k;
}

// Log callback gathering the library's warnings (level WARN and above) into a vector.
void collect_warning(int level, const char* message, void* user) {
  if (level >= KJIT_LOG_WARN) static_cast<std::vector<std::string>*>(user)->emplace_back(message);
}

std::string cache_label(kjit_cache* cache) {
  return std::string("cache '") + kjit_cache_directory(cache) + "'";
}

void add_u64(cJSON* obj, const char* name, uint64_t v) {
  cJSON_AddNumberToObject(obj, name, static_cast<double>(v));
}

// ---- subcommands ----------------------------------------------------------------------

int sub_path(const Parsed& p, Global& g) {
  if (!p.positional.empty())
    usage_error("cache path", "unexpected argument '" + p.positional[0] + "'");
  // Only reads: a cache that does not exist yet is not created.
  std::string dir;
  CacheHolder c;
  c.p = open_cache_if_present(g, &dir);
  const kjit_cache_stats s = c.p ? read_cache_stats(c.p) : kjit_cache_stats{};
  const std::string db = dir.empty() ? std::string() : cache_database(dir);
  struct stat st;
  const bool exists = !db.empty() && ::stat(db.c_str(), &st) == 0;
  const std::string problem = c.p ? disk_problem(s.disk_state, dir, s.message) : std::string();
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.path");
    cJSON_AddStringToObject(j.p, "directory", dir.c_str());
    cJSON_AddStringToObject(j.p, "database", db.c_str());
    cJSON_AddBoolToObject(j.p, "exists", exists);
    cJSON_AddStringToObject(j.p, "state", c.p ? disk_state_name(s.disk_state) : "absent");
    print_json(j.p);
  } else if (!dir.empty()) {
    std::printf("%s\n", dir.c_str());
  }
  if (!problem.empty()) fail(kExitError, "no usable disk cache: " + problem);
  return kExitOk;
}

const char* remote_state_name(int state) {
  switch (state) {
    case KJIT_REMOTE_OK:
      return "connected or not yet tried";
    case KJIT_REMOTE_BACKOFF:
      return "unavailable, retrying after a cooldown";
    case KJIT_REMOTE_NOT_BUILT:
      return "configured, but not built into this kjit";
    default:
      return "none";
  }
}

// What `cache stats` reports beyond the library's statistics, from the listing.
struct Summary {
  double stored_ms = 0;
  int64_t oldest = 0, newest = 0;
  uint64_t kernels = 0;
  uint64_t records = 0, record_bytes = 0;                           // dependency records
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_target;  // kernels, bytes
};

Summary summarize(const std::vector<Row>& rows) {
  Summary m;
  for (const Row& r : rows) {
    if (r.is_record()) {
      ++m.records;
      m.record_bytes += r.bytes;
      continue;
    }
    ++m.kernels;
    m.stored_ms += r.compile_ms;
    if (r.created > 0 && (m.oldest == 0 || r.created < m.oldest)) m.oldest = r.created;
    if (r.last_used > m.newest) m.newest = r.last_used;
    auto& t = m.per_target[r.target];
    t.first += 1;
    t.second += r.bytes;
  }
  return m;
}

// The counters of kjit_cache_stats that the JSON document names, in its order.
void add_totals_json(cJSON* doc, const kjit_cache_stats& s) {
  // Totals recorded by every process that used this database.
  cJSON* tot = cJSON_AddObjectToObject(doc, "totals");
  add_u64(tot, "memory_hits", s.total_memory_hits);
  add_u64(tot, "disk_hits", s.total_disk_hits);
  add_u64(tot, "remote_hits", s.total_remote_hits);
  add_u64(tot, "misses", s.total_misses);
  add_u64(tot, "compiles", s.total_compiles);
  add_u64(tot, "corrupt_entries", s.total_corrupt_entries);
  add_u64(tot, "evictions", s.total_evictions);
  add_u64(tot, "remote_errors", s.total_remote_errors);
  add_u64(tot, "remote_timeouts", s.total_remote_timeouts);
  cJSON_AddNumberToObject(tot, "compile_ms_saved", s.total_compile_ms_saved);
  add_u64(tot, "not_stored", s.total_not_stored);
  add_u64(tot, "pch_created", s.total_pch_created);
  add_u64(tot, "pch_used", s.total_pch_used);
  add_u64(tot, "pch_failed", s.total_pch_failed);
  add_u64(tot, "remote_claims", s.total_remote_claims);
  add_u64(tot, "remote_claim_waits", s.total_remote_claim_waits);
  add_u64(tot, "remote_claim_wait_hits", s.total_remote_claim_wait_hits);
  add_u64(tot, "remote_claim_wait_timeouts", s.total_remote_claim_wait_timeouts);
  cJSON_AddStringToObject(doc, "remote", remote_state_name(s.remote_state));
  // Counters of the handle this command opened (the library counts per handle).
  cJSON* proc = cJSON_AddObjectToObject(doc, "this_process");
  add_u64(proc, "memory_hits", s.memory_hits);
  add_u64(proc, "disk_hits", s.disk_hits);
  add_u64(proc, "remote_hits", s.remote_hits);
  add_u64(proc, "misses", s.misses);
  add_u64(proc, "compiles", s.compiles);
  add_u64(proc, "stores", s.stores);
  add_u64(proc, "store_failures", s.store_failures);
  add_u64(proc, "corrupt_entries", s.corrupt_entries);
  add_u64(proc, "evictions", s.evictions);
  add_u64(proc, "waits", s.waits);
  add_u64(proc, "memory_entries", s.memory_entries);
  add_u64(proc, "memory_bytes", s.memory_bytes);
  add_u64(proc, "remote_errors", s.remote_errors);
  add_u64(proc, "remote_timeouts", s.remote_timeouts);
  add_u64(proc, "remote_claims", s.remote_claims);
  add_u64(proc, "remote_claim_waits", s.remote_claim_waits);
  add_u64(proc, "remote_claim_wait_hits", s.remote_claim_wait_hits);
  add_u64(proc, "remote_claim_wait_timeouts", s.remote_claim_wait_timeouts);
  cJSON_AddNumberToObject(proc, "compile_ms_saved", s.compile_ms_saved);
}

// The remote tier's topology, the node in use (one PING when none has answered yet),
// redirections, failovers and oversize entries, as kjit_cache_remote_info gives them.
std::string remote_info(kjit_cache* cache, const kjit_cache_stats& s) {
  const char* info = nullptr;
  const bool probe = s.remote_state == KJIT_REMOTE_OK || s.remote_state == KJIT_REMOTE_BACKOFF;
  if (kjit_cache_remote_info(cache, probe ? 1 : 0, &info) != KJIT_OK || !info) return "";
  return info;
}

void print_stats_json(kjit_cache* cache, const kjit_cache_stats& s, const Summary& m) {
  JsonHolder j;
  j.p = new_document("kjit.cache.stats");
  cJSON_AddStringToObject(j.p, "directory", kjit_cache_directory(cache));
  cJSON_AddStringToObject(j.p, "state", disk_state_name(s.disk_state));
  cJSON_AddStringToObject(j.p, "message", s.message);
  add_u64(j.p, "entries", m.kernels);  // kernels: dependency records apart
  add_u64(j.p, "bytes", s.disk_bytes);
  cJSON* records = cJSON_AddObjectToObject(j.p, "dependency_records");
  add_u64(records, "entries", m.records);
  add_u64(records, "bytes", m.record_bytes);
  add_u64(j.p, "max_size_bytes", s.max_size_bytes);
  cJSON_AddNumberToObject(j.p, "stored_compile_ms", m.stored_ms);
  cJSON_AddNumberToObject(j.p, "oldest_created", static_cast<double>(m.oldest));
  cJSON_AddNumberToObject(j.p, "last_used", static_cast<double>(m.newest));
  cJSON* targets = cJSON_AddObjectToObject(j.p, "targets");
  for (const auto& [target, v] : m.per_target) {
    cJSON* t = cJSON_AddObjectToObject(targets, target.c_str());
    add_u64(t, "entries", v.first);
    add_u64(t, "bytes", v.second);
  }
  add_totals_json(j.p, s);
  if (cJSON* remote = cJSON_Parse(remote_info(cache, s).c_str()))
    cJSON_AddItemToObject(j.p, "remote_tier", remote);
  add_worker_json(j.p, cache);
  print_json(j.p);
}

void print_stats_text(kjit_cache* cache, const kjit_cache_stats& s, const Summary& m) {
  const std::string dir = kjit_cache_directory(cache);
  using ull = unsigned long long;
  std::printf("cache directory     %s\n", dir.empty() ? "(none)" : dir.c_str());
  std::printf("disk tier           %s%s%s\n", disk_state_name(s.disk_state),
              s.message[0] ? ": " : "", s.message);
  const double pct = s.max_size_bytes ? 100.0 * static_cast<double>(s.disk_bytes) /
                                            static_cast<double>(s.max_size_bytes)
                                      : 0.0;
  std::printf("kernels             %llu\n", static_cast<ull>(m.kernels));
  if (m.records) {
    std::printf("dependency records  %llu, %s (what NVRTC read for programs with #include)\n",
                static_cast<ull>(m.records), human_bytes(m.record_bytes).c_str());
  }
  std::printf("size                %s of %s (%.1f%%)\n", human_bytes(s.disk_bytes).c_str(),
              human_bytes(s.max_size_bytes).c_str(), pct);
  std::printf("stored compile time %s (what one hit on each entry saves)\n",
              human_ms(m.stored_ms).c_str());
  const uint64_t hits = s.total_memory_hits + s.total_disk_hits + s.total_remote_hits;
  const uint64_t lookups = hits + s.total_misses;
  std::printf(
      "hits                %llu (memory %llu, disk %llu, remote %llu)%s\n", static_cast<ull>(hits),
      static_cast<ull>(s.total_memory_hits), static_cast<ull>(s.total_disk_hits),
      static_cast<ull>(s.total_remote_hits),
      lookups ? (" = " + std::to_string(100 * hits / lookups) + "% of lookups").c_str() : "");
  std::printf("misses              %llu (%llu compiles)\n", static_cast<ull>(s.total_misses),
              static_cast<ull>(s.total_compiles));
  std::printf("compile time saved  %s\n", human_ms(s.total_compile_ms_saved).c_str());
  std::printf(
      "not stored          %llu (compiled, but what NVRTC read could not be vouched for "
      "by the key)\n",
      static_cast<ull>(s.total_not_stored));
  std::printf("precompiled headers %llu created, %llu used, %llu failed\n",
              static_cast<ull>(s.total_pch_created), static_cast<ull>(s.total_pch_used),
              static_cast<ull>(s.total_pch_failed));
  std::printf("corrupt / evicted   %llu / %llu\n", static_cast<ull>(s.total_corrupt_entries),
              static_cast<ull>(s.total_evictions));
  std::printf("remote tier         %s (errors %llu, timeouts %llu)\n",
              remote_state_name(s.remote_state), static_cast<ull>(s.total_remote_errors),
              static_cast<ull>(s.total_remote_timeouts));
  if (s.remote_state != KJIT_REMOTE_NONE && s.remote_state != KJIT_REMOTE_NOT_BUILT) {
    std::printf("remote topology     %s\n", remote_info(cache, s).c_str());
  }
  std::printf("fleet claims        %llu taken, %llu waits (%llu ended in a remote hit, %llu "
              "timed out)\n",
              static_cast<ull>(s.total_remote_claims), static_cast<ull>(s.total_remote_claim_waits),
              static_cast<ull>(s.total_remote_claim_wait_hits),
              static_cast<ull>(s.total_remote_claim_wait_timeouts));
  std::printf("compile worker      %s\n", worker_text(cache).c_str());
  std::printf("oldest entry        %s\n", format_time(m.oldest).c_str());
  std::printf("last use            %s\n", format_time(m.newest).c_str());
  for (const auto& [target, v] : m.per_target) {
    std::printf("  %-17s %llu kernels, %s\n", target.empty() ? "(none)" : target.c_str(),
                static_cast<ull>(v.first), human_bytes(v.second).c_str());
  }
}

// `cache stats` of a cache whose database does not exist yet: an empty cache, as the first
// compile into `dir` will create it.
void print_absent_stats(const std::string& dir, const Global& g) {
  const char* why = "no cache here yet: the first compile creates it";
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.stats");
    cJSON_AddStringToObject(j.p, "directory", dir.c_str());
    cJSON_AddStringToObject(j.p, "state", "absent");
    cJSON_AddStringToObject(j.p, "message", why);
    add_u64(j.p, "entries", 0);
    add_u64(j.p, "bytes", 0);
    cJSON* records = cJSON_AddObjectToObject(j.p, "dependency_records");
    add_u64(records, "entries", 0);
    add_u64(records, "bytes", 0);
    cJSON_AddObjectToObject(j.p, "targets");
    kjit_cache_stats none;
    std::memset(&none, 0, sizeof none);
    add_totals_json(j.p, none);
    add_worker_json(j.p, nullptr);
    print_json(j.p);
    return;
  }
  std::printf("cache directory     %s\n", dir.c_str());
  std::printf("disk tier           absent: %s\n", why);
  std::printf("kernels             0\n");
  std::printf("size                0 B\n");
}

int sub_stats(const Parsed& p, Global& g) {
  if (!p.positional.empty())
    usage_error("cache stats", "unexpected argument '" + p.positional[0] + "'");
  // Only reads: a cache that does not exist is shown empty, not created. An existing one is
  // opened read-write so that the state reported is the cache's, not this handle's choice
  // (the library falls back to read-only by itself when the directory is not writable).
  CacheHolder c;
  std::string dir;
  c.p = open_cache_if_present(g, &dir);
  if (!c.p && !cache_can_be_created(dir)) c.p = open_existing_cache(g);  // fails: says why
  if (!c.p) {
    print_absent_stats(dir, g);
    return kExitOk;
  }
  const kjit_cache_stats s = read_cache_stats(c.p);
  std::vector<Row> rows;
  if (s.disk_state == KJIT_DISK_OK || s.disk_state == KJIT_DISK_READ_ONLY) rows = list_rows(c.p);
  const Summary m = summarize(rows);
  if (g.json) {
    print_stats_json(c.p, s, m);
  } else {
    print_stats_text(c.p, s, m);
  }
  // The report says what is wrong with the disk tier; the status says that it is unusable.
  const std::string problem = disk_problem(s.disk_state, kjit_cache_directory(c.p), s.message);
  if (!problem.empty()) fail(kExitError, problem);
  return kExitOk;
}

cJSON* row_json(const Row& r) {
  cJSON* o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "key", r.key.c_str());
  cJSON_AddStringToObject(o, "target", r.target.c_str());
  cJSON* k = cJSON_AddArrayToObject(o, "kernels");
  size_t start = 0;
  while (start < r.kernels.size()) {
    size_t comma = r.kernels.find(',', start);
    if (comma == std::string::npos) comma = r.kernels.size();
    if (comma > start) {
      cJSON_AddItemToArray(k, cJSON_CreateString(r.kernels.substr(start, comma - start).c_str()));
    }
    start = comma + 1;
  }
  add_u64(o, "bytes", r.bytes);
  cJSON_AddNumberToObject(o, "created", static_cast<double>(r.created));
  cJSON_AddNumberToObject(o, "last_used", static_cast<double>(r.last_used));
  cJSON_AddNumberToObject(o, "compile_ms", r.compile_ms);
  return o;
}

void print_rows(const std::vector<const Row*>& rows, bool full) {
  const int kw = full ? 64 : 16;
  for (const Row* r : rows) {
    std::string kernels = r->kernels;
    if (!full && kernels.size() > 60) kernels = kernels.substr(0, 57) + "...";
    std::printf("%-*.*s  %-9s %10s  %-19s %9s  %s\n", kw, kw, r->key.c_str(), r->target.c_str(),
                human_bytes(r->bytes).c_str(), format_time(r->last_used).c_str(),
                human_ms(r->compile_ms).c_str(), kernels.c_str());
  }
}

// `cache ls`: the kernels; the dependency records apart (with --all, or counted).
int sub_ls(const Parsed& p, Global& g) {
  if (!p.positional.empty())
    usage_error("cache ls", "unexpected argument '" + p.positional[0] + "'");
  // Only reads: a cache that does not exist yet is listed empty, not created.
  CacheHolder c;
  std::string dir;
  c.p = open_cache_if_present(g, &dir);
  if (!c.p && !cache_can_be_created(dir)) c.p = open_existing_cache(g);  // fails: says why
  if (c.p) require_disk(c.p, "cache ls", false);
  const std::vector<Row> rows = c.p ? list_rows(c.p) : std::vector<Row>();
  std::vector<const Row*> kernels, records;
  uint64_t record_bytes = 0;
  for (const Row& r : rows) {
    if (r.is_record()) {
      records.push_back(&r);
      record_bytes += r.bytes;
    } else {
      kernels.push_back(&r);
    }
  }
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.ls");
    cJSON* entries = cJSON_AddArrayToObject(j.p, "entries");
    for (const Row* r : kernels) cJSON_AddItemToArray(entries, row_json(*r));
    cJSON* recs = cJSON_AddArrayToObject(j.p, "dependency_records");
    for (const Row* r : records) cJSON_AddItemToArray(recs, row_json(*r));
    print_json(j.p);
    return kExitOk;
  }
  const bool full = p.has("long");
  const int kw = full ? 64 : 16;
  if (!g.quiet) {
    std::printf("%-*s  %-9s %10s  %-19s %9s  %s\n", kw, "KEY", "TARGET", "SIZE", "LAST USED",
                "COMPILE", "KERNELS");
  }
  print_rows(kernels, full);
  if (records.empty() || g.quiet) return kExitOk;
  if (p.has("all")) {
    std::printf("\ndependency records (what NVRTC read for programs with #include):\n");
    print_rows(records, full);
  } else {
    std::printf(
        "(+ %zu dependency record%s, %s: what NVRTC read for programs with #include; "
        "--all lists them)\n",
        records.size(), records.size() == 1 ? "" : "s", human_bytes(record_bytes).c_str());
  }
  return kExitOk;
}

// `cache show KEY --ptx|--cubin|--ltoir|-o FILE`: writes one output of the entry.
int write_entry_output(const Parsed& p, Global& g, const std::string& key, kjit_binary* b) {
  const std::string out = p.get("output");
  const int kind = p.has("ptx")     ? KJIT_OUTPUT_PTX
                   : p.has("ltoir") ? KJIT_OUTPUT_LTOIR
                                    : KJIT_OUTPUT_CUBIN;
  const char* kname = kind == KJIT_OUTPUT_PTX     ? "PTX"
                      : kind == KJIT_OUTPUT_LTOIR ? "LTO-IR"
                                                  : "CUBIN";
  size_t size = 0;
  const void* data = kjit_binary_data(b, kind, &size);
  if (!data) fail(kExitError, "entry " + key + " holds no " + kname);
  std::string err;
  if (!write_file(out.empty() ? "-" : out, data, size, &err)) {
    fail(kExitError, "cannot write '" + (out.empty() ? std::string("stdout") : out) + "': " + err);
  }
  if (!out.empty() && !g.quiet && !g.json) {
    std::fprintf(stderr, "wrote %s (%s) of %.16s to %s\n", kname, human_bytes(size).c_str(),
                 key.c_str(), out.c_str());
  }
  return kExitOk;
}

void print_entry_text(const std::string& key, kjit_binary* b) {
  size_t ptx = 0, cubin = 0, ltoir = 0;
  kjit_binary_data(b, KJIT_OUTPUT_PTX, &ptx);
  kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &cubin);
  kjit_binary_data(b, KJIT_OUTPUT_LTOIR, &ltoir);
  std::printf("key          %s\n", key.c_str());
  std::printf("target       %s\n", kjit_binary_target(b));
  std::printf("outputs      ");
  bool any = false;
  if (ptx) {
    std::printf("PTX %s", human_bytes(ptx).c_str());
    any = true;
  }
  if (cubin) {
    std::printf("%sCUBIN %s", any ? ", " : "", human_bytes(cubin).c_str());
    any = true;
  }
  if (ltoir) {
    std::printf("%sLTO-IR %s", any ? ", " : "", human_bytes(ltoir).c_str());
    any = true;
  }
  std::printf("%s\n", any ? "" : "(none)");
  std::printf("compile time %s\n", human_ms(kjit_binary_compile_ms(b)).c_str());
  std::printf("kernels     ");
  for (size_t i = 0; i < kjit_binary_kernel_count(b); ++i) {
    std::printf(" %s", kjit_binary_kernel_name(b, i));
  }
  std::printf("\n");
  for (size_t i = 0; i < kjit_binary_name_count(b); ++i) {
    const char* lowered = kjit_binary_lowered_name_at(b, i);
    std::printf("name         %s -> %s\n", kjit_binary_name_expression(b, i),
                lowered ? lowered : "(none)");
  }
  const char* meta = kjit_binary_metadata_json(b);
  JsonHolder m;
  m.p = meta && *meta ? cJSON_Parse(meta) : nullptr;
  char* text = m.p ? cJSON_Print(m.p) : nullptr;
  if (text) {
    std::printf("metadata\n%s\n", text);
    cJSON_free(text);
  }
  const char* log = kjit_binary_log(b);
  if (log && *log) std::printf("log\n%s%s", log, log[std::strlen(log) - 1] == '\n' ? "" : "\n");
}

int sub_show(const Parsed& p, Global& g) {
  const std::string cmd = "cache show";
  if (p.positional.empty()) usage_error(cmd, "missing KEY");
  if (p.positional.size() > 1) usage_error(cmd, "one KEY at a time");
  const int kinds = (p.has("ptx") ? 1 : 0) + (p.has("cubin") ? 1 : 0) + (p.has("ltoir") ? 1 : 0);
  if (kinds > 1) usage_error(cmd, "--ptx, --cubin and --ltoir are exclusive");
  if (kinds == 1 && p.get("output").empty() && !p.has("ptx")) {
    usage_error(cmd, "--cubin and --ltoir need -o FILE");
  }
  CacheHolder c;
  c.p = open_existing_cache(g);
  require_disk(c.p, cmd, false);
  const std::string key = resolve_key(c.p, cmd, p.positional[0]);
  if (key.empty())
    fail(kExitNotFound, "no entry with key '" + p.positional[0] + "' in " + cache_label(c.p));
  BinaryHolder b;
  const kjit_status st = kjit_cache_get(c.p, key.c_str(), &b.p);
  if (st == KJIT_ERROR_NOT_FOUND)
    fail(kExitNotFound, "no entry with key '" + key + "' in " + cache_label(c.p));
  if (st == KJIT_ERROR_CACHE_CORRUPT) {
    fail_status(st,
                "entry " + key + " failed verification (removed, unless the cache is read-only)");
  }
  if (st != KJIT_OK) fail_status(st, "cannot read entry " + key);
  if (kinds == 1 || !p.get("output").empty()) return write_entry_output(p, g, key, b.p);
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.show");
    cJSON_AddStringToObject(j.p, "key", key.c_str());
    add_binary_json(j.p, b.p, true);
    print_json(j.p);
  } else {
    print_entry_text(key, b.p);
  }
  return kExitOk;
}

int sub_rm(const Parsed& p, Global& g) {
  const std::string cmd = "cache rm";
  if (p.positional.empty()) usage_error(cmd, "missing KEY");
  CacheHolder c;
  c.p = open_cache(g);
  require_disk(c.p, cmd, true);
  std::vector<std::pair<std::string, std::string>> keys;  // as given, resolved
  for (const std::string& k : p.positional) keys.emplace_back(k, resolve_key(c.p, cmd, k));
  int rc = kExitOk;
  JsonHolder j;
  cJSON* results = nullptr;
  if (g.json) {
    j.p = new_document("kjit.cache.rm");
    results = cJSON_AddArrayToObject(j.p, "results");
  }
  for (const auto& [given, key] : keys) {
    kjit_status st = key.empty() ? KJIT_ERROR_NOT_FOUND : kjit_cache_remove(c.p, key.c_str());
    const bool removed = st == KJIT_OK;
    if (st == KJIT_ERROR_NOT_FOUND) {
      std::fprintf(stderr, "kjit cache rm: no entry with key '%s' in %s\n", given.c_str(),
                   cache_label(c.p).c_str());
      rc = kExitNotFound;
    } else if (st != KJIT_OK) {
      fail_status(st, "cannot remove entry " + key);
    } else if (!g.json && !g.quiet) {
      std::printf("removed %s\n", key.c_str());
    }
    if (j.p) {
      cJSON* o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "key", key.empty() ? given.c_str() : key.c_str());
      cJSON_AddBoolToObject(o, "removed", removed);
      cJSON_AddItemToArray(results, o);
    }
  }
  if (j.p) print_json(j.p);
  return rc;
}

int sub_prune(const Parsed& p, Global& g) {
  const std::string cmd = "cache prune";
  if (!p.positional.empty()) usage_error(cmd, "unexpected argument '" + p.positional[0] + "'");
  if (!p.has("max-size")) usage_error(cmd, "missing --max-size SIZE");
  const uint64_t max = size_option(cmd, "--max-size", p.get("max-size"));
  CacheHolder c;
  c.p = open_cache(g);
  require_disk(c.p, cmd, true);
  const kjit_cache_stats before = read_cache_stats(c.p);
  uint64_t removed = 0;
  const kjit_status st = kjit_cache_prune(c.p, max, &removed);
  if (st != KJIT_OK) fail_status(st, "cannot prune " + cache_label(c.p));
  const kjit_cache_stats after = read_cache_stats(c.p);
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.prune");
    add_u64(j.p, "max_size_bytes", max);
    add_u64(j.p, "removed", removed);
    add_u64(j.p, "entries_before", before.disk_entries);
    add_u64(j.p, "bytes_before", before.disk_bytes);
    add_u64(j.p, "entries", after.disk_entries);
    add_u64(j.p, "bytes", after.disk_bytes);
    print_json(j.p);
  } else if (!g.quiet) {
    std::printf("removed %llu entries; %llu entries, %s left (limit %s)\n",
                static_cast<unsigned long long>(removed),
                static_cast<unsigned long long>(after.disk_entries),
                human_bytes(after.disk_bytes).c_str(), human_bytes(max).c_str());
  }
  return kExitOk;
}

int sub_clear(const Parsed& p, Global& g) {
  const std::string cmd = "cache clear";
  if (!p.positional.empty()) usage_error(cmd, "unexpected argument '" + p.positional[0] + "'");
  CacheHolder c;
  c.p = open_cache(g);
  require_disk(c.p, cmd, true);
  const kjit_cache_stats before = read_cache_stats(c.p);
  const kjit_status st = kjit_cache_clear(c.p);
  if (st != KJIT_OK) fail_status(st, "cannot clear " + cache_label(c.p));
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.clear");
    add_u64(j.p, "removed", before.disk_entries);
    add_u64(j.p, "bytes_freed", before.disk_bytes);
    print_json(j.p);
  } else if (!g.quiet) {
    std::printf("removed %llu entries (%s)\n", static_cast<unsigned long long>(before.disk_entries),
                human_bytes(before.disk_bytes).c_str());
  }
  return kExitOk;
}

int sub_verify(const Parsed& p, Global& g) {
  const std::string cmd = "cache verify";
  if (!p.positional.empty()) usage_error(cmd, "unexpected argument '" + p.positional[0] + "'");
  CacheHolder c;
  c.p = open_existing_cache(g);
  require_disk(c.p, cmd, false);
  // A cache that cannot be written (directory or database not writable, KJIT_CACHE_READONLY)
  // is verified all the same; what is bad is reported and left in place.
  const bool read_only = read_cache_stats(c.p).disk_state == KJIT_DISK_READ_ONLY;
  const std::vector<Row> before = list_rows(c.p);
  uint64_t checked = 0, bad = 0;
  const kjit_status st = kjit_cache_verify(c.p, &checked, &bad);
  if (st == KJIT_ERROR_CACHE_CORRUPT && read_only) {
    fail(kExitCorrupt, std::string(kjit_last_error()));  // a damaged file, not moved aside
  }
  if (st != KJIT_OK) fail_status(st, "cannot verify " + cache_label(c.p));
  // The library does not name bad entries. Read-write, it removed them: compare the
  // listings before and after. Read-only, they are still there: look each one up.
  std::vector<const Row*> corrupt;
  // Payload files that had no index row (a crash between a file's write and its row's)
  // are indexed again by the verify: the rows after it that were not there before.
  std::vector<Row> after_rows;
  if (!read_only) after_rows = list_rows(c.p);
  std::vector<const Row*> reindexed;
  {
    std::set<std::string> had;
    for (const Row& r : before) had.insert(r.key);
    for (const Row& r : after_rows) {
      if (!had.count(r.key)) reindexed.push_back(&r);
    }
  }
  if (bad > 0 && read_only) {
    for (const Row& r : before) {
      BinaryHolder b;
      if (kjit_cache_get(c.p, r.key.c_str(), &b.p) == KJIT_ERROR_CACHE_CORRUPT) {
        corrupt.push_back(&r);
      }
    }
  } else if (bad > 0) {
    std::set<std::string> after;
    for (const Row& r : after_rows) after.insert(r.key);
    for (const Row& r : before) {
      if (!after.count(r.key)) corrupt.push_back(&r);
    }
  }
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.verify");
    add_u64(j.p, "checked", checked);
    add_u64(j.p, "corrupt", bad);
    cJSON_AddBoolToObject(j.p, "read_only", read_only);
    cJSON* arr = cJSON_AddArrayToObject(j.p, "removed");
    cJSON* kept = cJSON_AddArrayToObject(j.p, "corrupt_not_removed");
    cJSON* again = cJSON_AddArrayToObject(j.p, "reindexed");
    for (const Row* r : reindexed) {
      cJSON* o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "key", r->key.c_str());
      cJSON_AddStringToObject(o, "target", r->target.c_str());
      cJSON_AddStringToObject(o, "kernels", r->kernels.c_str());
      cJSON_AddItemToArray(again, o);
    }
    for (const Row* r : corrupt) {
      cJSON* o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "key", r->key.c_str());
      cJSON_AddStringToObject(o, "target", r->target.c_str());
      cJSON_AddStringToObject(o, "kernels", r->kernels.c_str());
      cJSON_AddItemToArray(read_only ? kept : arr, o);
    }
    print_json(j.p);
  } else {
    for (const Row* r : corrupt) {
      std::printf("corrupt, %s: %s %s %s\n", read_only ? "not removed (read-only)" : "removed",
                  r->key.c_str(), r->target.c_str(), r->kernels.c_str());
    }
    for (const Row* r : reindexed) {
      std::printf("indexed again (a payload file without its index row): %s %s %s\n",
                  r->key.c_str(), r->target.c_str(), r->kernels.c_str());
    }
    if (!g.quiet || bad > 0) {
      std::printf("checked %llu entries: %llu corrupt%s%s\n",
                  static_cast<unsigned long long>(checked), static_cast<unsigned long long>(bad),
                  bad ? (read_only ? " (not removed: the cache is read-only)" : " (removed)") : "",
                  read_only && !bad ? " (read-only cache)" : "");
    }
  }
  return bad > 0 ? kExitCorrupt : kExitOk;
}

int sub_export(const Parsed& p, Global& g) {
  const std::string cmd = "cache export";
  if (p.positional.size() != 1) usage_error(cmd, "expected one FILE");
  const std::string file = p.positional[0];
  CacheHolder c;
  c.p = open_existing_cache(g);
  require_disk(c.p, cmd, false);
  uint64_t count = 0;
  const kjit_status st = kjit_cache_export(c.p, file.c_str(), &count);
  if (st != KJIT_OK) fail_status(st, "cannot export " + cache_label(c.p) + " to '" + file + "'");
  struct stat sb;
  const uint64_t size = ::stat(file.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
  const bool is_signed = export_key_set();  // the library signs exactly then
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.export");
    cJSON_AddStringToObject(j.p, "file", file.c_str());
    add_u64(j.p, "exported", count);
    add_u64(j.p, "bytes", size);
    cJSON_AddBoolToObject(j.p, "signed", is_signed);
    print_json(j.p);
  } else if (!g.quiet) {
    std::printf(
        "exported %llu entries to %s (%s), %s\n", static_cast<unsigned long long>(count),
        file.c_str(), human_bytes(size).c_str(),
        is_signed ? "signed with KJIT_EXPORT_KEY" : "unsigned (KJIT_EXPORT_KEY is not set)");
  }
  return kExitOk;
}

int sub_import(const Parsed& p, Global& g) {
  const std::string cmd = "cache import";
  if (p.positional.size() != 1) usage_error(cmd, "expected one FILE");
  const std::string file = p.positional[0];
  std::string why;
  if (!check_regular_file(file, &why)) fail(kExitError, "cannot read '" + file + "': " + why);
  CacheHolder c;
  c.p = open_cache(g);
  require_disk(c.p, cmd, true);
  uint64_t imported = 0, rejected = 0;
  // The library says what the import found (rejections, an unsigned file) in its log.
  std::vector<std::string> warnings;
  kjit_set_log_callback(collect_warning, &warnings);
  const kjit_status st = kjit_cache_import(c.p, file.c_str(), &imported, &rejected);
  kjit_set_log_callback(nullptr, nullptr);
  const bool signatures_checked = export_key_set();  // the library requires them exactly then
  const bool damaged = st == KJIT_ERROR_CACHE_CORRUPT;
  std::string detail = damaged && kjit_last_error() ? kjit_last_error() : "";
  if (st != KJIT_OK && !damaged) {
    fail_status(st, "cannot import '" + file + "' into " + cache_label(c.p));
  }
  // Not one record read: the file is not an export this kjit can read (another kind of
  // file, another format version, or cut before its first record). That is bad input, not
  // corrupt entries.
  if (damaged && imported == 0 && rejected == 0) {
    fail(kExitError, "cannot import '" + file +
                         "': " + (detail.empty() ? std::string("not a kjit export file") : detail));
  }
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.cache.import");
    cJSON_AddStringToObject(j.p, "file", file.c_str());
    add_u64(j.p, "imported", imported);
    add_u64(j.p, "rejected", rejected);
    cJSON_AddBoolToObject(j.p, "damaged", damaged);
    cJSON_AddBoolToObject(j.p, "signatures_checked", signatures_checked);
    cJSON_AddStringToObject(j.p, "message", detail.c_str());
    cJSON* w = cJSON_AddArrayToObject(j.p, "warnings");
    for (const std::string& m : warnings) cJSON_AddItemToArray(w, cJSON_CreateString(m.c_str()));
    print_json(j.p);
  } else if (!g.quiet || rejected || damaged) {
    std::printf("imported %llu entries from %s, rejected %llu%s\n",
                static_cast<unsigned long long>(imported), file.c_str(),
                static_cast<unsigned long long>(rejected),
                signatures_checked ? " (signatures checked with KJIT_EXPORT_KEY)" : "");
  }
  if (!g.quiet || rejected || damaged) {
    for (const std::string& m : warnings) {
      std::fprintf(stderr, "kjit cache import: %s\n", m.c_str());
    }
  }
  if (damaged) {
    std::fprintf(stderr, "kjit cache import: '%s' is damaged: %s\n", file.c_str(),
                 detail.empty() ? "malformed export file" : detail.c_str());
  } else if (rejected && warnings.empty()) {  // else the library's warnings said why
    std::fprintf(stderr, "kjit cache import: %llu entries of '%s' failed verification\n",
                 static_cast<unsigned long long>(rejected), file.c_str());
  }
  return damaged || rejected ? kExitCorrupt : kExitOk;
}

}  // namespace

int cmd_cache(const std::vector<std::string>& args, Global& g) {
  if (args.empty()) usage_error("cache", "missing SUBCOMMAND");
  const std::string& first = args[0];
  if (first == "-h" || first == "--help") {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  // Global options may come before the subcommand: kjit cache --json stats.
  size_t i = 0;
  std::vector<std::string> lead;
  while (i < args.size() && !args[i].empty() && args[i][0] == '-') {
    lead.push_back(args[i]);
    if (args[i] == "--cache-dir" && i + 1 < args.size()) lead.push_back(args[++i]);
    ++i;
  }
  if (i >= args.size()) {
    Parsed lp = parse_args("cache", lead, {}, g);
    if (lp.help) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    usage_error("cache", "missing SUBCOMMAND");
  }
  const std::string sub = args[i];
  std::vector<std::string> rest = lead;
  rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());

  struct Sub {
    const char* name;
    std::vector<OptSpec> specs;
    int (*fn)(const Parsed&, Global&);
  };
  const Sub subs[] = {
      {"path", {}, sub_path},
      {"stats", {}, sub_stats},
      {"ls", {{"long", 'l', false}, {"all", 'a', false}}, sub_ls},
      {"show",
       {{"ptx", 0, false},
        {"cubin", 0, false},
        {"ltoir", 0, false},
        {"output", 'o', true, Arg::kPath}},
       sub_show},
      {"rm", {}, sub_rm},
      {"prune", {{"max-size", 0, true}}, sub_prune},
      {"clear", {}, sub_clear},
      {"verify", {}, sub_verify},
      {"export", {}, sub_export},
      {"import", {}, sub_import},
  };
  for (const Sub& s : subs) {
    if (sub != s.name) continue;
    const std::string cmd = std::string("cache ") + s.name;
    g.label = cmd;
    Parsed p = parse_args(cmd, rest, s.specs, g);
    if (p.help) {
      std::fputs(kHelp, stdout);
      return kExitOk;
    }
    if (!p.after_dashdash.empty()) usage_error(cmd, "unexpected arguments after '--'");
    return s.fn(p, g);
  }
  usage_error("cache", "unknown subcommand '" + sub + "'");
}

}  // namespace kjit_cli
