#include "util/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace kjit {

std::optional<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  const size_t size = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? size_t(st.st_size) : 0;
  // One byte more than the file's size is asked for: when exactly its size comes back, that
  // is its end, without a read of nothing to learn it. Anything else (a file that grew or
  // shrank meanwhile, one whose size says nothing, as /proc's) is read until a read of 0.
  size_t want = size + 1;
  std::string data;
  bool ok = true;
  for (;;) {
    const size_t at = data.size();
    data.resize(at + want);
    const ssize_t n = ::read(fd, &data[at], want);
    data.resize(at + (n > 0 ? size_t(n) : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0 || (size > 0 && data.size() == size && size_t(n) < want)) break;
    want = 65536;
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  return data;
}

std::optional<std::vector<std::string>> directory_names(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  char buf[160];
  std::snprintf(buf, sizeof buf, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld",
                (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (long long)st.st_size,
                (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
                st.st_ctim.tv_nsec);
  return buf;
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool make_directories(const std::string& path, unsigned mode) {
  if (path.empty()) return false;
  if (is_directory(path)) return true;
  const std::string parent = dirname_of(path);
  if (!parent.empty() && parent != path && !is_directory(parent)) {
    if (!make_directories(parent, mode)) return false;
  }
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return false;
  return is_directory(path);
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (!name.empty() && name[0] == '/') return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string network_fs_type(const std::string& path) {
  struct statfs sf;
  if (::statfs(path.c_str(), &sf) != 0) return "";
  switch (static_cast<unsigned long>(sf.f_type)) {
    case 0x6969UL:
      return "nfs";
    case 0xFF534D42UL:
      return "cifs";
    case 0xFE534D42UL:
      return "smb2";
    case 0x517BUL:
      return "smb";
    case 0x65735546UL:
      return "fuse";
    case 0x01021997UL:
      return "9p";
    case 0x47504653UL:
      return "gpfs";
    case 0x0BD00BD0UL:
      return "lustre";
    case 0x73757245UL:
      return "coda";
    case 0x564c:
      return "ncp";
    case 0x6B414653UL:
      return "afs";
    case 0x5346414FUL:
      return "afs";
    case 0x19830326UL:
      return "fhgfs";
    case 0x013111A8UL:
      return "ibrix";
    case 0x00C36400UL:
      return "ceph";
    default:
      return "";
  }
}

int64_t unix_time() {
  return static_cast<int64_t>(std::time(nullptr));
}

double monotonic_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

bool path_under_any(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (path == root || path.compare(0, root.size() + 1, root + "/") == 0) return true;
  }
  return false;
}

bool stat_stamp(const char* path, PathStamp* out) {
  struct stat st;
  if (::stat(path, &st) != 0) {
    out->kind = 0;
    out->dev = out->ino = out->size = 0;
    out->mtime_ns = out->ctime_ns = 0;
    return errno == ENOENT || errno == ENOTDIR;
  }
  out->kind = S_ISREG(st.st_mode) ? 1 : S_ISDIR(st.st_mode) ? 2 : 3;
  out->dev = uint64_t(st.st_dev);
  out->ino = uint64_t(st.st_ino);
  out->size = out->kind == 2 ? 0 : uint64_t(st.st_size);
  out->mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  out->ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return true;
}

bool stamp_path(const std::string& path, PathStamp* out) {
  out->path = path;
  return stat_stamp(path.c_str(), out);
}

bool paths_unchanged(const std::vector<PathStamp>& looked, const std::string& cwd,
                     const PathStamp* cwd_now) {
  PathStamp now;
  for (const PathStamp& was : looked) {
    const bool is_cwd = cwd_now && !cwd.empty() &&
                        (was.path == cwd || (was.path.size() == cwd.size() + 2 &&
                                             was.path.compare(0, cwd.size(), cwd) == 0 &&
                                             was.path.compare(cwd.size(), 2, "/.") == 0));
    if (is_cwd) {
      now = *cwd_now;
    } else if (!stat_stamp(was.path.c_str(), &now)) {
      return false;
    }
    if (now.kind != was.kind || now.dev != was.dev || now.ino != was.ino || now.size != was.size) {
      return false;
    }
    // A directory's times change with every file made in it: they count only where its
    // listing was read.
    if ((was.kind != 2 || was.listing) &&
        (now.mtime_ns != was.mtime_ns || now.ctime_ns != was.ctime_ns)) {
      return false;
    }
  }
  return true;
}

bool stamp_settled(const PathStamp& s, int64_t now) {
  return now - std::max(s.mtime_ns, s.ctime_ns) >= kRacySeconds * 1000000000;
}

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t realtime_ns_from(int64_t t) {
  int64_t now = realtime_ns();
  for (int i = 0; i < 1000 && now < t; ++i) {  // a bound: at most a second's naps
    const int64_t wait = std::min<int64_t>(t - now, 1000000000 - 1);
    const timespec nap{0, long(wait)};
    nanosleep(&nap, nullptr);
    now = realtime_ns();
  }
  return now;
}

std::string current_directory() {
  char buf[PATH_MAX];
  return getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

std::string resolve_path(const std::string& path) {
  std::string abs = path;
  if (abs.empty() || abs[0] != '/') {
    const std::string cwd = current_directory();
    abs = join_path(cwd.empty() ? "/" : cwd, abs);
  }
  char buf[PATH_MAX];
  if (realpath(abs.c_str(), buf)) return buf;
  // Walk up to the deepest ancestor that exists; keep the rest as written.
  std::string rest;
  std::string dir = abs;
  while (!dir.empty() && dir != "/") {
    const size_t slash = dir.find_last_of('/');
    const std::string last = dir.substr(slash + 1);
    rest = rest.empty() ? last : last + "/" + rest;
    dir = slash == 0 ? "/" : dir.substr(0, slash);
    if (realpath(dir.c_str(), buf)) return join_path(buf, rest);
  }
  return abs;
}

}  // namespace kjit
