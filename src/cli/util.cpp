// The kjit command-line tool: argument parsing, sizes, files, cache opening, JSON output.
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "cli.h"

namespace kjit_cli {

void fail(int code, std::string message) {
  throw Failure{code, std::move(message)};
}

void fail_status(kjit_status st, const std::string& what) {
  const std::string msg = what + ": " + error_text(st) + " [" + status_name(st) + "]";
  int code = kExitError;
  if (st == KJIT_ERROR_NOT_FOUND) code = kExitNotFound;
  if (st == KJIT_ERROR_CACHE_CORRUPT) code = kExitCorrupt;
  fail(code, msg);
}

void usage_error(const std::string& cmd, const std::string& msg) {
  fail(kExitUsage, msg + " (see 'kjit " + (cmd.empty() ? std::string() : cmd + " ") + "--help')");
}

std::string log_for_cli(std::string log) {
  const std::string note = "kjit: note: a name expression is looked up in every program";
  const size_t at = log.find(note);
  if (at == std::string::npos || (at > 0 && log[at - 1] != '\n')) return log;
  size_t end = log.find('\n', at);
  end = end == std::string::npos ? log.size() : end + 1;
  log.replace(at, end - at,
              "kjit: note: a name expression (-n, or a manifest entry's \"name_expressions\") "
              "must name a __global__ function or an instantiation of a __global__ template "
              "that its source declares, spelled as in C++ (e.g. 'scale<float, 4>')\n");
  return log;
}

void require_path(const std::string& cmd, const std::string& option, const std::string& value) {
  if (value.empty()) usage_error(cmd, "option '" + option + "' needs a non-empty path");
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
  all.push_back({"cache-dir", 0, true, Arg::kPath});
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
    if (s.arg == Arg::kPath) require_path(cmd, s.long_name ? "--" + name : "-" + name, value);
    if (name == "cache-dir") {
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
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  unsigned shift = 0;
  if (digits + 1 == text.size()) {
    switch (text[digits]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        return false;
    }
  } else if (digits != text.size()) {
    return false;
  }
  const uint64_t max = (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > (max >> shift)) return false;
  *out = v << shift;
  return true;
}

uint64_t size_option(const std::string& cmd, const std::string& option, const std::string& text) {
  uint64_t v = 0;
  if (!parse_size(text, &v)) {
    usage_error(cmd, "bad size '" + text + "' for " + option +
                         ": give a whole number of bytes, optionally followed by K, M, G or T "
                         "(binary multiples), e.g. 4096 or 512M, less than 8 EiB");
  }
  return v;
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

namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown kind of file";
}

std::string not_regular(mode_t mode) {
  return std::string("not a regular file (") + file_type_name(mode) + ")";
}

}  // namespace

bool check_regular_file(const std::string& path, std::string* error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = not_regular(st.st_mode);
    return false;
  }
  return true;
}

bool read_bounded_file(const std::string& path, uint64_t max_bytes, const char* what,
                       bool allow_stdin, std::string* out, std::string* error) {
  const bool use_stdin = allow_stdin && path == "-";
  const std::string too_big =
      "larger than " + human_bytes(max_bytes) + " (the limit for " + what + ")";
  // O_NONBLOCK: opening a FIFO must not wait for a writer before it can be refused.
  const int fd =
      use_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  struct Closer {
    int fd;
    bool own;
    ~Closer() {
      if (own) ::close(fd);
    }
  } closer{fd, !use_stdin};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  if (!use_stdin && !S_ISREG(st.st_mode)) {
    *error = not_regular(st.st_mode);
    return false;
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    *error = too_big;
    return false;
  }
  // Read up to one byte past the limit: a file may grow, standard input has no size.
  std::string data;
  if (S_ISREG(st.st_mode)) data.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::strerror(errno);
      return false;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) {
      *error = too_big;
      return false;
    }
  }
  *out = std::move(data);
  return true;
}

namespace {

// The temporary file write_file() is writing, for the signal handler to remove when a
// signal ends the process during the write.
char g_temp_path[PATH_MAX + 64];
volatile sig_atomic_t g_temp_set = 0;

void remove_temp_and_reraise(int sig) {
  if (g_temp_set) ::unlink(g_temp_path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// While alive: SIGINT, SIGTERM and SIGHUP remove the temporary file before they end the
// process, and SIGXFSZ is ignored, so that writing past a file size limit fails with EFBIG
// (and the temporary file is removed) instead of killing the process.
class TempFileSignals {
 public:
  explicit TempFileSignals(const std::string& temp) {
    std::snprintf(g_temp_path, sizeof g_temp_path, "%s", temp.c_str());
    g_temp_set = 1;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = remove_temp_and_reraise;
    for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    sa.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &sa, &old_[3]);
  }
  ~TempFileSignals() {
    done();
    for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigaction(SIGXFSZ, &old_[3], nullptr);
  }
  // The temporary file is gone (renamed or removed): nothing for a signal to remove.
  void done() { g_temp_set = 0; }
  TempFileSignals(const TempFileSignals&) = delete;
  TempFileSignals& operator=(const TempFileSignals&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[4];
};

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Writes a file that is not a regular one (a device such as /dev/null, a FIFO) as it is.
bool write_in_place(const std::string& path, const void* data, size_t size, std::string* error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  const bool ok = write_all(fd, data, size);
  const int err = errno;
  if (::close(fd) != 0 || !ok) {
    *error = std::strerror(ok ? errno : err);
    return false;
  }
  return true;
}

// Writes `target` through a temporary file in its directory, synced and then renamed over
// it: `target` holds either its old bytes or all the new ones, whenever the process stops.
// `old` is the file being replaced (its mode is kept), or null for a new file.
bool replace_file(const std::string& target, const struct stat* old, const void* data, size_t size,
                  std::string* error) {
  const std::string dir = dirname_of(target);
  std::string temp;
  int fd = -1;
  static unsigned counter = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".kjit-%ld-%u-%x", static_cast<long>(::getpid()),
                  counter++, static_cast<unsigned>(static_cast<uint64_t>(now_ms() * 1000.0)));
    temp = join_path(dir, "." + basename_of(target).substr(0, 160) + suffix);
    // 0666 less the umask, as a file the shell creates; an existing file's mode is kept.
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0) {
    *error = "cannot create a temporary file in '" + dir + "': " + std::strerror(errno);
    return false;
  }
  TempFileSignals signals(temp);
  std::string failure;  // what went wrong, "" while nothing has
  if (old && ::fchmod(fd, old->st_mode & 07777) != 0) {
    failure = std::string("cannot set the mode of the temporary file: ") + std::strerror(errno);
  } else if (!write_all(fd, data, size)) {
    failure = std::strerror(errno);
  } else if (::fsync(fd) != 0) {
    failure = std::string("cannot sync the temporary file: ") + std::strerror(errno);
  }
  if (::close(fd) != 0 && failure.empty()) failure = std::strerror(errno);
  if (failure.empty() && ::rename(temp.c_str(), target.c_str()) != 0) {
    failure = std::string("cannot rename the temporary file over it: ") + std::strerror(errno);
  }
  if (!failure.empty()) ::unlink(temp.c_str());
  signals.done();
  if (!failure.empty()) {
    *error = failure;
    return false;
  }
  // Make the rename durable too (best effort: not every file system syncs a directory).
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return true;
}

}  // namespace

bool write_file(const std::string& path, const void* data, size_t size, std::string* error) {
  if (path == "-") {
    if (std::fwrite(data, 1, size, stdout) != size || std::fflush(stdout) != 0) {
      *error = std::strerror(errno);
      return false;
    }
    return true;
  }
  struct stat st, link;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const bool is_link = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  // A device or a FIFO (and a symbolic link to nothing yet) is written as it is.
  if ((exists && !S_ISREG(st.st_mode)) || (is_link && !exists)) {
    return write_in_place(path, data, size, error);
  }
  std::string target = path;
  if (is_link) {  // replace the file the link names, not the link
    char* real = ::realpath(path.c_str(), nullptr);
    if (!real) {
      *error = std::strerror(errno);
      return false;
    }
    target = real;
    std::free(real);
  }
  return replace_file(target, exists ? &st : nullptr, data, size, error);
}

std::string nul_byte_at(size_t offset) {
  return "contains a NUL byte at byte offset " + std::to_string(offset);
}

std::string nul_byte_problem(const std::string& text) {
  const size_t at = text.find('\0');
  return at == std::string::npos ? std::string() : nul_byte_at(at);
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
    case KJIT_TIER_COMPILED:
      return "compiled";
    case KJIT_TIER_MEMORY:
      return "memory";
    case KJIT_TIER_DISK:
      return "disk";
    case KJIT_TIER_REMOTE:
      return "remote";
    default:
      return "unknown";
  }
}

const char* disk_state_name(int state) {
  switch (state) {
    case KJIT_DISK_OK:
      return "ok";
    case KJIT_DISK_READ_ONLY:
      return "read-only";
    case KJIT_DISK_DISABLED:
      return "disabled";
    case KJIT_DISK_UNAVAILABLE:
      return "unavailable";
    default:
      return "unknown";
  }
}

// ---- cache ----------------------------------------------------------------------------

uint64_t cache_waits(kjit_cache* cache) {
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  return kjit_cache_stats_get(cache, &s) == KJIT_OK ? s.waits : 0;
}

double wait_ms_of(bool waited, int tier, double elapsed_ms, double compile_ms) {
  if (!waited) return 0;
  const double own = tier == KJIT_TIER_COMPILED ? compile_ms : 0;
  return elapsed_ms > own ? elapsed_ms - own : 0;
}

std::string waited_text(double wait_ms) {
  if (wait_ms <= 0) return std::string();
  return " after waiting " + human_ms(wait_ms) + " for another process";
}

std::string cache_location(const Global& g) {
  if (!g.cache_dir.empty()) return g.cache_dir;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
  };
  if (!env("KJIT_CACHE_DIR").empty()) return env("KJIT_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return join_path(env("XDG_CACHE_HOME"), "kjit");
  if (!env("HOME").empty()) return join_path(env("HOME"), ".cache/kjit");
  const std::string tmp = env("TMPDIR").empty() ? std::string("/tmp") : env("TMPDIR");
  return join_path(tmp, "kjit-" + std::to_string(::getuid()));
}

std::string cache_database(const std::string& dir) {
  return join_path(dir, "kjit.db");
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

kjit_cache* open_existing_cache(const Global& g) {
  std::string dir;
  kjit_cache* c = open_cache_if_present(g, &dir);
  if (!c) {
    fail(kExitError, "no cache at '" + dir + "' (no " + basename_of(cache_database(dir)) +
                         " there: nothing has been stored in it yet)");
  }
  return c;
}

kjit_cache_stats read_cache_stats(kjit_cache* cache) {
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  const kjit_status st = kjit_cache_stats_get(cache, &s);
  if (st != KJIT_OK) fail_status(st, "cannot read the cache state");
  return s;
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

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  // A name this long is no typo of a known one (and the table below would be large).
  if (name.size() > 64) return std::string();
  // Optimal string alignment distance: insertions, deletions, substitutions and swaps of
  // two neighbouring letters each cost 1.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.size()][b.size()];
  };
  std::string best;
  size_t best_d = 0;
  for (const std::string& k : known) {
    const size_t d = distance(name, k);
    if (best.empty() || d < best_d) {
      best = k;
      best_d = d;
    }
  }
  // A third of the name's letters (at least one, at most three) may be wrong.
  const size_t limit = std::min<size_t>(3, std::max<size_t>(1, name.size() / 3));
  return !best.empty() && best_d <= limit ? best : std::string();
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

namespace {

bool read_worker(kjit_cache* cache, kjit_worker_info* w, std::string* error) {
  std::memset(w, 0, sizeof *w);
  w->struct_size = sizeof *w;
  const kjit_status st = kjit_worker_info_get(cache, w);
  if (st == KJIT_OK) return true;
  const char* e = kjit_last_error();
  *error = e && *e ? e : kjit_status_string(st);
  return false;
}

}  // namespace

std::string worker_text(kjit_cache* cache) {
  if (!cache) return "not running (no cache yet)";
  kjit_worker_info w;
  std::string error;
  if (!read_worker(cache, &w, &error)) return "unknown: " + error;
  if (!w.running) return "not running (started by the next compile that misses)";
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "running: pid %lld, up %s, %llu compiles (%llu failed, %llu timed out), %llu in "
      "flight, PCH %s (%llu created, %llu used), %s resident, exits after %llu s idle; "
      "%llu earlier worker%s crashed",
      static_cast<long long>(w.pid), human_ms(w.uptime_s * 1000.0).c_str(),
      static_cast<unsigned long long>(w.compiles), static_cast<unsigned long long>(w.failures),
      static_cast<unsigned long long>(w.timeouts), static_cast<unsigned long long>(w.in_flight),
      w.pch_in_use ? "warm" : "none yet", static_cast<unsigned long long>(w.pch_created),
      static_cast<unsigned long long>(w.pch_used), human_bytes(w.rss_bytes).c_str(),
      static_cast<unsigned long long>(w.idle_limit_s), static_cast<unsigned long long>(w.crashes),
      w.crashes == 1 ? "" : "s");
  return buf;
}

void add_worker_json(cJSON* parent, kjit_cache* cache) {
  kjit_worker_info w;
  std::string error;
  cJSON* o = cJSON_AddObjectToObject(parent, "worker");
  if (!cache) {
    cJSON_AddBoolToObject(o, "running", false);
    return;
  }
  if (!read_worker(cache, &w, &error)) {
    cJSON_AddStringToObject(o, "error", error.c_str());
    return;
  }
  cJSON_AddBoolToObject(o, "running", w.running != 0);
  if (!w.running) return;
  cJSON_AddNumberToObject(o, "pid", static_cast<double>(w.pid));
  cJSON_AddNumberToObject(o, "uptime_s", w.uptime_s);
  cJSON_AddNumberToObject(o, "idle_s", w.idle_s);
  cJSON_AddNumberToObject(o, "compiles", static_cast<double>(w.compiles));
  cJSON_AddNumberToObject(o, "failures", static_cast<double>(w.failures));
  cJSON_AddNumberToObject(o, "timeouts", static_cast<double>(w.timeouts));
  cJSON_AddNumberToObject(o, "in_flight", static_cast<double>(w.in_flight));
  cJSON_AddNumberToObject(o, "crashes", static_cast<double>(w.crashes));
  cJSON_AddBoolToObject(o, "pch_in_use", w.pch_in_use != 0);
  cJSON_AddNumberToObject(o, "pch_created", static_cast<double>(w.pch_created));
  cJSON_AddNumberToObject(o, "pch_used", static_cast<double>(w.pch_used));
  cJSON_AddNumberToObject(o, "idle_limit_s", static_cast<double>(w.idle_limit_s));
  cJSON_AddNumberToObject(o, "rss_bytes", static_cast<double>(w.rss_bytes));
}

}  // namespace kjit_cli
