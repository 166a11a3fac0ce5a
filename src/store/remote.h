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
#include "store/remote_cluster.h"

namespace kjit {

struct RemoteConfig {
  // redis://host:port[/db], unix:///path/to/socket, redis+sentinel://h1:p1,h2:p2/master[/db]
  // or redis+cluster://h1:p1,h2:p2 (remote_cluster.h: parse_remote_url).
  std::string url;
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
  // The largest value (an entry's envelope) written to or read from the server. A larger
  // entry stays local (counted: RemoteStats::oversize); a larger value in the server is
  // refused after reading at most this many bytes plus one.
  int64_t max_entry_bytes = 16 << 20;

  // Reads KJIT_REMOTE, KJIT_REMOTE_PREFIX, KJIT_REMOTE_TTL, KJIT_REMOTE_CONNECT_TIMEOUT_MS,
  // KJIT_REMOTE_TIMEOUT_MS, KJIT_REMOTE_MODE (rw|ro), KJIT_REMOTE_COOLDOWN_MS,
  // KJIT_REMOTE_CLAIM_WAIT_MS, KJIT_REMOTE_CLAIM_LEASE_MS, KJIT_REMOTE_MAX_ENTRY_BYTES.
  static RemoteConfig from_environment();
};

struct RemoteStats {
  uint64_t hits = 0, misses = 0, errors = 0, timeouts = 0, rejected = 0, writes = 0,
           write_failures = 0, skipped_open = 0;
  bool breaker_open = false;  // the breaker of the server, master or any cluster node
  RemoteTopology topology = RemoteTopology::Single;
  std::string last_node;      // host:port (or socket) of the node that answered last
  uint64_t redirections = 0;  // cluster: MOVED and ASK replies followed
  uint64_t failovers = 0;     // sentinel: master changes seen; cluster: slot map reloads
                              // after a node failed or moved slots
  uint64_t oversize = 0;      // entries kept local or values refused: over max_entry_bytes
  size_t nodes = 0;           // the Sentinels' master (1), or the cluster's masters
  size_t replicas = 0;        // cluster: replicas listed in the slot map (0 elsewhere)
};

// Envelope: "KJITRMT1", u64 format version, record (see export.h: its checksums are bound
// to its key), then the SHA-256 of field("kjit remote envelope") + field(key) + all the
// bytes before. decode_envelope() accepts it only under the key it was written for.
std::string encode_envelope(const Entry& e);
bool decode_envelope(const std::string& bytes, const std::string& key, Entry* out);

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
  // The value stored under `name` (a full name, prefix included) when it is at most
  // max_entry_bytes long: GETRANGE reads at most that many bytes plus one, so a larger
  // value is refused (counted as oversize) without being read whole. nullopt for a
  // missing or empty value and on any failure.
  std::optional<std::string> get_value(const std::string& name);
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
  // Routed (cluster) by its key: argv[3] of EVAL (the first of KEYS), else argv[1]; MOVED
  // and ASK are followed, TRYAGAIN (a command on several keys of a slot being migrated)
  // retried a few times, then returned in *error; a -READONLY (sentinel) re-resolves the
  // master.
  std::optional<RemoteReply> command(const std::vector<std::string>& argv, int timeout_ms = 0,
                                     std::string* error = nullptr);

  RemoteStats stats();
  // stats() as a JSON object: topology, node (that answered last, "" if none yet), nodes,
  // redirections, failovers, oversize, breaker_open, max_entry_bytes. With `probe`, when
  // no node has answered yet, one PING goes first (through the breaker, bounded by the
  // operation timeout), so that "node" names the node in use.
  std::string describe(bool probe);
  const RemoteConfig& config() const { return config_; }
  RemoteTopology topology() const { return endpoints_.topology; }
  // Whether a command on `name` that just failed (no answer) may succeed after a
  // failover: behind Sentinels always; in a cluster when the slot map lists a replica of
  // the master serving the name's slot (no replica: its slots stay down until it is back,
  // so waiting would only delay a local compile); never on one server.
  bool may_fail_over(const std::string& name);
  // Names in the server: an entry and its fleet claim. In a cluster both carry the key as
  // a hash tag ("{key}"), so that an entry and its claim sit in one slot.
  std::string entry_name(const std::string& key) const;
  std::string claim_name(const std::string& key) const;

 private:
  struct Connection;
  struct Node;
  enum class Fault { None, Error, Timeout };

  Node& node(const RemoteAddress& a);
  bool allow_attempt(Node& n);
  void record(Node& n, Fault f, const std::string& what);
  std::unique_ptr<Connection> connect(const RemoteAddress& a, bool check_master, std::string* why);
  std::unique_ptr<Connection> take(Node& n, std::string* why);
  void give_back(Node& n, std::unique_ptr<Connection> c);
  bool route(int slot, RemoteAddress* out, std::string* why);
  bool resolve_master(std::string* why);
  bool refresh_slots(std::string* why);
  std::optional<RemoteReply> run(const std::vector<std::string>& argv, const std::string& route_key,
                                 int timeout_ms, std::string* error);
  void writer_loop();
  bool write_now(const std::string& key, const std::string& value);

  RemoteConfig config_;
  RemoteEndpoints endpoints_;

  std::mutex nodes_mu_;  // guards nodes_ (the map; each Node guards itself)
  std::vector<std::unique_ptr<Node>> nodes_;
  long pool_pid_ = 0;  // a forked child never talks on its parent's connections

  std::mutex topo_mu_;    // the master (sentinel) or the slot map (cluster)
  RemoteAddress master_;  // sentinel: as last resolved (host empty: not yet)
  bool need_resolve_ = true;
  double last_resolve_ms_ = -1e9;
  SlotMap slots_;
  bool need_refresh_ = true;
  double last_refresh_ms_ = -1e9;
  std::atomic<Node*> last_node_{nullptr};  // nodes live as long as this object

  std::mutex queue_mu_;
  std::condition_variable queue_cv_, idle_cv_;
  std::deque<std::pair<std::string, std::string>> queue_;
  bool stopping_ = false;
  bool writing_ = false;
  std::thread writer_;

  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, timeouts_{0}, rejected_{0}, writes_{0},
      write_failures_{0}, skipped_open_{0}, redirections_{0}, failovers_{0}, oversize_{0};
};

}  // namespace kjit
