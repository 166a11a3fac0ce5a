// Files of the cache directory written whole, then renamed into place (file_put.h).
#include "store/file_put.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"

namespace kjit {
namespace {

// Writes all of `size` bytes; false with errno set on failure.
bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= size_t(n);
  }
  return true;
}

}  // namespace

std::string write_new_file(const std::string& final_dir, const std::string& stem,
                           const std::vector<std::string_view>& pieces) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp =
      join_path(final_dir, kTempPrefix + stem + "-" + std::to_string(::getpid()) + "-" +
                               std::to_string(counter++));
  // The directory is kjit's own: a link there (to a directory elsewhere) or a file in its
  // place is removed, so that nothing is written outside the cache directory.
  if (!ensure_own_directory(final_dir, 0700) &&
      !(errno == ENOENT && make_directories(dirname_of(final_dir), 0700) &&
        ensure_own_directory(final_dir, 0700))) {
    fail(KJIT_ERROR_CACHE,
         "cannot create the directory " + final_dir + ": " + std::strerror(errno));
  }
  const int fd =
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) fail(KJIT_ERROR_CACHE, "cannot create " + temp + ": " + std::strerror(errno));
  bool ok = true;
  for (std::string_view p : pieces) ok = ok && write_all(fd, p.data(), p.size());
  const int write_errno = errno;
  if (::close(fd) != 0 && ok) ok = false;
  if (!ok) {
    ::unlink(temp.c_str());
    fail(KJIT_ERROR_CACHE, "cannot write " + temp + ": " + std::strerror(write_errno));
  }
  return temp;
}

void move_into_place(const std::string& temp, const std::string& to) {
  int rc = std::rename(temp.c_str(), to.c_str());
  if (rc != 0 && (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)) {
    // A directory where the file goes (left by hand or by another program): it is no
    // entry; it goes, and the file takes its place.
    log_warn("removing " + file_kind(to) + " at " + to + ", where a cache file goes");
    if (remove_any(to)) rc = std::rename(temp.c_str(), to.c_str());
  }
  if (rc != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(KJIT_ERROR_CACHE, "cannot move " + temp + " to " + to + ": " + std::strerror(err));
  }
}

}  // namespace kjit
