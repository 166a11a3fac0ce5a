// The fleet tier: a Redis-protocol server (Redis, Valkey) shared by many machines.
// Never a dependency: every failure is counted and logged, a circuit breaker stops trying
// for a cooldown after repeated failures, and writes happen in the background.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/entry.h"

namespace kjit {

struct RemoteConfig {
  std::string url;  // redis://host:port[/db] or unix:///path/to/socket
  std::string prefix = "kjit:";
  int64_t ttl_seconds = 7 * 24 * 3600;
  int connect_timeout_ms = 100;
  int op_timeout_ms = 1000;
  bool read_only = false;
  int failures_to_open = 3;  // consecutive failures that open the breaker
  int cooldown_ms = 5000;    // how long the breaker stays open before a probe
  // Fleet-wide single flight (fleet_claim.h): how long a node waits for another node's
  // compile of a key (0 = no fleet claims), and the lease of a claim (renewed every third
  // of it while its owner compiles; a claim not renewed for a lease is not honoured).
  int claim_wait_ms = 60000;
  int claim_lease_ms = 15000;

  // Reads KJIT_REMOTE, KJIT_REMOTE_PREFIX, KJIT_REMOTE_TTL, KJIT_REMOTE_CONNECT_TIMEOUT_MS,
  // KJIT_REMOTE_TIMEOUT_MS, KJIT_REMOTE_MODE (rw|ro), KJIT_REMOTE_COOLDOWN_MS,
  // KJIT_REMOTE_CLAIM_WAIT_MS, KJIT_REMOTE_CLAIM_LEASE_MS.
  static RemoteConfig from_environment();
};

struct RemoteStats {
  uint64_t hits = 0, misses = 0, errors = 0, timeouts = 0, rejected = 0, writes = 0,
           write_failures = 0, skipped_open = 0;
  bool breaker_open = false;
};

// Envelope: "KJITRMT1", u64 format version, record (see export.h: its checksums are bound
// to its key), then the SHA-256 of field("kjit remote envelope") + field(key) + all the
// bytes before. decode_envelope() accepts it only under the key it was written for.
std::string encode_envelope(const Entry& e);
bool decode_envelope(const std::string& bytes, const std::string& key, Entry* out);

// A server's reply to command(), flattened: nil, a string (bulk or status), an integer or
// an array of those.
struct RemoteReply {
  enum class Type { Nil, String, Integer, Array };
  Type type = Type::Nil;
  std::string str;
  long long integer = 0;
  std::vector<RemoteReply> elements;
};

// True when this build includes the remote tier (hiredis was found).
bool remote_tier_built();

class RemoteTier {
 public:
  // Throws kjit::Error(KJIT_ERROR_INVALID_ARGUMENT) for a malformed URL and
  // Error(KJIT_ERROR_UNSUPPORTED) when the remote tier is not built in. Never connects
  // here: the first lookup does, so a down server costs nothing at start-up.
  explicit RemoteTier(RemoteConfig config);
  ~RemoteTier();  // drains queued writes for at most one operation timeout

  // A verified entry, or nullopt (miss, error, timeout, garbage, breaker open).
  std::optional<Entry> get(const std::string& key);
  // Queues a write (SET NX with TTL); returns at once. No-op in read-only mode.
  void put(const Entry& e);
  // Waits until queued writes are done (tests, shutdown).
  void flush();
  // Writes `e` now (SET with TTL, replacing any value), on the caller's thread; false on
  // any failure. For a claim owner, whose waiters must find the entry when it releases.
  bool put_now(const Entry& e);

  // One command (argv, binary-safe) through the breaker, on a pooled connection, waiting
  // at most min(timeout_ms, the operation timeout) when timeout_ms > 0. nullopt on a
  // failure, a timeout or an open breaker (counted as for get()); an error reply from the
  // server is returned in *error (not counted as a failure: the server answered).
  std::optional<RemoteReply> command(const std::vector<std::string>& argv, int timeout_ms = 0,
                                     std::string* error = nullptr);

  RemoteStats stats();
  const RemoteConfig& config() const { return config_; }

 private:
  struct Connection;
  enum class Fault { None, Error, Timeout };

  bool allow_attempt();
  void record(Fault f, const std::string& what);
  std::unique_ptr<Connection> connect(std::string* why);
  void writer_loop();
  bool write_now(const std::string& key, const std::string& value);

  RemoteConfig config_;
  std::string host_, socket_path_;
  int port_ = 6379, db_ = 0;

  std::mutex conn_mu_;
  std::unique_ptr<Connection> conn_;  // for reads

  std::mutex breaker_mu_;
  int consecutive_failures_ = 0;
  double open_until_ms_ = 0;
  bool reported_ = false;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> pool_;  // for command()
  long pool_pid_ = 0;  // a forked child never talks on its parent's connections

  std::mutex queue_mu_;
  std::condition_variable queue_cv_, idle_cv_;
  std::deque<std::pair<std::string, std::string>> queue_;
  bool stopping_ = false;
  bool writing_ = false;
  std::thread writer_;
  std::unique_ptr<Connection> write_conn_;

  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, timeouts_{0}, rejected_{0}, writes_{0},
      write_failures_{0}, skipped_open_{0};
};

}  // namespace kjit
