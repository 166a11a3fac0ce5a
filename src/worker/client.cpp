#include "worker/client.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "key/include_scan.h"
#include "key/toolchain.h"
#include "kjit/common.h"
#include "store/cache.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"
#include "util/sha256.h"
#include "util/socket.h"

extern char** environ;

namespace kjit {
namespace {

using worker::FrameType;
using worker::ReadResult;

std::string library_version() {
  return std::to_string(KJIT_VERSION_MAJOR) + "." + std::to_string(KJIT_VERSION_MINOR) + "." +
         std::to_string(KJIT_VERSION_PATCH);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end || !(d >= 0)) {
    log_warn(std::string("ignoring ") + name + "='" + v + "': not a non-negative number");
    return fallback;
  }
  return d;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Bounds of every wait on another process while connecting and starting: a worker that
// does not answer costs a caller a few seconds, never a compile's time.
constexpr double kHelloMs = 2000;       // the worker's hello after connect
constexpr double kStartMs = 10000;      // the started worker's report on the ready pipe
constexpr double kExitMs = 2000;        // the started process's exit after its report
constexpr double kStartLockMs = 20000;  // another process starting the worker

// Where a connection attempt ended.
struct Conn {
  // Silent: connected, but no hello within kHelloMs (a stopped or hung peer).
  enum class State { Ok, Missing, Stale, Mismatch, Foreign, Silent, Broken } state = State::Broken;
  Fd fd;
  std::string socket_file;  // the socket file's identity when connecting ("" = none)
  std::string detail;
  worker::Hello hello;
};

// Device and inode of the socket file `name`.sock in `dir_fd`, or "".
std::string socket_file_identity(int dir_fd, const std::string& name) {
  struct stat st;
  if (::fstatat(dir_fd, (name + ".sock").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

Conn connect_and_hello(const WorkerAddress& addr, const std::string& toolchain) {
  Conn c;
  Fd dir(::open(addr.directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    c.detail = "cannot open " + addr.directory + ": " + std::strerror(errno);
    return c;
  }
  sockaddr_un sa;
  const size_t len = socket_address(addr.directory, dir.get(), addr.name + ".sock", &sa);
  if (!len) {
    c.detail = "socket path too long";
    return c;
  }
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    c.detail = std::string("socket: ") + std::strerror(errno);
    return c;
  }
  c.socket_file = socket_file_identity(dir.get(), addr.name);
  int r;
  do {
    r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), socklen_t(len));
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    const int e = errno;
    c.state = e == ENOENT         ? Conn::State::Missing
              : e == ECONNREFUSED ? Conn::State::Stale
                                  : Conn::State::Broken;
    c.detail = std::string("connect: ") + std::strerror(e);
    return c;
  }
  long peer = -1;
  if (!peer_is_user(fd.get(), geteuid(), &peer)) {
    c.state = Conn::State::Foreign;
    c.detail = "the socket's server runs as user " + std::to_string(peer) + ", not as this user";
    return c;
  }
  FrameType type;
  std::string payload;
  const ReadResult rr = worker::read_frame(fd.get(), &type, &payload, monotonic_ms() + kHelloMs);
  if (rr != ReadResult::Ok) {
    if (rr == ReadResult::Timeout) c.state = Conn::State::Silent;
    c.detail = rr == ReadResult::Timeout ? "no hello from the worker within " +
                                               std::to_string(int(kHelloMs / 1000)) + " s"
                                         : "the worker closed the connection before its hello";
    return c;
  }
  if (type == FrameType::Refused) {
    c.detail = "the worker refused the connection: " + payload;
    return c;
  }
  try {
    if (type != FrameType::Hello) throw worker::ProtocolError("expected a hello");
    c.hello = worker::decode_hello(payload);
  } catch (const std::exception& e) {
    c.state = Conn::State::Mismatch;
    c.detail = std::string("the socket's server does not speak this protocol (") + e.what() + ")";
    return c;
  }
  if (c.hello.library_version != library_version() ||
      c.hello.protocol != worker::kProtocolVersion || c.hello.toolchain != toolchain) {
    c.state = Conn::State::Mismatch;
    c.detail = "the running worker is kjit " + c.hello.library_version + ", protocol " +
               std::to_string(c.hello.protocol) + ", " + c.hello.toolchain + "; this is kjit " +
               library_version() + ", protocol " + std::to_string(worker::kProtocolVersion) + ", " +
               toolchain;
    return c;
  }
  worker::Hello mine;
  mine.library_version = library_version();
  mine.toolchain = toolchain;
  mine.pid = getpid();
  if (!worker::write_frame(fd.get(), FrameType::Hello, worker::encode(mine))) {
    c.detail = "the worker closed the connection after its hello";
    return c;
  }
  c.state = Conn::State::Ok;
  c.fd = std::move(fd);
  return c;
}

std::string nvrtc_library_dir() {
  const std::string lib = nvrtc_library_path();
  return lib.empty() ? "" : dirname_of(lib);
}

// The first line a starting worker writes on the ready pipe ("OK <pid>" or why it failed),
// read until a newline, end of file, 4 KiB or `deadline`; made printable.
std::string read_ready_report(int fd, double deadline) {
  std::string said;
  for (;;) {
    const double left = deadline - monotonic_ms();
    if (left <= 0) break;
    pollfd pf{fd, POLLIN, 0};
    const int r = ::poll(&pf, 1, int(left) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    said.append(buf, size_t(n));
    if (said.find('\n') != std::string::npos || said.size() > 4096) break;
  }
  const size_t nl = said.find('\n');
  if (nl != std::string::npos) said.resize(nl);
  if (said.size() > 200) said = said.substr(0, 200) + "...";
  for (char& ch : said) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  }
  return said;
}

// Waits for `pid` up to `ms`; true once it is reaped.
bool reap_within(pid_t pid, double ms) {
  const double deadline = monotonic_ms() + ms;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (monotonic_ms() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Reaps the process that was started to become the worker, within bounds. One that failed
// to report, or that does not exit after its report, is killed with its process group (its
// own session: the worker itself leaves it with setsid() before it reports "OK").
void end_started_process(pid_t pid, bool reported_ok) {
  if (reported_ok && reap_within(pid, kExitMs)) return;
  ::kill(-pid, SIGKILL);  // the group id is the unreaped pid: it cannot name another group
  ::kill(pid, SIGKILL);
  if (reap_within(pid, 1000)) return;
  std::thread([pid] {  // not reaped yet (uninterruptible): reaped in the background
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  })
      .detach();
}

// Starts the worker for `addr` and waits until it listens. Called with the start lock held.
bool spawn_worker(const WorkerAddress& addr, int dir_fd, std::string* why) {
  const std::string exe = worker_executable(why);
  if (exe.empty()) return false;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  Fd rd(p[0]), wr(p[1]);
  Fd logfd;
  {
    int f = -1;
    struct stat st;
    // Only a regular file (a FIFO there would block the worker's first message).
    if (open_regular_at(dir_fd, addr.name + ".log", O_WRONLY | O_CREAT, 0600, false, &f, &st) ==
        Opened::Ok) {
      logfd = Fd(f);
      if (::ftruncate(f, 0) != 0) logfd.reset();
    }
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (logfd.get() >= 0) {
    posix_spawn_file_actions_adddup2(&fa, logfd.get(), 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const std::string idle = std::to_string(uint64_t(env_number("KJIT_WORKER_IDLE_S", 300)));
  std::vector<std::string> args = {exe,      "--dir", addr.directory, "--name", addr.name,
                                   "--idle", idle,    "--ready-fd",   "3"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The worker loads the same libnvrtc as this process.
  std::vector<std::string> env;
  const std::string nvrtc_dir = nvrtc_library_dir();
  bool have_ld = false;
  for (char** e = environ; e && *e; ++e) {
    std::string v = *e;
    if (!nvrtc_dir.empty() && v.rfind("LD_LIBRARY_PATH=", 0) == 0) {
      v = "LD_LIBRARY_PATH=" + nvrtc_dir + ":" + v.substr(16);
      have_ld = true;
    }
    env.push_back(std::move(v));
  }
  if (!nvrtc_dir.empty() && !have_ld) env.push_back("LD_LIBRARY_PATH=" + nvrtc_dir);
  std::vector<char*> envp;
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  wr.reset();
  logfd.reset();
  if (rc != 0) {
    *why = "cannot run " + exe + ": " + std::strerror(rc);
    return false;
  }
  // The started process forks the worker and exits; the worker reports on the pipe.
  std::string said = read_ready_report(rd.get(), monotonic_ms() + kStartMs);
  rd.reset();  // a process that writes on is not blocked by a full pipe
  const bool ok = said.rfind("OK", 0) == 0;
  end_started_process(pid, ok);
  if (ok) return true;
  *why = exe + " did not start" + (said.empty() ? std::string(" (no report)") : ": " + said);
  return false;
}

bool try_lock(int fd, double timeout_ms) {
  const double deadline = monotonic_ms() + timeout_ms;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (monotonic_ms() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A worker that could not start is remembered in the address's directory for
// $KJIT_WORKER_RETRY_S seconds (default 60), in "<name>.failed": "kjit-worker-failed-1",
// the time (Unix seconds) and why, one a line. The name covers the executable's path and
// file identity and the toolchain, so a fixed or other worker is tried at once. Every
// process then falls back (or fails, in worker mode) at once instead of paying the start's
// wait (up to kStartMs) again.
constexpr const char* kFailedMagic = "kjit-worker-failed-1";

double failure_memory_seconds() {
  return env_number("KJIT_WORKER_RETRY_S", 60);
}

// Why the worker of `name` failed to start, when that was recorded less than
// failure_memory_seconds() ago; "" otherwise. Read as any file in the cache directory is:
// a regular file of bounded size, never through a link.
std::string recent_start_failure(int dir_fd, const std::string& name) {
  const double memory = failure_memory_seconds();
  if (dir_fd < 0 || memory <= 0) return "";
  int f = -1;
  struct stat st;
  if (open_regular_at(dir_fd, name + ".failed", O_RDONLY, 0, false, &f, &st) != Opened::Ok) {
    return "";
  }
  Fd fd(f);
  char buf[1024];
  const ssize_t n = st.st_size < off_t(sizeof buf) ? ::pread(f, buf, sizeof buf, 0) : -1;
  if (n <= 0) return "";
  const std::string text(buf, size_t(n));
  const size_t l1 = text.find('\n'), l2 = l1 == std::string::npos ? l1 : text.find('\n', l1 + 1);
  if (l2 == std::string::npos || text.compare(0, l1, kFailedMagic) != 0) return "";
  char* end = nullptr;
  const long long when = std::strtoll(text.c_str() + l1 + 1, &end, 10);
  const long long now = unix_time();
  if (end != text.c_str() + l2 || when > now + 5 || double(now - when) >= memory) return "";
  const size_t l3 = text.find('\n', l2 + 1);
  return "it failed to start " + std::to_string(now - when) + " s ago (" +
         text.substr(l2 + 1, l3 == std::string::npos ? std::string::npos : l3 - l2 - 1) +
         "); not tried again for " + std::to_string(int(memory)) + " s (" + name + ".failed)";
}

// Records (`why` not empty) or forgets the start failure of `name` (temporary file, then
// rename; never through a link).
void record_start_failure(int dir_fd, const std::string& name, const std::string& why) {
  if (dir_fd < 0) return;
  if (why.empty()) {
    ::unlinkat(dir_fd, (name + ".failed").c_str(), 0);
    return;
  }
  if (failure_memory_seconds() <= 0) return;
  std::string reason = why.substr(0, 400);
  for (char& ch : reason) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  const std::string text =
      std::string(kFailedMagic) + "\n" + std::to_string(unix_time()) + "\n" + reason + "\n";
  const std::string temp = ".tmp-" + name + ".failed-" + std::to_string(::getpid());
  Fd fd(::openat(dir_fd, temp.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  if (fd.get() < 0) return;
  const bool ok = ::write(fd.get(), text.data(), text.size()) == ssize_t(text.size());
  fd.reset();
  if (!ok || ::renameat(dir_fd, temp.c_str(), dir_fd, (name + ".failed").c_str()) != 0) {
    ::unlinkat(dir_fd, temp.c_str(), 0);
  }
}

// A connected, greeted worker for `addr`, started when none answers.
Conn connect_or_start(const WorkerAddress& addr, const std::string& toolchain) {
  Conn c = connect_and_hello(addr, toolchain);
  if (c.state == Conn::State::Ok) return c;
  Fd dir(::open(addr.directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (c.state == Conn::State::Missing || c.state == Conn::State::Stale) {
    // None runs: one that failed to start a moment ago is not waited for again.
    const std::string failed = recent_start_failure(dir.get(), addr.name);
    if (!failed.empty()) {
      c.state = Conn::State::Broken;
      c.detail =
          "the compile worker " + addr.directory + "/" + addr.name + " cannot be used: " + failed;
      return c;
    }
  }
  Fd lock(dir.get() < 0 ? -1
                        : ::openat(dir.get(), (addr.name + ".lock").c_str(),
                                   O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (lock.get() < 0) {
    c.state = Conn::State::Broken;
    c.detail =
        "cannot open the worker's lock file in " + addr.directory + ": " + std::strerror(errno);
    return c;
  }
  if (!try_lock(lock.get(), kStartLockMs)) {
    c.state = Conn::State::Broken;
    c.detail = "another process held the worker's start lock for " +
               std::to_string(int(kStartLockMs / 1000)) + " s";
    return c;
  }
  // Another process may have started one meanwhile; a peer that was silent is not asked
  // twice while its socket file is the same.
  const bool same_silent = c.state == Conn::State::Silent && !c.socket_file.empty() &&
                           socket_file_identity(dir.get(), addr.name) == c.socket_file;
  if (!same_silent) c = connect_and_hello(addr, toolchain);
  if (c.state == Conn::State::Ok) return c;
  if (c.state != Conn::State::Missing) {
    // Stale (no one listens), mismatched, foreign or broken: replace it.
    log_info("replacing the compile worker socket " + addr.directory + "/" + addr.name +
             ".sock: " + c.detail);
    ::unlinkat(dir.get(), (addr.name + ".sock").c_str(), 0);
  }
  std::string why;
  if (const std::string failed = recent_start_failure(dir.get(), addr.name); !failed.empty()) {
    c.state = Conn::State::Broken;  // another process's start failed while this one waited
    c.detail =
        "the compile worker " + addr.directory + "/" + addr.name + " cannot be used: " + failed;
    return c;
  }
  if (!spawn_worker(addr, dir.get(), &why)) {
    record_start_failure(dir.get(), addr.name, why);
    c.state = Conn::State::Broken;
    c.detail = why;
    return c;
  }
  record_start_failure(dir.get(), addr.name, "");
  lock.reset();  // releases the flock
  c = connect_and_hello(addr, toolchain);
  if (c.state != Conn::State::Ok) c.detail = "the started worker does not answer: " + c.detail;
  return c;
}

// Inputs that crashed the compiler recently, so that the same input does not take down the
// next worker at once (the cache records the failure too, when it has a disk tier).
struct CrashMemory {
  std::mutex mu;
  std::map<std::string, std::pair<double, Outcome>> by_key;  // key -> (time, outcome)
};
CrashMemory& crash_memory() {
  static auto* m = new CrashMemory;
  return *m;
}
constexpr double kCrashMemoryMs = 60000;

bool cancel_requested(void* user) {
  auto* flag = static_cast<std::atomic<bool>*>(user);
  return flag && flag->load(std::memory_order_relaxed);
}

}  // namespace

CompileMode compile_mode_from_env() {
  const char* v = std::getenv("KJIT_COMPILE_MODE");
  if (!v || !*v || std::strcmp(v, "auto") == 0) return CompileMode::Auto;
  if (std::strcmp(v, "worker") == 0) return CompileMode::Worker;
  if (std::strcmp(v, "inprocess") == 0) return CompileMode::InProcess;
  static std::once_flag once;
  std::call_once(once, [v] {
    log_warn(std::string("ignoring KJIT_COMPILE_MODE='") + v +
             "' (expected auto, worker or inprocess); using auto");
  });
  return CompileMode::Auto;
}

const char* compile_mode_name(CompileMode m) {
  switch (m) {
    case CompileMode::Worker:
      return "worker";
    case CompileMode::InProcess:
      return "inprocess";
    case CompileMode::Auto:
      break;
  }
  return "auto";
}

WorkerLimits worker_limits_from_env() {
  WorkerLimits l;
  l.time_limit_ms = uint64_t(env_number("KJIT_COMPILE_TIMEOUT_S", 600) * 1000);
  l.memory_limit_bytes = uint64_t(env_number("KJIT_COMPILE_MEMORY_MB", 0) * 1024 * 1024);
  return l;
}

std::string worker_executable(std::string* why) {
  const char* env = std::getenv("KJIT_WORKER");
  if (env && *env) {
    if (::access(env, X_OK) == 0) return env;
    *why = std::string("KJIT_WORKER=") + env + " is not an executable file";
    return "";
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&worker_executable), &info) == 0 || !info.dli_fname) {
    *why = "cannot tell where the kjit library is (dladdr)";
    return "";
  }
  // For code linked into the program itself, dladdr names the program as it was started
  // (argv[0], perhaps without a directory): the kernel knows its real path.
  std::string object = info.dli_fname;
  if (object.find('/') == std::string::npos) {
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) object.assign(exe, size_t(n));
  }
  const std::string dir = dirname_of(resolve_path(object));
  std::vector<std::string> candidates;
#ifdef KJIT_WORKER_RELATIVE
  candidates.push_back(join_path(dir, KJIT_WORKER_RELATIVE));
#endif
  candidates.push_back(join_path(dir, "libexec/kjit/kjit-worker"));  // the build tree
  for (const std::string& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  *why = "no kjit-worker executable beside " + std::string(info.dli_fname) + " (looked for " +
         candidates.front() + "; set KJIT_WORKER)";
  return "";
}

WorkerAddress worker_address(Cache* cache, const std::string& toolchain, std::string* why) {
  WorkerAddress a;
  Sha256 h;
  h.field("kjit-worker");
  h.field(std::to_string(worker::kProtocolVersion));
  h.field(toolchain);
  // Another build of the same version (a rebuilt tree, a second install) has its own
  // worker: the executable's file identity is part of the name.
  std::string no_worker;
  const std::string exe = worker_executable(&no_worker);
  h.field(exe);
  h.field(exe.empty() ? std::string() : file_identity(exe));
  a.name = "worker-" + library_version() + "-" + to_hex(h.finish()).substr(0, 12);
  if (cache && cache->disk_usable() && !cache->disk()->read_only() &&
      ::access(cache->directory().c_str(), W_OK | X_OK) == 0) {
    a.directory = cache->directory();
    record_toolchain_facts(facts_of(cache));  // what a worker started for it reads
    return a;
  }
  // No writable cache directory: a private directory of this user under $TMPDIR.
  const std::string tmp = env_or("TMPDIR", "/tmp");
  const std::string dir = tmp + "/kjit-" + std::to_string(geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot create " + dir + ": " + std::strerror(errno);
    return a;
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    *why = dir + " is not a private directory of this user (it must be a directory with mode 0700)";
    return a;
  }
  a.directory = dir;
  return a;
}

unsigned worker_processes() {
  const double n = env_number("KJIT_WORKER_PROCESSES", 0);
  if (n >= 1) return unsigned(std::min(n, 64.0));
  return std::max(1u, std::min(8u, std::thread::hardware_concurrency() / 2));
}

WorkerSlot::~WorkerSlot() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

WorkerAddress take_worker(const WorkerAddress& addr, const CancelFlag& cancel, WorkerSlot* held) {
  const unsigned n = worker_processes();
  auto named = [&](unsigned i) {
    WorkerAddress a = addr;
    if (i > 0) a.name += "-" + std::to_string(i);
    return a;
  };
  if (n <= 1) return addr;
  // The first free one, in order: compiles one after another keep using one warm worker
  // (NVRTC's second compile in a process is faster), concurrent ones spill over.
  for (double sleep_ms = 1;; sleep_ms = std::min(sleep_ms * 2, 50.0)) {
    for (unsigned i = 0; i < n; ++i) {
      const WorkerAddress a = named(i);
      const std::string path = a.directory + "/" + a.name + ".busy";
      const int fd =
          ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (fd < 0) return a;  // cannot be held: used as the single worker was
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        held->fd_ = fd;
        return a;
      }
      ::close(fd);
    }
    if (cancel && cancel->load(std::memory_order_relaxed)) return addr;
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(sleep_ms * 1000)));
  }
}

WorkerAnswer compile_in_worker(const WorkerAddress& addr, const std::string& toolchain,
                               const worker::CompileRequest& request, const CancelFlag& cancel,
                               const std::function<void()>& before_send) {
  WorkerAnswer a;
  {
    CrashMemory& m = crash_memory();
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.by_key.find(request.key);
    if (it != m.by_key.end()) {
      if (monotonic_ms() - it->second.first < kCrashMemoryMs) {
        a.kind = WorkerAnswer::Kind::Failed;
        a.failure = it->second.second;
        a.crashed = true;
        return a;
      }
      m.by_key.erase(it);
    }
  }
  const std::string payload = worker::encode(request);
  if (payload.size() > worker::kMaxFrameBytes) {
    a.message = "the request is larger than the worker protocol's limit";
    return a;
  }
  auto failed = [&](kjit_status s, const std::string& m) {
    a.kind = WorkerAnswer::Kind::Failed;
    a.failure = Outcome{s, m, nullptr, KJIT_TIER_COMPILED};
    return a;
  };
  const std::string what =
      "compilation of '" + request.options.name + "' for " + request.norm.target;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Conn c = connect_or_start(addr, toolchain);
    if (c.state != Conn::State::Ok) {
      a.message = c.detail;
      return a;
    }
    if (attempt == 0 && before_send) before_send();
    const double deadline =
        request.time_limit_ms ? monotonic_ms() + double(request.time_limit_ms) + 60000 : -1;
    if (!worker::write_frame(c.fd.get(), FrameType::Compile, payload)) continue;
    FrameType type;
    std::string reply;
    const ReadResult rr = worker::read_frame(c.fd.get(), &type, &reply, deadline,
                                             cancel ? cancel_requested : nullptr, cancel.get());
    if (rr == ReadResult::Ok && type == FrameType::Result) {
      try {
        a.reply = worker::decode_reply(reply);
        a.kind = WorkerAnswer::Kind::Reply;
        return a;
      } catch (const std::exception& e) {
        return failed(
            KJIT_ERROR_NVRTC,
            what + " failed: the compile worker sent a malformed reply (" + e.what() + ")");
      }
    }
    if (rr == ReadResult::Ok && type == FrameType::Crash && reply.size() == 4) {
      const int sig = int(uint8_t(reply[0]) | uint8_t(reply[1]) << 8 | uint8_t(reply[2]) << 16 |
                          uint32_t(uint8_t(reply[3])) << 24);
      failed(KJIT_ERROR_NVRTC, what + " failed: the compiler crashed on this input (signal " +
                                   std::to_string(sig) + ", " + signal_name(sig) +
                                   "); the compile worker is restarted for the next compile");
      a.crashed = true;
      CrashMemory& m = crash_memory();
      std::lock_guard<std::mutex> lock(m.mu);
      if (m.by_key.size() >= 256) m.by_key.clear();
      m.by_key[request.key] = {monotonic_ms(), a.failure};
      return a;
    }
    if (rr == ReadResult::Ok && type == FrameType::Refused) {
      a.message = "the compile worker refused the request: " + reply;
      return a;
    }
    if (rr == ReadResult::Timeout) {
      if (cancel && cancel->load()) return failed(KJIT_ERROR_CANCELLED, what + " was cancelled");
      return failed(KJIT_ERROR_TIMEOUT,
                    what + " stopped: the compile worker gave no answer within " +
                        std::to_string(request.time_limit_ms / 1000 + 60) + " s");
    }
    if (rr == ReadResult::TooLarge || rr == ReadResult::Ok) {
      return failed(KJIT_ERROR_NVRTC, what + " failed: the compile worker sent a malformed reply");
    }
    // EOF or a broken connection: the worker died (killed, or another request crashed it).
    log_info("the compile worker went away during " + what +
             (attempt == 0 ? "; trying once more with a new worker" : ""));
  }
  return failed(KJIT_ERROR_NVRTC,
                what + " failed: the compile worker died during the compile twice");
}

std::optional<worker::WorkerStatus> query_worker(const WorkerAddress& addr,
                                                 const std::string& toolchain, std::string* why) {
  Conn c = connect_and_hello(addr, toolchain);
  if (c.state != Conn::State::Ok) {
    *why =
        c.state == Conn::State::Missing || c.state == Conn::State::Stale ? "not running" : c.detail;
    return std::nullopt;
  }
  if (!worker::write_frame(c.fd.get(), FrameType::Status, "")) {
    *why = "the worker closed the connection";
    return std::nullopt;
  }
  FrameType type;
  std::string reply;
  if (worker::read_frame(c.fd.get(), &type, &reply, monotonic_ms() + 10000) != ReadResult::Ok ||
      type != FrameType::StatusReply) {
    *why = "the worker did not answer the status request";
    return std::nullopt;
  }
  try {
    return worker::decode_status(reply);
  } catch (const std::exception& e) {
    *why = std::string("malformed status reply: ") + e.what();
    return std::nullopt;
  }
}

std::optional<worker::WorkerStatus> worker_status_for(Cache* cache, std::string* why) {
  const std::string toolchain = toolchain_id(facts_of(cache));
  const WorkerAddress addr = worker_address(cache, toolchain, why);
  if (addr.directory.empty()) return std::nullopt;
  return query_worker(addr, toolchain, why);
}

}  // namespace kjit
