// The compile worker's wire protocol: length-prefixed binary frames over a Unix socket.
//
// A frame is a 4-byte type, a 4-byte reserved word (0) and an 8-byte payload length, all
// little-endian, followed by the payload. Neither side trusts a length it reads: a frame
// longer than kMaxFrameBytes, a field longer than what is left of its frame, a count that
// cannot fit, or trailing bytes are all protocol errors, and the connection is dropped.
//
// One connection carries one exchange: the worker speaks first (Hello), the client answers
// (Hello), then the client sends one Compile or Status request and reads one reply
// (Result, Crash or StatusReply). A client that closes its end while the worker compiles
// cancels that compile.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "key/file_audit.h"
#include "key/request.h"
#include "store/outcome.h"
#include "util/wire.h"

namespace kjit::worker {

// Bumped whenever a frame's layout or meaning changes.
constexpr uint32_t kProtocolVersion = 4;         // 2: PCH inputs and doubts in the audit;
                                                 // 3: relative opens; 4: whole options
constexpr uint64_t kMaxFrameBytes = 1ull << 30;  // 1 GiB

enum class FrameType : uint32_t {
  Hello = 1,        // both directions: library version, protocol, toolchain, pid
  Compile = 2,      // client -> worker: one compile request
  Result = 3,       // worker -> client: the outcome and the files NVRTC opened
  Crash = 4,        // worker -> client: the compiler died on this request (signal number)
  Status = 5,       // client -> worker: empty
  StatusReply = 6,  // worker -> client: WorkerStatus
  Refused = 7,      // worker -> client: reason text (mismatched hello, too many clients)
};

struct Hello {
  std::string library_version;
  uint32_t protocol = kProtocolVersion;
  std::string toolchain;
  int64_t pid = 0;
};

// The fields of a compile request, in wire order: X(type, name). The struct, its
// encoding and its decoding are generated from this one list; the options travel whole,
// each through its own field list (key/request.h), so the worker compiles with exactly what
// the client normalised.
#define KJIT_COMPILE_REQUEST_FIELDS(X)                                                  \
  X(std::string, cwd) /* the client's working directory: relative paths resolve here */ \
  X(std::string, key)                                                                   \
  X(std::string, source)                                                                \
  X(CompileOptions, options) /* as compiled (built-in headers added among `headers`) */ \
  X(NormalisedOptions, norm) /* as the client normalised them */                        \
  X(bool, use_pch)                                                                      \
  X(uint64_t, time_limit_ms)      /* 0 = none */                                        \
  X(uint64_t, memory_limit_bytes) /* 0 = the worker's default */

struct CompileRequest {
#define KJIT_REQUEST_FIELD(type, name) type name{};
  KJIT_COMPILE_REQUEST_FIELDS(KJIT_REQUEST_FIELD)
#undef KJIT_REQUEST_FIELD
#define KJIT_REQUEST_EQUAL(type, name) &&name == o.name
  bool operator==(const CompileRequest& o) const {
    return true KJIT_COMPILE_REQUEST_FIELDS(KJIT_REQUEST_EQUAL);
  }
#undef KJIT_REQUEST_EQUAL
};

struct CompileReply {
  Outcome outcome;    // entry (if any) without its key: the client sets it
  AuditRecord audit;  // OpenedFile::nvrtc_private marks the worker's own files
};

struct WorkerStatus {
  int64_t pid = 0;
  double uptime_s = 0;
  double idle_s = 0;      // since the last request finished (0 while busy)
  uint64_t compiles = 0;  // requests compiled by this worker
  uint64_t failures = 0;  // of which did not succeed
  uint64_t crashes = 0;   // earlier workers for this socket that crashed
  uint64_t in_flight = 0;
  uint64_t pch_created = 0, pch_used = 0;
  bool pch_in_use = false;  // a PCH directory exists (PCHs are warm in this worker)
  uint64_t idle_limit_s = 0;
  uint64_t rss_bytes = 0;
  uint64_t timeouts = 0;
  std::string library_version, toolchain;
};

// Bounds-checked field encoding (util/wire.h).
using Writer = WireWriter;
using Reader = WireReader;
using ProtocolError = WireError;

std::string encode(const Hello& h);
Hello decode_hello(const std::string& payload);
std::string encode(const CompileRequest& r);
CompileRequest decode_request(const std::string& payload);
std::string encode(const CompileReply& r);
CompileReply decode_reply(const std::string& payload);
std::string encode(const WorkerStatus& s);
WorkerStatus decode_status(const std::string& payload);

// Frame I/O on a blocking or non-blocking socket. write_frame() returns false when the
// peer is gone (EPIPE, reset); MSG_NOSIGNAL keeps SIGPIPE away. read_frame() waits at most
// until `deadline_ms` (monotonic_ms(); negative = forever) and returns:
enum class ReadResult { Ok, Eof, Timeout, Error, TooLarge };
bool write_frame(int fd, FrameType type, const std::string& payload);
// `interrupted` (optional) is polled between waits (every 50 ms); when it returns true the
// read gives up with Timeout.
ReadResult read_frame(int fd, FrameType* type, std::string* payload, double deadline_ms,
                      bool (*interrupted)(void*) = nullptr, void* user = nullptr);

// The 16-byte header of a Crash frame with a 4-byte payload, then the signal number:
// built without allocation, for a signal handler. Returns the number of bytes (20).
size_t crash_frame(int signal, unsigned char out[20]);

}  // namespace kjit::worker
