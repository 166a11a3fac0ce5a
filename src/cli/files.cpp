// The kjit command-line tool: files read with limits, files written whole (through a
// temporary file that a signal removes), and path helpers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"

namespace kjit_cli {

// ---- reading --------------------------------------------------------------------------

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

// ---- writing --------------------------------------------------------------------------

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
  const std::string dir = parent_dir_or_dot(target);
  std::string temp;
  int fd = -1;
  static unsigned counter = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".kjit-%ld-%u-%x", static_cast<long>(::getpid()),
                  counter++, static_cast<unsigned>(static_cast<uint64_t>(now_ms() * 1000.0)));
    temp = path_in(dir, "." + basename_of(target).substr(0, 160) + suffix);
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

// ---- contents -------------------------------------------------------------------------

std::string nul_byte_at(size_t offset) {
  return "contains a NUL byte at byte offset " + std::to_string(offset);
}

std::string nul_byte_problem(const std::string& text) {
  const size_t at = text.find('\0');
  return at == std::string::npos ? std::string() : nul_byte_at(at);
}

// ---- paths ----------------------------------------------------------------------------

std::string parent_dir_or_dot(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string path_in(const std::string& dir, const std::string& name) {
  if (name.empty() || name[0] == '/' || dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string current_directory_or_dot() {
  std::vector<char> buf(4096);
  while (::getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE || buf.size() > (1u << 20)) return ".";
    buf.resize(buf.size() * 2);
  }
  return buf.data();
}

}  // namespace kjit_cli
