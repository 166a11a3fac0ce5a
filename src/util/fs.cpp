#include "util/fs.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace kjit {

std::optional<std::string> read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  const bool ok = !std::ferror(f);
  std::fclose(f);
  if (!ok) return std::nullopt;
  return data;
}

std::string file_identity(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  char buf[160];
  std::snprintf(buf, sizeof buf, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld",
                (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
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
    case 0x6969UL: return "nfs";
    case 0xFF534D42UL: return "cifs";
    case 0xFE534D42UL: return "smb2";
    case 0x517BUL: return "smb";
    case 0x65735546UL: return "fuse";
    case 0x01021997UL: return "9p";
    case 0x47504653UL: return "gpfs";
    case 0x0BD00BD0UL: return "lustre";
    case 0x73757245UL: return "coda";
    case 0x564c: return "ncp";
    case 0x6B414653UL: return "afs";
    case 0x5346414FUL: return "afs";
    case 0x19830326UL: return "fhgfs";
    case 0x013111A8UL: return "ibrix";
    case 0x00C36400UL: return "ceph";
    default: return "";
  }
}

int64_t unix_time() { return static_cast<int64_t>(std::time(nullptr)); }

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

}  // namespace kjit
