// The client side of the compile worker (the server is main.cpp beside it): NVRTC out of
// the caller's process. Library code below compile/, which calls it: it includes nothing
// of compile/ (tools/check_layers.py).
//
// A worker is one long-lived process per user, kjit version, protocol version and
// toolchain, shared by every process that uses the same cache directory. It listens on a
// Unix socket in that directory (worker-<version>-<tag>.sock, where <tag> covers the
// protocol and the toolchain), or, when there is no writable cache directory (memory-only
// or read-only caches), in a private directory $TMPDIR/kjit-<uid> (mode 0700, owned by the
// user). A socket path longer than sun_path allows is reached as
// /proc/self/fd/<directory fd>/<name>.
//
// The first compile that misses the cache starts the worker (never a hit). Starting is
// serialised by flock() on worker-<...>.lock: the starter connects once more under the
// lock, removes a stale or mismatched socket, runs the worker executable and waits until
// it listens. The executable is $KJIT_WORKER, else libexec/kjit/kjit-worker found
// relative to the library file (dladdr). Both sides check the peer's user (SO_PEERCRED)
// and the hello (library version, protocol version, toolchain id); a worker that differs
// is never used.
//
// Every wait on another process is bounded, so that a worker that cannot be used costs a
// caller seconds: its hello (2 s; a silent peer is asked once, then replaced), the started
// worker's report on the ready pipe (10 s), the started process's exit after it (2 s; past
// these it is killed with its process group), another process's start (20 s).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "util/cancel.h"
#include "worker/protocol.h"

namespace kjit {

class Cache;

enum class CompileMode { Auto = 0, Worker = 1, InProcess = 2 };

// $KJIT_COMPILE_MODE (auto | worker | inprocess); Auto when unset. An unknown value is
// reported once and read as Auto.
CompileMode compile_mode_from_env();
const char* compile_mode_name(CompileMode m);

struct WorkerLimits {
  uint64_t time_limit_ms = 0;       // per compile; $KJIT_COMPILE_TIMEOUT_S, default 600 s
  uint64_t memory_limit_bytes = 0;  // $KJIT_COMPILE_MEMORY_MB; 0 = the worker's default
};
WorkerLimits worker_limits_from_env();

// Result of asking the worker to compile.
struct WorkerAnswer {
  enum class Kind {
    Reply,       // the worker compiled: reply holds the outcome and the audit record
    Failed,      // a clear failure status for this compile (crash, time limit, cancel...)
    Unavailable  // the worker cannot be used (reason in message): compile elsewhere
  } kind = Kind::Unavailable;
  worker::CompileReply reply;  // Reply
  Outcome failure;             // Failed
  bool crashed = false;        // Failed because the compiler crashed on this input
  std::string message;         // Unavailable
};

// Socket directory and name for a cache (nullptr = no cache). Throws nothing; an empty
// directory means no private directory could be made (message in *why).
struct WorkerAddress {
  std::string directory;
  std::string name;  // "worker-<version>-<tag>" (".sock", ".lock", ".crashes", ".log")
};
WorkerAddress worker_address(Cache* cache, const std::string& toolchain, std::string* why);

// NVRTC compiles one program at a time in a process, so one address has several workers:
// the first under the address's own name, the others under "<name>-<i>" (i = 1 .. n-1),
// n = $KJIT_WORKER_PROCESSES, by default half the cores (at least 1, at most 8). A compile
// holds the first free one for its duration (flock() on "<name>[-i].busy", released when
// the holder ends or dies), so independent compiles from every thread and process run side
// by side, compiles one after another stay in one warm worker, and each worker starts on
// first need and leaves when idle.
unsigned worker_processes();

// Holds one worker of an address for one compile.
class WorkerSlot {
 public:
  WorkerSlot() = default;
  ~WorkerSlot();
  WorkerSlot(const WorkerSlot&) = delete;
  WorkerSlot& operator=(const WorkerSlot&) = delete;

 private:
  friend WorkerAddress take_worker(const WorkerAddress&, const CancelFlag&, WorkerSlot*);
  int fd_ = -1;
};

// The address of a free worker of `addr`, held in *held; when all are busy, waits for
// one (polling `cancel`, which ends the wait with the first worker's address unheld).
// A worker whose busy file cannot be opened is used unheld.
WorkerAddress take_worker(const WorkerAddress& addr, const CancelFlag& cancel, WorkerSlot* held);

// Runs one compile in the worker for `addr`, starting it when none answers. A worker that
// dies mid-compile without a crash report (killed, or another request crashed it) is
// replaced and the compile tried once more. `before_send` (may be empty) is called once,
// when a worker answers and before the request is sent: what must precede NVRTC's start
// (compile_scanned's start time) waits there, while the worker starts, not before.
WorkerAnswer compile_in_worker(const WorkerAddress& addr, const std::string& toolchain,
                               const worker::CompileRequest& request, const CancelFlag& cancel,
                               const std::function<void()>& before_send = {});

// The running worker's state, without starting one. nullopt when none answers (*why says).
std::optional<worker::WorkerStatus> query_worker(const WorkerAddress& addr,
                                                 const std::string& toolchain, std::string* why);

// The state of the worker that serves `cache` (nullptr = memory-only caches), without
// starting one; nullopt when none answers (*why says why). Throws kjit::Error when the
// toolchain cannot be identified.
std::optional<worker::WorkerStatus> worker_status_for(Cache* cache, std::string* why);

// The worker executable ($KJIT_WORKER, else beside the library); "" when not found.
std::string worker_executable(std::string* why);

}  // namespace kjit
