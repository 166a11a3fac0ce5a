// kjit-worker: runs NVRTC for kjit clients of one user, out of their processes.
//
// Started by a client (worker/client.cpp) as
//   kjit-worker --dir DIR --name NAME --idle SECONDS --ready-fd FD
// it listens on DIR/NAME.sock (through /proc/self/fd/N/NAME.sock when that path is too
// long for sun_path), forks into the background, says "OK" on FD once it listens, and
// serves one request per connection: compiles (at most one per CPU at a time; more wait
// their turn) and status requests. Every peer must be this process's own user
// (SO_PEERCRED) and say the same library version, protocol version and toolchain.
//
// Faults: a signal that kills the worker while a thread compiles (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT) is reported to that thread's client in a Crash frame, written with
// write() only, counted in NAME.crashes, then the signal is raised again. A compile that
// passes its time or memory limit is cancelled through NVRTC's flow callback; one that
// does not stop within a few seconds after that is answered by the watchdog and the
// worker exits (its other clients retry with a new worker). A client that closes its
// connection cancels its compile. The worker exits after SECONDS without a request, or
// when its socket file is removed or replaced.
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "key/file_audit.h"
#include "key/toolchain.h"
#include "kjit/common.h"
#include "nvrtc/nvrtc_program.h"
#include "nvrtc/pch.h"
#include "store/fact_files.h"
#include "store/facts.h"
#include "store/index_db.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/socket.h"
#include "worker/protocol.h"

namespace {

using kjit::AuditRecord;
using kjit::CancelFlag;
using kjit::monotonic_ms;
using kjit::Outcome;
namespace wk = kjit::worker;

// ---- state shared with the signal handler (async-signal-safe use only) -------------------
int g_dir_fd = -1;
char g_crashes_name[512];
thread_local int t_client_fd = -1;
std::atomic<int> g_crashing{0};

const int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void crash_handler(int sig, siginfo_t*, void*) {
  const int fd = t_client_fd;
  if (fd >= 0) {
    unsigned char frame[20];
    const size_t n = wk::crash_frame(sig, frame);
    ssize_t w = ::write(fd, frame, n);
    (void)w;
  }
  if (g_crashing.fetch_add(1) == 0 && g_dir_fd >= 0) {
    // Never through a link, never blocked by a FIFO, only into a regular file.
    const int c =
        ::openat(g_dir_fd, g_crashes_name,
                 O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    struct stat st;
    if (c >= 0 && ::fstat(c, &st) == 0 && S_ISREG(st.st_mode)) {
      ssize_t w = ::write(c, "x", 1);
      (void)w;
    }
    if (c >= 0) ::close(c);
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

void install_crash_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = crash_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCrashSignals) ::sigaction(sig, &sa, nullptr);
}

// An alternate signal stack for the calling thread, so that a stack overflow inside NVRTC
// can still be reported.
class AltStack {
 public:
  AltStack() : mem_(new char[kSize]) {
    stack_t ss{};
    ss.ss_sp = mem_.get();
    ss.ss_size = kSize;
    ::sigaltstack(&ss, nullptr);
  }
  ~AltStack() {
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    ::sigaltstack(&ss, nullptr);
  }

 private:
  static constexpr size_t kSize = 64 * 1024;
  std::unique_ptr<char[]> mem_;
};

// ---- requests, limits, watchdog ------------------------------------------------------------
enum Stop : int { kRunning = 0, kTimeLimit = 1, kMemoryLimit = 2, kClientGone = 3 };

struct Request {
  int fd = -1;
  CancelFlag cancel = std::make_shared<std::atomic<bool>>(false);
  double deadline_ms = 0;  // 0 = none
  uint64_t time_limit_ms = 0;
  uint64_t memory_limit = 0;
  std::string what;  // "compilation of 'x.cu' for sm_90"
  std::atomic<int> stop{kRunning};
  double stopped_at = 0;
  std::mutex write_mu;
  bool answered = false;
};

struct Server {
  std::string dir, name, toolchain, version;
  uint64_t idle_s = 300;
  int listen_fd = -1;
  ino_t inode = 0;
  dev_t device = 0;
  double started_ms = 0;
  uint64_t crashes_before = 0;
  uint64_t default_memory_limit = 0;
  unsigned slots_total = 1;

  std::mutex mu;  // guards active, slots_used
  std::condition_variable slot_cv;
  unsigned slots_used = 0;
  std::vector<std::shared_ptr<Request>> active;

  std::atomic<int> connections{0};
  std::atomic<int64_t> last_activity_ms{0};
  std::atomic<uint64_t> compiles{0}, failures{0}, timeouts{0}, pch_created{0}, pch_used{0},
      in_flight{0};
};

Server* g_server = nullptr;

uint64_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * uint64_t(::sysconf(_SC_PAGESIZE)) : 0;
}

bool answer(Request& r, const Outcome& o) {
  std::lock_guard<std::mutex> lock(r.write_mu);
  if (r.answered) return false;
  r.answered = true;
  wk::CompileReply rep;
  rep.outcome = o;
  return wk::write_frame(r.fd, wk::FrameType::Result, wk::encode(rep));
}

std::string limit_text(uint64_t ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g s", double(ms) / 1000.0);
  return buf;
}

Outcome stopped_outcome(const Request& r, int stop) {
  if (stop == kTimeLimit) {
    return Outcome{KJIT_ERROR_TIMEOUT,
                   r.what + " was stopped: it ran longer than its time limit of " +
                       limit_text(r.time_limit_ms) + " (KJIT_COMPILE_TIMEOUT_S)",
                   nullptr, KJIT_TIER_COMPILED};
  }
  return Outcome{KJIT_ERROR_OUT_OF_MEMORY,
                 r.what + " was stopped: the compiler's memory use passed the limit of " +
                     std::to_string(r.memory_limit >> 20) + " MiB (KJIT_COMPILE_MEMORY_MB)",
                 nullptr, KJIT_TIER_COMPILED};
}

// Cancels compiles whose client left or that passed a limit; ends the worker when a
// cancelled compile does not stop (NVRTC checks its flow callback only between phases).
void watchdog(Server& s) {
  constexpr double kGraceMs = 2000;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double now = monotonic_ms();
    const uint64_t rss = rss_bytes();
    std::vector<std::shared_ptr<Request>> active;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      active = s.active;
    }
    bool stuck = false;
    for (auto& r : active) {
      int stop = r->stop.load();
      if (stop == kRunning) {
        pollfd p{r->fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
          stop = kClientGone;
        } else if (r->deadline_ms > 0 && now > r->deadline_ms) {
          stop = kTimeLimit;
        } else if (r->memory_limit && rss > r->memory_limit) {
          stop = kMemoryLimit;
        }
        if (stop != kRunning) {
          r->stopped_at = now;
          r->stop.store(stop);
          r->cancel->store(true);
        }
      } else if ((stop == kTimeLimit || stop == kMemoryLimit) && now - r->stopped_at > kGraceMs) {
        // NVRTC did not stop: answer for it, and end this worker.
        if (answer(*r, stopped_outcome(*r, stop))) {
          kjit::log_warn(r->what + " did not stop when cancelled; the compile worker exits");
        }
        stuck = true;
      }
    }
    if (stuck) ::_exit(3);
  }
}

class Slot {
 public:
  Slot(Server& s, const Request& r) : s_(s) {
    std::unique_lock<std::mutex> lock(s_.mu);
    while (s_.slots_used >= s_.slots_total) {
      if (r.cancel->load()) return;
      s_.slot_cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    s_.slots_used++;
    held_ = true;
  }
  ~Slot() {
    if (!held_) return;
    {
      std::lock_guard<std::mutex> lock(s_.mu);
      s_.slots_used--;
    }
    s_.slot_cv.notify_one();
  }
  bool held() const { return held_; }

 private:
  Server& s_;
  bool held_ = false;
};

// Registers a compile with the watchdog for as long as it lives.
class Registered {
 public:
  Registered(Server& s, std::shared_ptr<Request> r) : s_(s), r_(std::move(r)) {
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.active.push_back(r_);
    s_.in_flight++;
  }
  ~Registered() {
    std::lock_guard<std::mutex> lock(s_.mu);
    s_.active.erase(std::remove(s_.active.begin(), s_.active.end(), r_), s_.active.end());
    s_.in_flight--;
  }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;

 private:
  Server& s_;
  std::shared_ptr<Request> r_;
};

std::shared_ptr<Request> request_for(const Server& s, int fd, const wk::CompileRequest& q) {
  auto r = std::make_shared<Request>();
  r->fd = fd;
  r->time_limit_ms = q.time_limit_ms;
  r->deadline_ms = q.time_limit_ms ? monotonic_ms() + double(q.time_limit_ms) : 0;
  r->memory_limit = q.memory_limit_bytes ? q.memory_limit_bytes : s.default_memory_limit;
  r->what = "compilation of '" + q.options.name + "' for " + q.norm.target;
  return r;
}

// The compile itself, with the options as the client normalised them; failures become
// outcomes. A crash inside is reported to `fd` by the signal handler.
Outcome run_compile(const Server& s, Request& r, const wk::CompileRequest& q, AuditRecord* audit) {
  t_client_fd = r.fd;
  Outcome o;
  try {
    o = kjit::compile_audited(q.source, q.options, q.norm, q.key, s.toolchain, r.cancel, q.use_pch,
                              audit);
  } catch (const kjit::Error& e) {
    o = Outcome{e.status(), e.message(), nullptr, KJIT_TIER_COMPILED};
  } catch (const std::bad_alloc&) {
    o = Outcome{KJIT_ERROR_OUT_OF_MEMORY, "out of host memory in the compile worker", nullptr,
                KJIT_TIER_COMPILED};
  } catch (const std::exception& e) {
    o = Outcome{KJIT_ERROR_INTERNAL,
                std::string("internal error in the compile worker: ") + e.what(), nullptr,
                KJIT_TIER_COMPILED};
  }
  t_client_fd = -1;
  return o;
}

// Counts a finished compile in the worker's status.
void count(Server& s, const Outcome& o) {
  s.compiles++;
  if (o.status != KJIT_OK) s.failures++;
  if (o.status == KJIT_ERROR_TIMEOUT) s.timeouts++;
  if (o.pch == kjit::PchOutcome::Created) s.pch_created++;
  if (o.pch == kjit::PchOutcome::Used) s.pch_used++;
}

// A heavy compile leaves gigabytes free in the allocator's arenas, counted in this worker's
// resident memory (and so against KJIT_COMPILE_MEMORY_MB) until returned: the last compile
// to finish gives them back to the system, after its reply is written. A worker that holds
// less than kKeepBytes (and less than half the compile's memory limit) keeps it: the next
// compile reuses those pages instead of faulting them in again (NVRTC touches 100-200 MB
// for an ordinary kernel, a few milliseconds of page faults).
constexpr uint64_t kKeepBytes = uint64_t(256) << 20;
void give_back_memory(const Server& s, const Request& r) {
  if (s.in_flight.load() != 1) return;
  const uint64_t rss = rss_bytes();
  if (rss > kKeepBytes || (r.memory_limit && rss > r.memory_limit / 2)) ::malloc_trim(0);
}

void handle_compile(Server& s, int fd, const wk::CompileRequest& q) {
  const std::shared_ptr<Request> r = request_for(s, fd, q);
  const Registered registered(s, r);
  Slot slot(s, *r);
  if (!slot.held()) return;           // the client left while waiting
  if (::chdir(q.cwd.c_str()) != 0) {  // this thread's own working directory (CLONE_FS)
    std::lock_guard<std::mutex> lock(r->write_mu);
    r->answered = true;
    wk::write_frame(fd, wk::FrameType::Refused,
                    "the compile worker cannot enter the working directory " + q.cwd + ": " +
                        std::strerror(errno));
    return;
  }
  wk::CompileReply rep;
  rep.outcome = run_compile(s, *r, q, &rep.audit);
  Outcome& o = rep.outcome;
  const int stop = r->stop.load();
  if ((stop == kTimeLimit || stop == kMemoryLimit) && o.status == KJIT_ERROR_CANCELLED) {
    o = stopped_outcome(*r, stop);
  }
  count(s, o);
  if (stop != kClientGone) {
    std::lock_guard<std::mutex> lock(r->write_mu);
    if (!r->answered) {
      r->answered = true;
      wk::write_frame(fd, wk::FrameType::Result, wk::encode(rep));
    }
  }
  give_back_memory(s, *r);
}

wk::Hello my_hello(const Server& s) {
  wk::Hello h;
  h.library_version = s.version;
  h.toolchain = s.toolchain;
  h.pid = ::getpid();
  return h;
}

wk::WorkerStatus status_of(const Server& s) {
  wk::WorkerStatus st;
  st.pid = ::getpid();
  const double now = monotonic_ms();
  st.uptime_s = (now - s.started_ms) / 1000.0;
  st.idle_s = s.in_flight.load() ? 0 : (now - double(s.last_activity_ms.load())) / 1000.0;
  st.compiles = s.compiles;
  st.failures = s.failures;
  st.crashes = s.crashes_before;
  st.in_flight = s.in_flight;
  st.pch_created = s.pch_created;
  st.pch_used = s.pch_used;
  st.pch_in_use = s.pch_created.load() > 0;
  st.idle_limit_s = s.idle_s;
  st.rss_bytes = rss_bytes();
  st.timeouts = s.timeouts;
  st.library_version = s.version;
  st.toolchain = s.toolchain;
  return st;
}

void serve(Server& s, int fd) {
  struct Done {
    Server& s;
    int fd;
    ~Done() {
      ::close(fd);
      s.last_activity_ms.store(int64_t(monotonic_ms()));
      s.connections--;
    }
  } done{s, fd};
  AltStack alt;
  if (::unshare(CLONE_FS) != 0) {  // a working directory of this thread's own
    wk::write_frame(
        fd, wk::FrameType::Refused,
        std::string("the compile worker cannot give a thread its own working directory: ") +
            std::strerror(errno));
    return;
  }
  try {
    if (!wk::write_frame(fd, wk::FrameType::Hello, wk::encode(my_hello(s)))) return;
    wk::FrameType type;
    std::string payload;
    if (wk::read_frame(fd, &type, &payload, monotonic_ms() + 10000) != wk::ReadResult::Ok) return;
    if (type != wk::FrameType::Hello) return;
    const wk::Hello peer = wk::decode_hello(payload);
    if (peer.library_version != s.version || peer.protocol != wk::kProtocolVersion ||
        peer.toolchain != s.toolchain) {
      wk::write_frame(fd, wk::FrameType::Refused,
                      "this worker is kjit " + s.version + " with " + s.toolchain);
      return;
    }
    if (wk::read_frame(fd, &type, &payload, monotonic_ms() + 30000) != wk::ReadResult::Ok) return;
    if (type == wk::FrameType::Status) {
      wk::write_frame(fd, wk::FrameType::StatusReply, wk::encode(status_of(s)));
      return;
    }
    if (type != wk::FrameType::Compile) return;
    handle_compile(s, fd, wk::decode_request(payload));
  } catch (const std::exception& e) {
    kjit::log_warn(std::string("compile worker: dropped a connection: ") + e.what());
  }
}

[[noreturn]] void fail_start(int ready_fd, const std::string& why) {
  const std::string line = "ERR " + why + "\n";
  if (ready_fd >= 0) {
    ssize_t w = ::write(ready_fd, line.data(), line.size());
    (void)w;
  }
  std::fputs(("kjit-worker: " + why + "\n").c_str(), stderr);
  ::_exit(1);
}

// Into the background, in a session of its own. Called before NVRTC is loaded or used: a
// process forked after NVRTC's first compile runs every later heavy compile a third slower
// or more (measured on a 16-core host: a CUTLASS kernel 38-42 s after such a fork against
// 23-28 s without, same CUBIN). The starting client waits for the first process only; the
// worker reports on `ready_fd` once it listens, or why it could not start.
void go_to_background(int ready_fd) {
  const pid_t child = ::fork();
  if (child < 0) fail_start(ready_fd, std::string("fork: ") + std::strerror(errno));
  if (child > 0) ::_exit(0);
  ::setsid();
}

void close_other_fds(int keep) {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  std::vector<int> fds;
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != keep && fd != ::dirfd(d)) fds.push_back(fd);
  }
  ::closedir(d);
  for (int fd : fds) ::close(fd);
}

bool same_socket(const Server& s) {
  struct stat st;
  if (::fstatat(g_dir_fd, (s.name + ".sock").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return st.st_ino == s.inode && st.st_dev == s.device;
}

int usage() {
  std::fputs(
      "usage: kjit-worker --dir DIR --name NAME [--idle SECONDS] [--ready-fd FD]\n"
      "Started by the kjit library on demand; not meant to be run by hand.\n",
      stderr);
  return 2;
}

// While the worker lives it keeps the cache's index open through the store, without a
// transaction: a new process is then not the database's first connection, so SQLite maps
// the existing shared-memory index instead of truncating and rebuilding it, and a closing
// process is not the last one, so it does not checkpoint (with its fsyncs) on the way out.
// The log stays bounded by the checkpoint every kWalCheckpointBytes of log of a committing
// writer, and the worker checkpoints it when it leaves (its connection is then the last to
// close). Nothing is read or written through it; it is opened as the cache's own handles
// open it (store/index_db.h), with the journal mode they choose for the directory.
class DatabaseKeeper {
 public:
  explicit DatabaseKeeper(std::string dir)
      : dir_(std::move(dir)), path_(kjit::join_path(dir_, kjit::IndexDb::kFileName)) {}
  ~DatabaseKeeper() { release(); }

  // Opens the database once it exists (a client creates it when storing a result), and
  // again when the file at the path is another one (moved aside, cleared). A file that
  // cannot be opened is not tried again until it is replaced.
  void hold() {
    if (store_ && !store_->replaced()) return;
    release();
    struct stat st;
    // Only a regular file is opened (SQLite on a FIFO or a device would not come back).
    if (::stat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    const std::string identity = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    if (identity == refused_) return;
    try {
      store_ = std::make_unique<kjit::IndexDb>(dir_, /*read_only=*/false,
                                               kjit::network_fs_type(dir_).empty());
    } catch (const std::exception& e) {
      refused_ = identity;
      kjit::log_debug(std::string("compile worker: not holding the cache index open: ") + e.what());
    }
  }

  // Closes it; as the last connection it checkpoints and empties the log.
  void release() { store_.reset(); }

 private:
  std::string dir_, path_;
  std::unique_ptr<kjit::IndexDb> store_;
  std::string refused_;  // device:inode of a file that could not be opened
};

struct Startup {
  int ready_fd = -1;
  int exit_code = -1;  // >= 0: exit with it (usage, --version)
};

Startup parse_arguments(int argc, char** argv, Server& s) {
  Startup r;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--version") {
      std::printf("kjit-worker %d.%d.%d (protocol %u)\n", KJIT_VERSION_MAJOR, KJIT_VERSION_MINOR,
                  KJIT_VERSION_PATCH, wk::kProtocolVersion);
      r.exit_code = 0;
      return r;
    }
    if (i + 1 >= argc) {
      r.exit_code = usage();
      return r;
    }
    const std::string v = argv[++i];
    if (a == "--dir") {
      s.dir = v;
    } else if (a == "--name") {
      s.name = v;
    } else if (a == "--idle") {
      s.idle_s = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--ready-fd") {
      r.ready_fd = std::atoi(v.c_str());
    } else {
      r.exit_code = usage();
      return r;
    }
  }
  if (s.dir.empty() || s.name.empty() || s.name.find('/') != std::string::npos ||
      s.name.size() > 200) {
    r.exit_code = usage();
  }
  return r;
}

// The process's own settings: no descriptors but the ready pipe, no signals for writes to
// closed sockets or past file size limits, private files.
void settle_process(int ready_fd) {
  close_other_fds(ready_fd);
  ::signal(SIGPIPE, SIG_IGN);
  // The worker serves many processes: it does not keep the file size limit of the one that
  // started it, and a write past a limit fails with EFBIG instead of killing it.
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit fsize{};
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != fsize.rlim_max) {
    fsize.rlim_cur = fsize.rlim_max;
    ::setrlimit(RLIMIT_FSIZE, &fsize);
  }
  ::umask(077);
}

void set_defaults(Server& s) {
  s.version = std::to_string(KJIT_VERSION_MAJOR) + "." + std::to_string(KJIT_VERSION_MINOR) + "." +
              std::to_string(KJIT_VERSION_PATCH);
  s.started_ms = monotonic_ms();
  s.last_activity_ms.store(int64_t(s.started_ms));
  s.slots_total = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t phys = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
  s.default_memory_limit = phys / 4 * 3;
}

// Into the background, then NVRTC identified and the file audit installed (both after the
// fork, see go_to_background), and the crashes of earlier workers counted.
void start_compiler(Server& s, int ready_fd) {
  g_dir_fd = ::open(s.dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (g_dir_fd < 0) fail_start(ready_fd, "cannot open " + s.dir + ": " + std::strerror(errno));
  go_to_background(ready_fd);  // before NVRTC is loaded
  std::snprintf(g_crashes_name, sizeof g_crashes_name, "%s.crashes", s.name.c_str());
  try {
    // NVRTC's identity as recorded in the cache directory for the library file this worker
    // loads (named by the file's identity, toolchain.h), as every process of the cache reads
    // it: the client that starts a worker has recorded it, so the worker need not probe
    // NVRTC with a compile of its own (tens of milliseconds before the first compile could
    // start). Without a record for this file NVRTC is probed. Read only: the worker writes
    // no facts.
    const kjit::FactFiles files(s.dir, /*read_only=*/true);
    kjit::Facts facts([&files] { return &files; }, [] { return nullptr; },
                      [](const std::exception&, const char*) {});
    s.toolchain = kjit::toolchain_id(&facts);
  } catch (const std::exception& e) {
    fail_start(ready_fd, std::string("NVRTC is not usable: ") + e.what());
  }
  kjit::FileAudit::available();  // installs the audit wrappers before any compile
  struct stat st;
  if (::fstatat(g_dir_fd, g_crashes_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
    s.crashes_before = uint64_t(st.st_size);
  }
}

// Binds NAME.sock, taking the place of a socket file no live worker listens on.
void bind_socket(Server& s, int ready_fd, const sockaddr_un& sa, size_t len) {
  const auto* addr = reinterpret_cast<const sockaddr*>(&sa);
  if (::bind(s.listen_fd, addr, socklen_t(len)) == 0) return;
  if (errno != EADDRINUSE) fail_start(ready_fd, std::string("bind: ") + std::strerror(errno));
  // A socket file is there: in use by a live worker, or left by a dead one.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0 && ::connect(probe, addr, socklen_t(len)) == 0) {
    fail_start(ready_fd, "another worker listens on " + s.dir + "/" + s.name + ".sock");
  }
  if (probe >= 0) ::close(probe);
  ::unlinkat(g_dir_fd, (s.name + ".sock").c_str(), 0);
  if (::bind(s.listen_fd, addr, socklen_t(len)) != 0) {
    fail_start(ready_fd, std::string("bind: ") + std::strerror(errno));
  }
}

// Listens on DIR/NAME.sock and remembers the socket file's identity (same_socket()).
void listen_on_socket(Server& s, int ready_fd) {
  s.listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.listen_fd < 0) fail_start(ready_fd, std::string("socket: ") + std::strerror(errno));
  sockaddr_un sa;
  const size_t len = kjit::socket_address(s.dir, g_dir_fd, s.name + ".sock", &sa);
  if (!len) fail_start(ready_fd, "the socket path is too long");
  bind_socket(s, ready_fd, sa, len);
  if (::listen(s.listen_fd, 128) != 0)
    fail_start(ready_fd, std::string("listen: ") + std::strerror(errno));
  struct stat st;
  if (::fstatat(g_dir_fd, (s.name + ".sock").c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    fail_start(ready_fd, std::string("stat of the socket: ") + std::strerror(errno));
  }
  s.inode = st.st_ino;
  s.device = st.st_dev;
}

void report_ready(int ready_fd) {
  if (ready_fd < 0) return;
  const std::string ok = "OK " + std::to_string(::getpid()) + "\n";
  ssize_t w = ::write(ready_fd, ok.data(), ok.size());
  (void)w;
  ::close(ready_fd);
}

// One connection from the listening socket: served on a thread of its own, or refused
// (another user, too many clients).
void accept_one(Server& s) {
  const int fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  long peer = -1;
  if (!kjit::peer_is_user(fd, ::geteuid(), &peer)) {
    wk::write_frame(fd, wk::FrameType::Refused,
                    "this compile worker serves user " + std::to_string(::geteuid()) +
                        " only (the peer is user " + std::to_string(peer) + ")");
    ::close(fd);
    return;
  }
  if (s.connections.load() >= 512) {
    wk::write_frame(fd, wk::FrameType::Refused, "the compile worker is busy (512 clients)");
    ::close(fd);
    return;
  }
  s.connections++;
  try {
    std::thread(serve, std::ref(s), fd).detach();
  } catch (const std::exception&) {
    s.connections--;
    ::close(fd);
  }
}

// True when the worker should exit now: idle with its socket file removed or replaced (no
// client can reach it), or idle past its limit while no client is starting a worker (the
// starter holds `lock_fd`); the socket file is then removed.
bool time_to_leave(Server& s, int lock_fd) {
  if (s.connections.load() != 0) return false;
  if (!same_socket(s)) return true;
  const double quiet_ms = monotonic_ms() - double(s.last_activity_ms.load());
  if (quiet_ms <= double(s.idle_s) * 1000.0) return false;
  if (lock_fd >= 0 && ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) return false;
  ::close(s.listen_fd);
  if (same_socket(s)) ::unlinkat(g_dir_fd, (s.name + ".sock").c_str(), 0);
  return true;
}

[[noreturn]] void serve_until_idle(Server& s) {
  const int lock_fd = ::openat(g_dir_fd, (s.name + ".lock").c_str(),
                               O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  DatabaseKeeper keeper(s.dir);
  for (;;) {
    keeper.hold();
    pollfd p{s.listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0 && (p.revents & POLLIN)) accept_one(s);
    if (time_to_leave(s, lock_fd)) {
      keeper.release();
      ::_exit(0);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Server s;
  const Startup start = parse_arguments(argc, argv, s);
  if (start.exit_code >= 0) return start.exit_code;
  settle_process(start.ready_fd);
  set_defaults(s);
  start_compiler(s, start.ready_fd);
  listen_on_socket(s, start.ready_fd);
  report_ready(start.ready_fd);
  g_server = &s;
  install_crash_handlers();
  std::thread(watchdog, std::ref(s)).detach();
  serve_until_idle(s);
}
