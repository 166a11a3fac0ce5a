#include "util/safe_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kjit {

Opened open_regular_at(int dir_fd, const std::string& name, int flags, unsigned mode, bool follow,
                       int* fd, struct stat* st, int* err) {
  *fd = -1;
  int extra = O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
  int f = ::openat(dir_fd, name.c_str(), flags | extra, mode_t(mode));
  if (f < 0 && errno == EPERM && (flags & O_NOATIME)) {
    f = ::openat(dir_fd, name.c_str(), (flags & ~O_NOATIME) | extra, mode_t(mode));
  }
  if (f < 0) {
    const int e = errno;
    if (err) *err = e;
    if (e == ENOENT || e == ENOTDIR) return Opened::Absent;
    // ELOOP: a link where links are not followed; ENXIO: a FIFO without a reader opened for
    // writing (or a device without its driver); EISDIR: a directory opened for writing.
    if (e == ELOOP || e == ENXIO || e == EISDIR || e == ENODEV) return Opened::NotRegular;
    return Opened::Failed;
  }
  if (::fstat(f, st) != 0) {
    if (err) *err = errno;
    ::close(f);
    return Opened::Failed;
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(f);
    if (err) *err = EINVAL;
    return Opened::NotRegular;
  }
  const int fl = ::fcntl(f, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK)) ::fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
  *fd = f;
  return Opened::Ok;
}

Opened open_regular(const std::string& path, int flags, unsigned mode, bool follow, int* fd,
                    struct stat* st, int* err) {
  return open_regular_at(AT_FDCWD, path, flags, mode, follow, fd, st, err);
}

std::optional<std::string> read_regular_file(const std::string& path, size_t max_bytes, bool follow,
                                             std::string* why) {
  int fd = -1;
  int err = 0;
  struct stat st;
  why->clear();
  switch (open_regular(path, O_RDONLY, 0, follow, &fd, &st, &err)) {
    case Opened::Ok:
      break;
    case Opened::Absent:
      return std::nullopt;
    case Opened::NotRegular:
      *why = "not a regular file (" + file_kind(path) + ")";
      return std::nullopt;
    case Opened::Failed:
      *why = std::string("cannot open it: ") + std::strerror(err);
      return std::nullopt;
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    *why =
        "larger than " + std::to_string(max_bytes) + " bytes (" + std::to_string(st.st_size) + ")";
    return std::nullopt;
  }
  // Read to its end, but never more than max_bytes + 1 (a file that grows meanwhile).
  std::string data(size_t(st.st_size) + 1, '\0');
  size_t have = 0;
  for (;;) {
    if (have == data.size()) {
      if (data.size() > max_bytes) break;
      data.resize(std::min(max_bytes + 1, data.size() * 2 + 4096));
    }
    const ssize_t n = ::read(fd, &data[have], data.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::string("cannot read it: ") + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    have += size_t(n);
  }
  ::close(fd);
  if (have > max_bytes) {
    *why = "larger than " + std::to_string(max_bytes) + " bytes";
    return std::nullopt;
  }
  data.resize(have);
  return data;
}

std::string file_kind(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "nothing";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a device";
}

namespace {

// Removes `name` in the directory `dir_fd` (see remove_any).
bool remove_at(int dir_fd, const char* name, int depth) {
  if (::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;
  if (depth <= 0) return false;
  const int sub = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return false;
  DIR* d = ::fdopendir(sub);
  if (!d) {
    ::close(sub);
    return false;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  bool ok = true;
  for (const std::string& n : names) ok = remove_at(::dirfd(d), n.c_str(), depth - 1) && ok;
  ::closedir(d);
  return ok && (::unlinkat(dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT);
}

}  // namespace

bool remove_any(const std::string& path, int depth) {
  return remove_at(AT_FDCWD, path.c_str(), depth);
}

bool ensure_own_directory(const std::string& path, unsigned mode) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    if (!remove_any(path)) return false;
  } else if (errno != ENOENT) {
    return false;
  }
  if (::mkdir(path.c_str(), mode_t(mode)) == 0) return true;
  return errno == EEXIST && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace kjit
