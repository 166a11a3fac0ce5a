#include "store/remote.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

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

bool remote_tier_built() {
  return true;
}

struct RemoteTier::Connection {
  redisContext* ctx = nullptr;
  ~Connection() {
    if (ctx) redisFree(ctx);
  }
};

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

}  // namespace

RemoteTier::RemoteTier(RemoteConfig config) : config_(std::move(config)) {
  const std::string& u = config_.url;
  if (u.rfind("unix://", 0) == 0) {
    socket_path_ = u.substr(7);
    if (socket_path_.empty())
      fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + u + "' has no socket path");
  } else if (u.rfind("redis://", 0) == 0) {
    std::string rest = u.substr(8);
    const size_t at = rest.rfind('@');  // credentials are not supported; strip nothing silently
    if (at != std::string::npos) {
      fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + u + "': credentials are not supported");
    }
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) {
      const std::string db = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
      if (!db.empty()) {
        char* end = nullptr;
        db_ = int(std::strtol(db.c_str(), &end, 10));
        if (*end != '\0' || db_ < 0)
          fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + u + "': bad database number");
      }
    }
    const size_t colon = rest.rfind(':');
    host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
    if (colon != std::string::npos) {
      char* end = nullptr;
      port_ = int(std::strtol(rest.c_str() + colon + 1, &end, 10));
      if (*end != '\0' || port_ <= 0 || port_ > 65535) {
        fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + u + "': bad port");
      }
    }
    if (host_.empty()) fail(KJIT_ERROR_INVALID_ARGUMENT, "remote URL '" + u + "' has no host");
  } else {
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "remote URL '" + u + "' is not redis://host:port[/db] or unix:///path");
  }
}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::unique_ptr<RemoteTier::Connection> RemoteTier::connect(std::string* why) {
  auto conn = std::make_unique<Connection>();
  timeval ct{config_.connect_timeout_ms / 1000, (config_.connect_timeout_ms % 1000) * 1000};
  conn->ctx = socket_path_.empty() ? redisConnectWithTimeout(host_.c_str(), port_, ct)
                                   : redisConnectUnixWithTimeout(socket_path_.c_str(), ct);
  if (!conn->ctx || conn->ctx->err) {
    *why = conn->ctx ? conn->ctx->errstr : "cannot allocate a connection";
    return nullptr;
  }
  timeval ot{config_.op_timeout_ms / 1000, (config_.op_timeout_ms % 1000) * 1000};
  redisSetTimeout(conn->ctx, ot);
  if (db_ != 0) {
    Reply r;
    r.r = static_cast<redisReply*>(redisCommand(conn->ctx, "SELECT %d", db_));
    if (!r.r || r.r->type == REDIS_REPLY_ERROR) {
      *why = r.r ? std::string(r.r->str, r.r->len) : std::string(conn->ctx->errstr);
      return nullptr;
    }
  }
  return conn;
}

bool RemoteTier::allow_attempt() {
  std::lock_guard<std::mutex> lock(breaker_mu_);
  if (consecutive_failures_ < config_.failures_to_open) return true;
  const double now = monotonic_ms();
  if (now < open_until_ms_) {
    skipped_open_++;
    return false;
  }
  // Half-open: let this one attempt probe; others keep skipping until it reports.
  open_until_ms_ = now + config_.cooldown_ms;
  return true;
}

void RemoteTier::record(Fault f, const std::string& what) {
  std::lock_guard<std::mutex> lock(breaker_mu_);
  if (f == Fault::None) {
    if (consecutive_failures_ >= config_.failures_to_open) {
      log_info("remote cache tier " + config_.url + " is reachable again");
    }
    consecutive_failures_ = 0;
    reported_ = false;
    return;
  }
  (f == Fault::Timeout ? timeouts_ : errors_)++;
  if (++consecutive_failures_ >= config_.failures_to_open) {
    open_until_ms_ = monotonic_ms() + config_.cooldown_ms;
    if (!reported_) {
      reported_ = true;
      log_warn("remote cache tier " + config_.url + " unavailable (" + what +
               "); working locally, retrying every " + std::to_string(config_.cooldown_ms) + " ms");
    }
  }
}

std::optional<Entry> RemoteTier::get(const std::string& key) {
  if (!allow_attempt()) return std::nullopt;
  std::lock_guard<std::mutex> lock(conn_mu_);
  NoSigpipe no_sigpipe;
  std::string why;
  if (!conn_) conn_ = connect(&why);
  if (!conn_) {
    record(Fault::Error, "connect: " + why);
    return std::nullopt;
  }
  const std::string k = config_.prefix + key;
  Reply r;
  r.r = static_cast<redisReply*>(redisCommand(conn_->ctx, "GET %b", k.data(), k.size()));
  if (!r.r) {
    const Fault f = is_timeout(conn_->ctx) ? Fault::Timeout : Fault::Error;
    why = conn_->ctx->errstr;
    conn_.reset();  // a failed context cannot be reused
    record(f, "GET: " + why);
    return std::nullopt;
  }
  if (r.r->type == REDIS_REPLY_NIL) {
    record(Fault::None, "");
    misses_++;
    return std::nullopt;
  }
  if (r.r->type != REDIS_REPLY_STRING) {
    record(Fault::None, "");
    rejected_++;
    log_warn("remote cache tier returned a non-string for " + key + "; ignored");
    return std::nullopt;
  }
  record(Fault::None, "");
  Entry e;
  if (!decode_envelope(std::string(r.r->str, r.r->len), key, &e)) {
    rejected_++;
    log_warn("remote cache entry " + key + " failed verification; ignored");
    return std::nullopt;
  }
  hits_++;
  return e;
}

void RemoteTier::put(const Entry& e) {
  if (config_.read_only) return;
  std::string value = encode_envelope(e);
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
  if (!allow_attempt()) return false;
  NoSigpipe no_sigpipe;
  std::string why;
  if (!write_conn_) write_conn_ = connect(&why);
  if (!write_conn_) {
    record(Fault::Error, "connect: " + why);
    return false;
  }
  const std::string k = config_.prefix + key;
  Reply r;
  r.r = static_cast<redisReply*>(redisCommand(write_conn_->ctx, "SET %b %b NX EX %lld", k.data(),
                                              k.size(), value.data(), value.size(),
                                              static_cast<long long>(config_.ttl_seconds)));
  if (!r.r) {
    const Fault f = is_timeout(write_conn_->ctx) ? Fault::Timeout : Fault::Error;
    why = write_conn_->ctx->errstr;
    write_conn_.reset();
    record(f, "SET: " + why);
    return false;
  }
  if (r.r->type == REDIS_REPLY_ERROR) {
    record(Fault::Error, "SET: " + std::string(r.r->str, r.r->len));
    return false;
  }
  record(Fault::None, "");
  return true;  // OK, or nil when the key already existed (content-addressed: same value)
}

void RemoteTier::writer_loop() {
  for (;;) {
    std::pair<std::string, std::string> item;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    if (write_now(item.first, item.second)) {
      writes_++;
    } else {
      write_failures_++;
    }
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      writing_ = false;
    }
    idle_cv_.notify_all();
    if (stopping_) {
      // On shutdown, give up on the rest if the server is not answering.
      std::lock_guard<std::mutex> lock(breaker_mu_);
      if (consecutive_failures_ > 0) {
        std::lock_guard<std::mutex> qlock(queue_mu_);
        write_failures_ += queue_.size();
        queue_.clear();
      }
    }
  }
}

void RemoteTier::flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

namespace {

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
      if (depth > 2) return false;
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

}  // namespace

std::optional<RemoteReply> RemoteTier::command(const std::vector<std::string>& argv, int timeout_ms,
                                               std::string* error) {
  if (argv.empty() || !allow_attempt()) return std::nullopt;
  NoSigpipe no_sigpipe;
  std::unique_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_pid_ != long(getpid())) {
      pool_.clear();  // the parent's: closing this process's copies leaves its own open
      pool_pid_ = long(getpid());
    }
    if (!pool_.empty()) {
      conn = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  std::string why;
  if (!conn) conn = connect(&why);
  if (!conn) {
    record(Fault::Error, "connect: " + why);
    return std::nullopt;
  }
  const int ms =
      timeout_ms > 0 ? std::min(timeout_ms, config_.op_timeout_ms) : config_.op_timeout_ms;
  redisSetTimeout(conn->ctx, timeval{ms / 1000, (ms % 1000) * 1000});
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r;
  r.r = static_cast<redisReply*>(
      redisCommandArgv(conn->ctx, int(args.size()), args.data(), lens.data()));
  if (!r.r) {
    const Fault f = is_timeout(conn->ctx) ? Fault::Timeout : Fault::Error;
    record(f, argv[0] + ": " + conn->ctx->errstr);
    return std::nullopt;  // a failed context cannot be reused: dropped
  }
  record(Fault::None, "");
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.size() < 8) pool_.push_back(std::move(conn));
  }
  if (r.r->type == REDIS_REPLY_ERROR) {
    if (error) error->assign(r.r->str, r.r->len);
    rejected_++;
    return std::nullopt;
  }
  RemoteReply out;
  if (!flatten(r.r, &out)) {
    rejected_++;
    if (error) *error = "unexpected reply type";
    return std::nullopt;
  }
  return out;
}

bool RemoteTier::put_now(const Entry& e) {
  if (config_.read_only) return false;
  const std::string value = encode_envelope(e);
  std::string error;
  const auto r = command(
      {"SET", config_.prefix + e.key, value, "EX", std::to_string(config_.ttl_seconds)}, 0, &error);
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
struct RemoteTier::Connection {};
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
  std::lock_guard<std::mutex> lock(breaker_mu_);
  s.breaker_open = consecutive_failures_ >= config_.failures_to_open;
  return s;
}

}  // namespace kjit
