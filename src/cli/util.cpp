// The kjit command-line tool: argument parsing, sizes, files, cache opening, JSON output.
#include <cjson/cJSON.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <unistd.h>

#include "cli.h"

namespace kjit_cli {

void fail(int code, std::string message) { throw Failure{code, std::move(message)}; }

void fail_status(kjit_status st, const std::string& what) {
  const std::string msg = what + ": " + error_text(st) + " [" + status_name(st) + "]";
  int code = kExitError;
  if (st == KJIT_ERROR_NOT_FOUND) code = kExitNotFound;
  if (st == KJIT_ERROR_CACHE_CORRUPT) code = kExitCorrupt;
  fail(code, msg);
}

void usage_error(const std::string& cmd, const std::string& msg) {
  fail(kExitUsage, msg + " (see 'kjit " + cmd + " --help')");
}

// ---- argument parsing ------------------------------------------------------------------

bool Parsed::has(const std::string& name) const {
  for (const auto& o : opts) {
    if (o.name == name) return true;
  }
  return false;
}

std::string Parsed::get(const std::string& name, const std::string& def) const {
  std::string v = def;
  for (const auto& o : opts) {
    if (o.name == name) v = o.value;
  }
  return v;
}

std::vector<std::string> Parsed::all(const std::string& name) const {
  std::vector<std::string> v;
  for (const auto& o : opts) {
    if (o.name == name) v.push_back(o.value);
  }
  return v;
}

Parsed parse_args(const std::string& cmd, const std::vector<std::string>& args,
                  const std::vector<OptSpec>& specs, Global& g) {
  std::vector<OptSpec> all = specs;
  all.push_back({"cache-dir", 0, true});
  all.push_back({"json", 0, false});
  all.push_back({"quiet", 'q', false});
  all.push_back({"help", 'h', false});

  Parsed p;
  // --help anywhere before "--" wins over everything else on the line.
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") {
      p.help = true;
      return p;
    }
  }
  auto store = [&](const OptSpec& s, const std::string& value) {
    const std::string name = s.long_name ? s.long_name : std::string(1, s.short_name);
    if (name == "cache-dir") {
      if (value.empty()) usage_error(cmd, "--cache-dir needs a non-empty directory");
      g.cache_dir = value;
    } else if (name == "json") {
      g.json = true;
    } else if (name == "quiet") {
      g.quiet = true;
    } else if (name == "help") {
      p.help = true;
    } else {
      p.opts.push_back({name, value});
    }
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      p.after_dashdash.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const OptSpec* spec = nullptr;
      for (const auto& s : all) {
        if (s.long_name && name == s.long_name) spec = &s;
      }
      if (!spec) usage_error(cmd, "unknown option '--" + name + "'");
      if (spec->takes_value) {
        if (eq != std::string::npos) {
          store(*spec, a.substr(eq + 1));
        } else if (i + 1 < args.size()) {
          store(*spec, args[++i]);
        } else {
          usage_error(cmd, "option '--" + name + "' needs a value");
        }
      } else {
        if (eq != std::string::npos) usage_error(cmd, "option '--" + name + "' takes no value");
        store(*spec, "");
      }
      continue;
    }
    if (a.size() >= 2 && a[0] == '-') {
      const OptSpec* spec = nullptr;
      for (const auto& s : all) {
        if (s.short_name && s.short_name == a[1]) spec = &s;
      }
      if (!spec) usage_error(cmd, "unknown option '" + a + "'");
      if (spec->takes_value) {
        if (a.size() > 2) {
          store(*spec, a.substr(2));
        } else if (i + 1 < args.size()) {
          store(*spec, args[++i]);
        } else {
          usage_error(cmd, "option '-" + std::string(1, a[1]) + "' needs a value");
        }
      } else {
        if (a.size() > 2) usage_error(cmd, "unknown option '" + a + "'");
        store(*spec, "");
      }
      continue;
    }
    p.positional.push_back(a);
  }
  return p;
}

// ---- sizes and times ------------------------------------------------------------------

bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  const char* s = text.c_str();
  if (!(s[0] >= '0' && s[0] <= '9') && s[0] != '.') return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (end == s || errno != 0 || !std::isfinite(v) || v < 0) return false;
  double mult = 1;
  std::string suffix = end;
  if (suffix == "" || suffix == "B" || suffix == "b") {
    mult = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") {
    mult = 1024.0;
  } else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") {
    mult = 1024.0 * 1024.0;
  } else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") {
    mult = 1024.0 * 1024.0 * 1024.0;
  } else if (suffix == "T" || suffix == "t" || suffix == "TB" || suffix == "TiB") {
    mult = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else {
    return false;
  }
  const double bytes = v * mult;
  if (bytes >= 18446744073709551615.0) return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

std::string human_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  }
  return buf;
}

std::string human_ms(double ms) {
  char buf[32];
  if (ms < 1.0) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  } else if (ms < 1000.0) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else if (ms < 60000.0) {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  } else {
    const long s = static_cast<long>(ms / 1000.0);
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  }
  return buf;
}

std::string format_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!localtime_r(&t, &tm)) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// ---- files ----------------------------------------------------------------------------

bool read_file(const std::string& path, std::string* out, std::string* error) {
  const bool use_stdin = path == "-";
  std::FILE* f = use_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) {
    *error = std::strerror(errno);
    return false;
  }
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  const int err = errno;
  if (!use_stdin) std::fclose(f);
  if (bad) {
    *error = std::strerror(err);
    return false;
  }
  *out = std::move(data);
  return true;
}

bool write_file(const std::string& path, const void* data, size_t size, std::string* error) {
  if (path == "-") {
    if (std::fwrite(data, 1, size, stdout) != size || std::fflush(stdout) != 0) {
      *error = std::strerror(errno);
      return false;
    }
    return true;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    *error = std::strerror(errno);
    return false;
  }
  const bool ok = std::fwrite(data, 1, size, f) == size;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    *error = std::strerror(ok ? errno : err);
    return false;
  }
  return true;
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (name.empty() || name[0] == '/' || dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string status_name(int status) {
  const std::string s = kjit_status_string(status);
  const size_t colon = s.find(':');
  return colon == std::string::npos ? s : s.substr(0, colon);
}

std::string error_text(int status) {
  const char* e = kjit_last_error();
  return e && *e ? std::string(e) : std::string(kjit_status_string(status));
}

std::string current_directory() {
  std::vector<char> buf(4096);
  while (::getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE || buf.size() > (1u << 20)) return ".";
    buf.resize(buf.size() * 2);
  }
  return buf.data();
}

const char* tier_name(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED: return "compiled";
    case KJIT_TIER_MEMORY: return "memory";
    case KJIT_TIER_DISK: return "disk";
    case KJIT_TIER_REMOTE: return "remote";
    default: return "unknown";
  }
}

const char* disk_state_name(int state) {
  switch (state) {
    case KJIT_DISK_OK: return "ok";
    case KJIT_DISK_READ_ONLY: return "read-only";
    case KJIT_DISK_DISABLED: return "disabled";
    case KJIT_DISK_UNAVAILABLE: return "unavailable";
    default: return "unknown";
  }
}

// ---- cache ----------------------------------------------------------------------------

kjit_cache* open_cache(const Global& g, bool read_only) {
  kjit_cache_options o;
  kjit_cache_options_init(&o);
  if (!g.cache_dir.empty()) o.directory = g.cache_dir.c_str();
  o.read_only = read_only ? 1 : 0;
  kjit_cache* c = nullptr;
  const kjit_status st = kjit_cache_open(&o, &c);
  if (st != KJIT_OK) {
    fail_status(st, "cannot open the cache" +
                        (g.cache_dir.empty() ? std::string() : " in '" + g.cache_dir + "'"));
  }
  return c;
}

void require_disk(kjit_cache* cache, const std::string& cmd, bool need_write) {
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  const kjit_status st = kjit_cache_stats_get(cache, &s);
  if (st != KJIT_OK) fail_status(st, "cannot read the cache state");
  const std::string dir = kjit_cache_directory(cache);
  const std::string where = dir.empty() ? std::string("the cache") : "cache '" + dir + "'";
  if (s.disk_state == KJIT_DISK_DISABLED) {
    fail(kExitError, "kjit " + cmd + " needs the disk cache, but it is disabled" +
                         " (KJIT_CACHE_DISABLE is set)");
  }
  if (s.disk_state == KJIT_DISK_UNAVAILABLE) {
    fail(kExitError, where + " cannot be used: " +
                         (s.message[0] ? std::string(s.message) : "unknown reason"));
  }
  if (need_write && s.disk_state == KJIT_DISK_READ_ONLY) {
    fail(kExitError, where + " is read-only" +
                         (s.message[0] ? ": " + std::string(s.message) : std::string()));
  }
}

// ---- JSON -----------------------------------------------------------------------------

JsonHolder::~JsonHolder() { cJSON_Delete(p); }

void print_json(const cJSON* value) {
  char* text = cJSON_Print(value);
  if (!text) fail(kExitError, "out of memory while printing JSON");
  std::fputs(text, stdout);
  std::fputc('\n', stdout);
  cJSON_free(text);
}

int exit_code_for_compile_status(kjit_status st) {
  switch (st) {
    case KJIT_ERROR_COMPILE:
    case KJIT_ERROR_INVALID_SOURCE:
    case KJIT_ERROR_NAME_NOT_FOUND:
      return kExitCompile;
    case KJIT_ERROR_INVALID_OPTION:
    case KJIT_ERROR_UNSUPPORTED_TARGET:
      return kExitUsage;
    default:
      return kExitError;
  }
}

}  // namespace kjit_cli
