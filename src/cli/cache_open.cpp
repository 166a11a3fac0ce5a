// The kjit command-line tool: where the cache is, opening it as each command needs, and
// reading its state (statistics, the disk tier).
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli.h"

namespace kjit_cli {

std::string cache_location(const Global& g) {
  if (!g.cache_dir.empty()) return g.cache_dir;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
  };
  if (!env("KJIT_CACHE_DIR").empty()) return env("KJIT_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return path_in(env("XDG_CACHE_HOME"), "kjit");
  if (!env("HOME").empty()) return path_in(env("HOME"), ".cache/kjit");
  const std::string tmp = env("TMPDIR").empty() ? std::string("/tmp") : env("TMPDIR");
  return path_in(tmp, "kjit-" + std::to_string(::getuid()));
}

std::string cache_database(const std::string& dir) {
  return path_in(dir, "kjit.db");
}

bool disk_disabled_by_environment() {
  const char* v = std::getenv("KJIT_CACHE_DISABLE");
  return v && *v && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0;
}

kjit_cache* open_cache(const Global& g) {
  kjit_cache_options o;
  kjit_cache_options_init(&o);
  if (!g.cache_dir.empty()) o.directory = g.cache_dir.c_str();
  kjit_cache* c = nullptr;
  const kjit_status st = kjit_cache_open(&o, &c);
  if (st != KJIT_OK) {
    fail_status(st, "cannot open the cache" +
                        (g.cache_dir.empty() ? std::string() : " in '" + g.cache_dir + "'"));
  }
  return c;
}

kjit_cache* open_cache_if_present(const Global& g, std::string* dir) {
  *dir = cache_location(g);
  if (disk_disabled_by_environment()) {
    kjit_cache* c = open_cache(g);
    *dir = kjit_cache_directory(c);
    return c;
  }
  struct stat st;
  if (::stat(cache_database(*dir).c_str(), &st) != 0) return nullptr;
  return open_cache(g);
}

bool cache_can_be_created(const std::string& dir) {
  // The nearest part of the path that exists must be a directory this user can create
  // entries in, on a file system that holds files (not /proc or /sys).
  std::string at = dir.empty() ? std::string(".") : dir;
  struct stat st;
  while (::stat(at.c_str(), &st) != 0) {
    const std::string up = parent_dir_or_dot(at);
    if (up == at) return false;
    at = up;
  }
  if (!S_ISDIR(st.st_mode)) return false;
  struct statfs fs;
  if (::statfs(at.c_str(), &fs) == 0 &&
      (fs.f_type == 0x9fa0 /* proc */ || fs.f_type == 0x62656572 /* sysfs */)) {
    return false;
  }
  return at == dir || ::access(at.c_str(), W_OK | X_OK) == 0;
}

kjit_cache* open_existing_cache(const Global& g) {
  std::string dir;
  kjit_cache* c = open_cache_if_present(g, &dir);
  if (!c) {
    fail(kExitError, "no cache at '" + dir + "' (no " + basename_of(cache_database(dir)) +
                         " there: nothing has been stored in it yet)");
  }
  return c;
}

// ---- state ----------------------------------------------------------------------------

kjit_cache_stats read_cache_stats(kjit_cache* cache) {
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  const kjit_status st = kjit_cache_stats_get(cache, &s);
  if (st != KJIT_OK) fail_status(st, "cannot read the cache state");
  return s;
}

uint64_t cache_waits(kjit_cache* cache) {
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  return kjit_cache_stats_get(cache, &s) == KJIT_OK ? s.waits : 0;
}

std::string disk_problem(int disk_state, const std::string& dir, const char* message) {
  const std::string where = dir.empty() ? std::string("the cache") : "cache '" + dir + "'";
  if (disk_state == KJIT_DISK_DISABLED) {
    return "the disk cache is disabled (KJIT_CACHE_DISABLE is set)";
  }
  if (disk_state == KJIT_DISK_UNAVAILABLE) {
    return where + " cannot be used: " + (message && *message ? message : "unknown reason");
  }
  return std::string();
}

void require_disk(kjit_cache* cache, const std::string& cmd, bool need_write) {
  const kjit_cache_stats s = read_cache_stats(cache);
  const std::string dir = kjit_cache_directory(cache);
  if (s.disk_state == KJIT_DISK_DISABLED) {
    fail(kExitError, "kjit " + cmd + " needs the disk cache, but it is disabled" +
                         " (KJIT_CACHE_DISABLE is set)");
  }
  const std::string problem = disk_problem(s.disk_state, dir, s.message);
  if (!problem.empty()) fail(kExitError, problem);
  if (need_write && s.disk_state == KJIT_DISK_READ_ONLY) {
    fail(kExitError, "cache '" + dir + "' is read-only" +
                         (s.message[0] ? ": " + std::string(s.message) : std::string()));
  }
}

}  // namespace kjit_cli
