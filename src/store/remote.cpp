#include "store/remote.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "store/export.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"

#ifdef KJIT_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace kjit {
namespace {

constexpr char kEnvelopeMagic[8] = {'K', 'J', 'I', 'T', 'R', 'M', 'T', '1'};
constexpr size_t kMaxQueuedWrites = 256;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (end && *end == '\0' && n >= 0) ? int(n) : fallback;
}

// The envelope's digest covers the key it is stored under as well as its bytes.
Digest envelope_digest(const std::string& key, const char* body, size_t size) {
  Sha256 h;
  h.field("kjit remote envelope");
  h.field(key);
  h.update(body, size);
  return h.finish();
}

}  // namespace

RemoteConfig RemoteConfig::from_environment() {
  RemoteConfig c;
  if (const char* u = std::getenv("KJIT_REMOTE")) c.url = u;
  if (const char* p = std::getenv("KJIT_REMOTE_PREFIX")) c.prefix = p;
  c.ttl_seconds = env_int("KJIT_REMOTE_TTL", int(c.ttl_seconds));
  c.connect_timeout_ms = env_int("KJIT_REMOTE_CONNECT_TIMEOUT_MS", c.connect_timeout_ms);
  c.op_timeout_ms = env_int("KJIT_REMOTE_TIMEOUT_MS", c.op_timeout_ms);
  c.cooldown_ms = env_int("KJIT_REMOTE_COOLDOWN_MS", c.cooldown_ms);
  c.claim_wait_ms = env_int("KJIT_REMOTE_CLAIM_WAIT_MS", c.claim_wait_ms);
  c.claim_lease_ms = env_int("KJIT_REMOTE_CLAIM_LEASE_MS", c.claim_lease_ms);
  if (c.claim_lease_ms < 30) c.claim_lease_ms = 30;  // renewed every third: keep it sane
  if (const char* m = std::getenv("KJIT_REMOTE_MODE")) c.read_only = std::strcmp(m, "ro") == 0;
  if (const char* v = std::getenv("KJIT_REMOTE_MAX_ENTRY_BYTES")) {
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (*v && end && *end == '\0' && n > 0) c.max_entry_bytes = n;
  }
  return c;
}

std::string encode_envelope(const Entry& e) {
  std::string out(kEnvelopeMagic, sizeof kEnvelopeMagic);
  for (int i = 0; i < 8; ++i)
    out.push_back(char((uint64_t(kCacheFormatVersion) >> (8 * i)) & 0xff));
  out += encode_record(e);
  const Digest d = envelope_digest(e.key, out.data(), out.size());
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

bool decode_envelope(const std::string& bytes, const std::string& key, Entry* out) {
  if (bytes.size() < sizeof kEnvelopeMagic + 8 + 32) return false;
  if (std::memcmp(bytes.data(), kEnvelopeMagic, sizeof kEnvelopeMagic) != 0) return false;
  uint64_t version = 0;
  for (int i = 0; i < 8; ++i) {
    version |= uint64_t(static_cast<unsigned char>(bytes[sizeof kEnvelopeMagic + i])) << (8 * i);
  }
  if (version != uint64_t(kCacheFormatVersion)) return false;
  const size_t body = bytes.size() - 32;
  // Checked against the key it was fetched under: an envelope written for another key
  // (copied, renamed or misfiled in the server) fails here, before anything is parsed.
  const Digest d = envelope_digest(key, bytes.data(), body);
  if (std::memcmp(d.data(), bytes.data() + body, 32) != 0) return false;
  // The record checks its own checksums against its own key, which must be this key.
  Entry e;
  if (!decode_record(bytes.substr(16, body - 16), &e) || e.key != key) return false;
  *out = std::move(e);
  return true;
}

#ifdef KJIT_HAVE_HIREDIS
struct RemoteTier::Connection {
  redisContext* ctx = nullptr;
  ~Connection() {
    if (ctx) redisFree(ctx);
  }
};
#else
struct RemoteTier::Connection {};
#endif

// The reply buffer a data connection keeps between replies (see connect()).
constexpr size_t kReaderKeepBytes = size_t(4) << 20;

// One server: its breaker and its idle connections.
struct RemoteTier::Node {
  RemoteAddress addr;
  std::mutex mu;
  int consecutive_failures = 0;
  double open_until_ms = 0;
  bool reported = false;
  std::vector<std::unique_ptr<Connection>> idle;
};

std::string RemoteTier::entry_name(const std::string& key) const {
  return endpoints_.topology == RemoteTopology::Cluster ? config_.prefix + "{" + key + "}"
                                                        : config_.prefix + key;
}

std::string RemoteTier::claim_name(const std::string& key) const {
  return endpoints_.topology == RemoteTopology::Cluster ? config_.prefix + "claim:{" + key + "}"
                                                        : config_.prefix + "claim:" + key;
}

#ifdef KJIT_HAVE_HIREDIS

bool remote_tier_built() {
  return true;
}

namespace {

struct Reply {
  redisReply* r = nullptr;
  ~Reply() {
    if (r) freeReplyObject(r);
  }
};

// Writing to a socket whose peer has gone raises SIGPIPE, which would kill the host
// process. For the duration of a Redis call, block SIGPIPE in this thread and consume
// any that the call raised; the call itself then just fails with EPIPE.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~NoSigpipe() {
    if (!was_pending_) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

bool is_timeout(const redisContext* c) {
  return c->err == REDIS_ERR_IO &&
         (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT || errno == EINPROGRESS);
}

bool flatten(const redisReply* r, RemoteReply* out, int depth = 0) {
  switch (r->type) {
    case REDIS_REPLY_NIL:
      out->type = RemoteReply::Type::Nil;
      return true;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      out->type = RemoteReply::Type::String;
      out->str.assign(r->str, r->len);
      return true;
    case REDIS_REPLY_INTEGER:
      out->type = RemoteReply::Type::Integer;
      out->integer = r->integer;
      return true;
    case REDIS_REPLY_ARRAY:
      if (depth > 4) return false;  // CLUSTER SLOTS nests four deep
      out->type = RemoteReply::Type::Array;
      out->elements.resize(r->elements);
      for (size_t i = 0; i < r->elements; ++i) {
        if (!r->element[i] || !flatten(r->element[i], &out->elements[i], depth + 1)) return false;
      }
      return true;
    default:
      return false;
  }
}

timeval to_timeval(int ms) {
  return timeval{ms / 1000, (ms % 1000) * 1000};
}

// The key a command is routed by: the first of KEYS for EVAL, else its first argument.
const std::string& route_key_of(const std::vector<std::string>& argv) {
  static const std::string none;
  const std::string& cmd = argv[0];
  const bool eval = cmd.size() >= 4 && (cmd[0] == 'E' || cmd[0] == 'e') &&
                    (cmd == "EVAL" || cmd == "eval" || cmd == "EVALSHA" || cmd == "evalsha");
  if (eval) return argv.size() > 3 && argv[2] != "0" ? argv[3] : none;
  return argv.size() > 1 ? argv[1] : none;
}

}  // namespace

RemoteTier::RemoteTier(RemoteConfig config)
    : config_(std::move(config)), endpoints_(parse_remote_url(config_.url)) {
  if (config_.max_entry_bytes <= 0) config_.max_entry_bytes = 16 << 20;
}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

// A connection to `a`; for data (not a Sentinel): the database selected and, behind
// Sentinels, checked to be a master (never write to a replica).
std::unique_ptr<RemoteTier::Connection> RemoteTier::connect(const RemoteAddress& a, bool data,
                                                            std::string* why) {
  auto conn = std::make_unique<Connection>();
  const timeval ct = to_timeval(config_.connect_timeout_ms);
  conn->ctx = a.socket.empty() ? redisConnectWithTimeout(a.host.c_str(), a.port, ct)
                               : redisConnectUnixWithTimeout(a.socket.c_str(), ct);
  if (!conn->ctx || conn->ctx->err) {
    *why = conn->ctx ? conn->ctx->errstr : "cannot allocate a connection";
    return nullptr;
  }
  redisSetTimeout(conn->ctx, to_timeval(config_.op_timeout_ms));
  if (!data) return conn;
  // hiredis frees its reply buffer after each reply with more than maxbuf bytes to spare
  // (16 KB by default) and grows a new one, doubling, for the next: for a heavy entry that
  // is megabytes of memory mapped afresh and faulted in on every hit. Keeping up to
  // kReaderKeepBytes per pooled connection makes a repeated heavy hit reuse its buffer.
  conn->ctx->reader->maxbuf = kReaderKeepBytes;
  if (endpoints_.db != 0) {
    Reply r;
    r.r = static_cast<redisReply*>(redisCommand(conn->ctx, "SELECT %d", endpoints_.db));
    if (!r.r || r.r->type == REDIS_REPLY_ERROR) {
      *why = r.r ? std::string(r.r->str, r.r->len) : std::string(conn->ctx->errstr);
      return nullptr;
    }
  }
  if (endpoints_.topology == RemoteTopology::Sentinel) {
    Reply r;
    r.r = static_cast<redisReply*>(redisCommand(conn->ctx, "ROLE"));
    const bool master = r.r && r.r->type == REDIS_REPLY_ARRAY && r.r->elements > 0 &&
                        r.r->element[0]->type == REDIS_REPLY_STRING &&
                        std::string(r.r->element[0]->str, r.r->element[0]->len) == "master";
    if (!master) {
      *why = r.r ? a.str() + " is not a master" : std::string(conn->ctx->errstr);
      return nullptr;
    }
  }
  return conn;
}

RemoteTier::Node& RemoteTier::node(const RemoteAddress& a) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  for (auto& n : nodes_) {
    if (n->addr == a) return *n;
  }
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->addr = a;
  return *nodes_.back();
}

std::unique_ptr<RemoteTier::Connection> RemoteTier::take(Node& n, std::string* why) {
  {
    std::lock_guard<std::mutex> lock(nodes_mu_);
    if (pool_pid_ != long(getpid())) {
      // The parent's: closing this process's copies leaves the parent's open.
      for (auto& other : nodes_) {
        std::lock_guard<std::mutex> node_lock(other->mu);
        other->idle.clear();
      }
      pool_pid_ = long(getpid());
    }
  }
  {
    std::lock_guard<std::mutex> lock(n.mu);
    if (!n.idle.empty()) {
      auto c = std::move(n.idle.back());
      n.idle.pop_back();
      return c;
    }
  }
  return connect(n.addr, true, why);
}

void RemoteTier::give_back(Node& n, std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(n.mu);
  if (n.idle.size() < 8) n.idle.push_back(std::move(c));
}

bool RemoteTier::allow_attempt(Node& n) {
  std::lock_guard<std::mutex> lock(n.mu);
  if (n.consecutive_failures < config_.failures_to_open) return true;
  const double now = monotonic_ms();
  if (now < n.open_until_ms) {
    skipped_open_++;
    return false;
  }
  // Half-open: let this one attempt probe; others keep skipping until it reports.
  n.open_until_ms = now + config_.cooldown_ms;
  return true;
}

void RemoteTier::record(Node& n, Fault f, const std::string& what) {
  std::lock_guard<std::mutex> lock(n.mu);
  const std::string name = endpoints_.topology == RemoteTopology::Single
                               ? config_.url
                               : config_.url + " (node " + n.addr.str() + ")";
  if (f == Fault::None) {
    if (n.consecutive_failures >= config_.failures_to_open) {
      log_info("remote cache tier " + name + " is reachable again");
    }
    n.consecutive_failures = 0;
    n.reported = false;
    return;
  }
  (f == Fault::Timeout ? timeouts_ : errors_)++;
  if (++n.consecutive_failures >= config_.failures_to_open) {
    n.open_until_ms = monotonic_ms() + config_.cooldown_ms;
    if (!n.reported) {
      n.reported = true;
      log_warn("remote cache tier " + name + " unavailable (" + what +
               "); working locally, retrying every " + std::to_string(config_.cooldown_ms) + " ms");
    }
  }
}

// Asks the Sentinels, in turn, for the master's address (topo_mu_ held).
bool RemoteTier::resolve_master(std::string* why) {
  last_resolve_ms_ = monotonic_ms();
  for (const RemoteAddress& s : endpoints_.nodes) {
    std::string e;
    auto conn = connect(s, false, &e);
    if (!conn) {
      *why = "sentinel " + s.str() + ": " + e;
      continue;
    }
    Reply r;
    r.r = static_cast<redisReply*>(redisCommand(conn->ctx, "SENTINEL get-master-addr-by-name %s",
                                                endpoints_.master_name.c_str()));
    if (!r.r || r.r->type != REDIS_REPLY_ARRAY || r.r->elements != 2 ||
        r.r->element[0]->type != REDIS_REPLY_STRING ||
        r.r->element[1]->type != REDIS_REPLY_STRING) {
      *why = "sentinel " + s.str() + " does not know master '" + endpoints_.master_name + "'";
      continue;
    }
    RemoteAddress m;
    m.host.assign(r.r->element[0]->str, r.r->element[0]->len);
    m.port = std::atoi(r.r->element[1]->str);
    if (m.host.empty() || m.port <= 0 || m.port > 65535) continue;
    if (!master_.host.empty() && !(m == master_)) {
      failovers_++;
      log_info("remote cache tier " + config_.url + ": master '" + endpoints_.master_name +
               "' is now " + m.str() + " (was " + master_.str() + ")");
    }
    master_ = m;
    return true;
  }
  return false;
}

// Loads the slot map from the first node that gives one (topo_mu_ held).
bool RemoteTier::refresh_slots(std::string* why) {
  last_refresh_ms_ = monotonic_ms();
  std::vector<RemoteAddress> candidates = slots_.nodes();
  for (const RemoteAddress& a : endpoints_.nodes) {
    if (std::find(candidates.begin(), candidates.end(), a) == candidates.end())
      candidates.push_back(a);
  }
  for (const RemoteAddress& a : candidates) {
    {
      Node& n = node(a);
      std::lock_guard<std::mutex> lock(n.mu);
      if (n.consecutive_failures >= config_.failures_to_open && monotonic_ms() < n.open_until_ms)
        continue;  // known down
    }
    std::string e;
    auto conn = connect(a, false, &e);
    if (!conn) {
      *why = a.str() + ": " + e;
      continue;
    }
    Reply r;
    r.r = static_cast<redisReply*>(redisCommand(conn->ctx, "CLUSTER SLOTS"));
    RemoteReply flat;
    SlotMap next;
    if (!r.r || !flatten(r.r, &flat) || !next.load(flat, a.host)) {
      *why = a.str() + " gave no slot map" +
             (r.r && r.r->type == REDIS_REPLY_ERROR ? ": " + std::string(r.r->str, r.r->len) : "");
      continue;
    }
    if (!slots_.empty()) {
      for (int s = 0; s < kClusterSlots; ++s) {
        const RemoteAddress *was = slots_.node_for(s), *now = next.node_for(s);
        if (was && now && !(*was == *now)) {
          failovers_++;  // a slot changed hands (a resharding or a replica promoted)
          break;
        }
      }
    }
    slots_ = std::move(next);
    need_refresh_ = false;
    return true;
  }
  return false;
}

// Where a command for `slot` (-1 when not a cluster) goes.
bool RemoteTier::route(int slot, RemoteAddress* out, std::string* why) {
  std::lock_guard<std::mutex> lock(topo_mu_);
  const double now = monotonic_ms();
  switch (endpoints_.topology) {
    case RemoteTopology::Single:
      *out = endpoints_.nodes[0];
      return true;
    case RemoteTopology::Sentinel:
      if (master_.host.empty() || (need_resolve_ && now - last_resolve_ms_ >= 100)) {
        resolve_master(why);
      }
      if (master_.host.empty()) return false;
      *out = master_;
      return true;
    case RemoteTopology::Cluster: {
      if (slots_.empty() || (need_refresh_ && now - last_refresh_ms_ >= 100)) refresh_slots(why);
      const RemoteAddress* a = slots_.node_for(slot);
      if (!a) {
        if (why->empty()) *why = "no node serves slot " + std::to_string(slot);
        return false;
      }
      *out = *a;
      return true;
    }
  }
  return false;
}

// One command on the node that serves `route_key`, following a cluster's redirections
// and a Sentinel failover. nullopt with *error empty: the server could not be used;
// with *error set: the server's error reply.
std::optional<RemoteReply> RemoteTier::run(const std::vector<std::string>& argv,
                                           const std::string& route_key, int timeout_ms,
                                           std::string* error) {
  NoSigpipe no_sigpipe;
  const RemoteTopology topo = endpoints_.topology;
  const int slot = topo == RemoteTopology::Cluster ? cluster_slot(route_key) : -1;
  const int ms =
      timeout_ms > 0 ? std::min(timeout_ms, config_.op_timeout_ms) : config_.op_timeout_ms;
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto lost = [&] {  // the node failed: look for another master or slot map next time
    std::lock_guard<std::mutex> lock(topo_mu_);
    need_resolve_ = need_refresh_ = true;
  };
  RemoteAddress ask_to, failed;
  bool asking = false, followed_readonly = false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    RemoteAddress addr;
    std::string why;
    if (asking) {
      addr = ask_to;
    } else if (!route(slot, &addr, &why)) {
      errors_++;
      log_debug("remote cache tier " + config_.url + ": " + why);
      return std::nullopt;
    }
    if (!failed.host.empty() || !failed.socket.empty()) {
      if (addr == failed) return std::nullopt;  // nowhere else to go
    }
    Node& n = node(addr);
    if (!allow_attempt(n)) {
      // Its breaker is open. Behind Sentinels or in a cluster the node may have been
      // replaced (a replica promoted): ask again (at most every 100 ms, route() sees to
      // that) and go there if the answer changed; else give up at once.
      if (topo == RemoteTopology::Single) return std::nullopt;
      lost();
      failed = addr;
      asking = false;
      continue;
    }
    std::unique_ptr<Connection> conn = take(n, &why);
    if (!conn) {
      record(n, Fault::Error, "connect: " + why);
      lost();
      failed = addr;
      asking = false;
      continue;
    }
    redisSetTimeout(conn->ctx, to_timeval(ms));
    Reply r;
    if (asking) {
      redisAppendCommand(conn->ctx, "ASKING");
      redisAppendCommandArgv(conn->ctx, int(args.size()), args.data(), lens.data());
      void* first = nullptr;
      if (redisGetReply(conn->ctx, &first) == REDIS_OK) {
        freeReplyObject(first);
        void* second = nullptr;
        if (redisGetReply(conn->ctx, &second) == REDIS_OK) r.r = static_cast<redisReply*>(second);
      }
    } else {
      r.r = static_cast<redisReply*>(
          redisCommandArgv(conn->ctx, int(args.size()), args.data(), lens.data()));
    }
    if (!r.r) {
      const Fault f = is_timeout(conn->ctx) ? Fault::Timeout : Fault::Error;
      record(n, f, argv[0] + ": " + conn->ctx->errstr);
      lost();  // a failed context cannot be reused: dropped
      failed = addr;
      asking = false;
      continue;
    }
    record(n, Fault::None, "");
    last_node_ = &n;
    if (r.r->type == REDIS_REPLY_ERROR) {
      const std::string e(r.r->str, r.r->len);
      if (topo == RemoteTopology::Cluster) {
        const Redirect red = parse_redirect(e);
        if (red.kind != Redirect::Kind::None) {
          give_back(n, std::move(conn));
          redirections_++;
          if (red.kind == Redirect::Kind::Moved) {
            std::lock_guard<std::mutex> lock(topo_mu_);
            slots_.set(red.slot, red.to);
            need_refresh_ = true;
          }
          asking = red.kind == Redirect::Kind::Ask;
          ask_to = red.to;
          continue;
        }
        if (e.rfind("TRYAGAIN", 0) == 0) {  // a multi-key command during a migration
          give_back(n, std::move(conn));
          *error = e;  // what the caller gets if the migration outlasts the attempts
          asking = false;
          std::this_thread::sleep_for(std::chrono::milliseconds(2 * (attempt + 1)));
          continue;
        }
      }
      if (topo == RemoteTopology::Sentinel && e.rfind("READONLY", 0) == 0 && !followed_readonly) {
        // A replica now (demoted): never write here; ask the Sentinels again.
        followed_readonly = true;
        {
          std::lock_guard<std::mutex> lock(n.mu);
          n.idle.clear();
        }
        {
          std::lock_guard<std::mutex> lock(topo_mu_);
          need_resolve_ = true;
          last_resolve_ms_ = -1e9;
        }
        failed = addr;
        *error = e;
        continue;
      }
      give_back(n, std::move(conn));
      *error = e;
      return std::nullopt;
    }
    if (topo == RemoteTopology::Sentinel) {
      std::lock_guard<std::mutex> lock(topo_mu_);
      need_resolve_ = false;
    }
    RemoteReply out;
    const bool ok = flatten(r.r, &out);
    give_back(n, std::move(conn));
    if (!ok) {
      *error = "unexpected reply type";
      return std::nullopt;
    }
    error->clear();
    return out;
  }
  if (error->empty()) *error = "too many redirections";
  return std::nullopt;
}

bool RemoteTier::may_fail_over(const std::string& name) {
  switch (endpoints_.topology) {
    case RemoteTopology::Single:
      return false;
    case RemoteTopology::Sentinel:
      return true;
    case RemoteTopology::Cluster: {
      std::lock_guard<std::mutex> lock(topo_mu_);
      return slots_.replicated(cluster_slot(name));
    }
  }
  return false;
}

std::optional<Entry> RemoteTier::get(const std::string& key) {
  const std::string k = entry_name(key);
  std::string error;
  // At most max_entry_bytes + 1 bytes come back: a larger value is refused unread.
  const auto r = run({"GETRANGE", k, "0", std::to_string(config_.max_entry_bytes)}, k, 0, &error);
  if (!r) {
    if (!error.empty()) {
      rejected_++;
      log_warn("remote cache tier refused a lookup of " + key + " (" + error + "); ignored");
    }
    return std::nullopt;
  }
  if (r->type != RemoteReply::Type::String) {
    rejected_++;
    log_warn("remote cache tier returned a non-string for " + key + "; ignored");
    return std::nullopt;
  }
  if (r->str.empty()) {  // GETRANGE of a missing key
    misses_++;
    return std::nullopt;
  }
  if (int64_t(r->str.size()) > config_.max_entry_bytes) {
    oversize_++;
    rejected_++;
    log_warn("remote cache entry " + key + " is larger than " +
             std::to_string(config_.max_entry_bytes) +
             " bytes (KJIT_REMOTE_MAX_ENTRY_BYTES); ignored");
    return std::nullopt;
  }
  Entry e;
  if (!decode_envelope(r->str, key, &e)) {
    rejected_++;
    log_warn("remote cache entry " + key + " failed verification; ignored");
    return std::nullopt;
  }
  hits_++;
  return e;
}

std::optional<std::string> RemoteTier::get_value(const std::string& name) {
  std::string error;
  auto r = run({"GETRANGE", name, "0", std::to_string(config_.max_entry_bytes)}, name, 0, &error);
  if (!r) {
    if (!error.empty()) rejected_++;
    return std::nullopt;
  }
  if (r->type != RemoteReply::Type::String || r->str.empty()) return std::nullopt;
  if (int64_t(r->str.size()) > config_.max_entry_bytes) {
    oversize_++;
    rejected_++;
    log_warn("remote cache value " + name + " is larger than " +
             std::to_string(config_.max_entry_bytes) +
             " bytes (KJIT_REMOTE_MAX_ENTRY_BYTES); ignored");
    return std::nullopt;
  }
  return std::move(r->str);
}

void RemoteTier::put(const Entry& e) {
  if (config_.read_only) return;
  std::string value = encode_envelope(e);
  if (int64_t(value.size()) > config_.max_entry_bytes) {
    oversize_++;
    log_info("entry " + e.key + " (" + std::to_string(value.size()) +
             " bytes) stays local: larger than KJIT_REMOTE_MAX_ENTRY_BYTES");
    return;
  }
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
  if (queue_.size() >= kMaxQueuedWrites) {
    queue_.pop_front();
    write_failures_++;
  }
  queue_.emplace_back(e.key, std::move(value));
  queue_cv_.notify_one();
}

bool RemoteTier::write_now(const std::string& key, const std::string& value) {
  const std::string k = entry_name(key);
  std::string error;
  const auto r =
      run({"SET", k, value, "NX", "EX", std::to_string(config_.ttl_seconds)}, k, 0, &error);
  if (!r && !error.empty()) log_warn("remote cache tier refused an entry: " + error);
  return bool(r);  // OK, or nil when the key already existed (content-addressed: same value)
}

void RemoteTier::writer_loop() {
  bool last_ok = true;
  for (;;) {
    std::pair<std::string, std::string> item;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      if (stopping_ && !last_ok) {
        // On shutdown, give up on the rest if the server is not answering.
        write_failures_ += queue_.size();
        queue_.clear();
        idle_cv_.notify_all();
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    last_ok = write_now(item.first, item.second);
    (last_ok ? writes_ : write_failures_)++;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      writing_ = false;
    }
    idle_cv_.notify_all();
  }
}

void RemoteTier::flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

std::optional<RemoteReply> RemoteTier::command(const std::vector<std::string>& argv, int timeout_ms,
                                               std::string* error) {
  if (argv.empty()) return std::nullopt;
  std::string e;
  auto r = run(argv, route_key_of(argv), timeout_ms, &e);
  if (!r && !e.empty()) {
    rejected_++;
    if (error) *error = e;
  }
  return r;
}

bool RemoteTier::put_now(const Entry& e) {
  if (config_.read_only) return false;
  const std::string value = encode_envelope(e);
  if (int64_t(value.size()) > config_.max_entry_bytes) {
    oversize_++;
    return false;
  }
  std::string error;
  const auto r = command(
      {"SET", entry_name(e.key), value, "EX", std::to_string(config_.ttl_seconds)}, 0, &error);
  if (!r) {
    write_failures_++;
    if (!error.empty()) log_warn("remote cache tier refused an entry: " + error);
    return false;
  }
  writes_++;
  return true;
}

#else  // !KJIT_HAVE_HIREDIS

bool remote_tier_built() {
  return false;
}
RemoteTier::RemoteTier(RemoteConfig config) : config_(std::move(config)) {
  fail(KJIT_ERROR_UNSUPPORTED, "the remote cache tier is not built into this kjit (no hiredis)");
}
RemoteTier::~RemoteTier() = default;
std::optional<Entry> RemoteTier::get(const std::string&) {
  return std::nullopt;
}
void RemoteTier::put(const Entry&) {}
void RemoteTier::flush() {}
bool RemoteTier::put_now(const Entry&) {
  return false;
}
std::optional<RemoteReply> RemoteTier::command(const std::vector<std::string>&, int, std::string*) {
  return std::nullopt;
}
bool RemoteTier::may_fail_over(const std::string&) {
  return false;
}
std::optional<std::string> RemoteTier::get_value(const std::string&) {
  return std::nullopt;
}

#endif

RemoteStats RemoteTier::stats() {
  RemoteStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.errors = errors_;
  s.timeouts = timeouts_;
  s.rejected = rejected_;
  s.writes = writes_;
  s.write_failures = write_failures_;
  s.skipped_open = skipped_open_;
  s.redirections = redirections_;
  s.failovers = failovers_;
  s.oversize = oversize_;
  s.topology = endpoints_.topology;
  if (const Node* last = last_node_.load()) s.last_node = last->addr.str();
  // The nodes in use: the server, the master as last resolved, the cluster's masters.
  std::vector<RemoteAddress> in_use;
  {
    std::lock_guard<std::mutex> lock(topo_mu_);
    if (endpoints_.topology == RemoteTopology::Sentinel) {
      if (!master_.host.empty()) in_use.push_back(master_);
    } else if (endpoints_.topology == RemoteTopology::Cluster) {
      in_use = slots_.nodes();
      s.replicas = slots_.replicas();
    } else if (!endpoints_.nodes.empty()) {
      in_use.push_back(endpoints_.nodes[0]);
    }
  }
  s.nodes = in_use.size();
  std::lock_guard<std::mutex> lock(nodes_mu_);
  for (const auto& n : nodes_) {
    if (std::find(in_use.begin(), in_use.end(), n->addr) == in_use.end()) continue;
    std::lock_guard<std::mutex> node_lock(n->mu);
    if (n->consecutive_failures >= config_.failures_to_open) s.breaker_open = true;
  }
  return s;
}

std::string RemoteTier::describe(bool probe) {
  if (probe && !last_node_.load() && remote_tier_built()) command({"PING"});
  const RemoteStats s = stats();
  std::string node;
  for (char c : s.last_node) {
    if (c == '"' || c == '\\') node += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) node += c;
  }
  return std::string("{\"topology\":\"") + topology_name(s.topology) + "\",\"node\":\"" + node +
         "\",\"nodes\":" + std::to_string(s.nodes) + ",\"replicas\":" + std::to_string(s.replicas) +
         ",\"redirections\":" + std::to_string(s.redirections) +
         ",\"failovers\":" + std::to_string(s.failovers) +
         ",\"oversize\":" + std::to_string(s.oversize) +
         ",\"breaker_open\":" + (s.breaker_open ? "true" : "false") +
         ",\"max_entry_bytes\":" + std::to_string(config_.max_entry_bytes) + "}";
}

}  // namespace kjit
