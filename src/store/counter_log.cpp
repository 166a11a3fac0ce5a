// The counter log (counter_log.h): appended by closing processes, taken by the next opener.
#include "store/counter_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"

namespace kjit {
namespace {

// The deltas of a pending-counters log: lines "name value"; malformed lines are skipped.
std::vector<std::pair<std::string, int64_t>> parse_counter_log(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = text.substr(start, nl - start);
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0) continue;
    std::string name = line.substr(0, sp);
    if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    const long long value = std::strtoll(line.c_str() + sp + 1, nullptr, 10);
    if (value > 0) out.emplace_back(std::move(name), int64_t(value));
  }
  return out;
}

}  // namespace

void (*CounterLog::pending_hook_for_test)(const std::string& log) = nullptr;

CounterLog::CounterLog(const std::string& cache_dir)
    : cache_dir_(cache_dir), dir_(join_path(cache_dir, "counters")) {}

bool CounterLog::append(const std::vector<std::pair<std::string, int64_t>>& deltas) const {
  std::string text;
  for (const auto& [name, delta] : deltas) text += name + " " + std::to_string(delta) + "\n";
  // Appended to one log in a single write (O_APPEND writes of a few hundred bytes are not
  // interleaved), so a closing process creates no file of its own.
  if (!ensure_own_directory(dir_, 0700)) {
    if (errno != ENOENT || !make_directories(cache_dir_, 0700) ||
        !ensure_own_directory(dir_, 0700)) {
      fail(KJIT_ERROR_CACHE, "cannot create " + dir_ + ": " + std::strerror(errno));
    }
  }
  const std::string log = join_path(dir_, "pending");
  // A few rounds at most: each one lost means another process took the log meanwhile.
  for (int attempt = 0; attempt < 8; ++attempt) {
    int fd = -1, err = 0;
    struct stat st;
    switch (
        open_regular(log, O_WRONLY | O_APPEND | O_CREAT, 0600, /*follow=*/false, &fd, &st, &err)) {
      case Opened::Ok:
        break;
      case Opened::Absent:
        continue;  // the directory went meanwhile
      case Opened::NotRegular:
        log_warn(log + " is " + file_kind(log) + ", not a regular file: not written");
        return false;
      case Opened::Failed:
        fail(KJIT_ERROR_CACHE, "cannot open " + log + ": " + std::strerror(err));
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    if (pending_hook_for_test) pending_hook_for_test(log);
    int rc;
    while ((rc = ::flock(fd, LOCK_SH)) != 0 && errno == EINTR) {
    }
    if (rc != 0) fail(KJIT_ERROR_CACHE, "cannot lock " + log + ": " + std::strerror(errno));
    // Still the log (not taken since it was opened)? Checked under the lock: a taker
    // renames before it takes its exclusive lock, so a log found here is read after this
    // write.
    struct stat now, named;
    if (::fstat(fd, &now) != 0 || now.st_nlink == 0 || ::lstat(log.c_str(), &named) != 0 ||
        named.st_dev != now.st_dev || named.st_ino != now.st_ino) {
      continue;
    }
    if (uint64_t(now.st_size) + text.size() > kMaxPendingBytes) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    if (!ok) fail(KJIT_ERROR_CACHE, "cannot append to " + log + ": " + std::strerror(errno));
    return true;
  }
  return false;
}

std::vector<std::string> CounterLog::take() const {
  // The log is renamed before it is read: appends that come later start a new one. Logs
  // taken by a process that died before it added them, or left because an appender still
  // held them, are taken again.
  static std::atomic<uint64_t> n{0};
  const std::string taken =
      join_path(dir_, "taken-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::rename(join_path(dir_, "pending").c_str(), taken.c_str());
  std::vector<std::string> out;
  if (const auto names = directory_names(dir_)) {
    for (const std::string& name : *names) {
      if (name.rfind("taken-", 0) == 0) out.push_back(join_path(dir_, name));
    }
  }
  return out;
}

CounterLog::Taken CounterLog::read_text(const std::string& file, std::string* text,
                                        std::string* why) const {
  int fd = -1, err = 0;
  struct stat st;
  switch (open_regular(file, O_RDONLY, 0, /*follow=*/false, &fd, &st, &err)) {
    case Opened::Ok:
      break;
    case Opened::Absent:
      text->clear();
      return Taken::Read;
    case Opened::NotRegular:
      *why = "not a regular file (" + file_kind(file) + ")";
      return Taken::Unusable;
    case Opened::Failed:
      *why = std::string("cannot open it: ") + std::strerror(err);
      return Taken::Unusable;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Appenders hold a shared lock for one write: wait a little, never long (the caller
  // holds the index's write lock). One that holds it longer leaves the file to a later taker.
  bool locked = false;
  for (int i = 0; i < 20 && !locked; ++i) {
    locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!locked) return Taken::Busy;
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) > kMaxTakenBytes) {
    *why = "larger than " + std::to_string(kMaxTakenBytes) + " bytes";
    return Taken::Unusable;
  }
  text->assign(size_t(st.st_size), '\0');
  size_t have = 0;
  while (have < text->size()) {
    const ssize_t r = ::pread(fd, &(*text)[have], text->size() - have, off_t(have));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += size_t(r);
  }
  text->resize(have);
  return Taken::Read;
}

CounterLog::Taken CounterLog::read(const std::string& file, Deltas* deltas,
                                   std::string* why) const {
  std::string text;
  const Taken t = read_text(file, &text, why);
  if (t == Taken::Read) *deltas = parse_counter_log(text);
  return t;
}

bool CounterLog::pending() const {
  struct stat st;
  if (::lstat(dir_.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {  // a link (to a directory elsewhere) or a file: never followed
    log_warn(dir_ + " is " + file_kind(dir_) + ", not a directory: removed");
    remove_any(dir_);
    return false;
  }
  const auto names = directory_names(dir_);
  return names && !names->empty();
}

CounterLog::Deltas CounterLog::take_all() const {
  Deltas all;
  for (const std::string& file : take()) {
    Deltas deltas;
    std::string why;
    switch (read(file, &deltas, &why)) {
      case Taken::Busy:
        break;  // an appender still holds it: a later process adds it
      case Taken::Unusable:
        log_warn("cache counters log " + file + " removed unread: " + why);
        remove_any(file);
        break;
      case Taken::Read:
        if (::unlink(file.c_str()) == 0 || errno == ENOENT) {
          all.insert(all.end(), deltas.begin(), deltas.end());
        }
        break;
    }
  }
  return all;
}

}  // namespace kjit
