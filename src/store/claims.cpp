#include "store/claims.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "util/error.h"
#include "util/fs.h"

namespace kjit {
namespace {

// A claim from a process we cannot check (another host) is taken over after this long.
constexpr int64_t kForeignClaimLeaseSeconds = 600;

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Start time of a live process (clock ticks since boot), "" if it does not exist or has
// exited (a zombie not yet reaped by its parent compiles nothing any more).
std::string process_start_time(long pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return "";
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 > stat->size()) return "";
  std::istringstream in(stat->substr(paren + 2));
  std::string field;
  // Fields after the command: state(3) ... starttime is field 22, i.e. the 20th here.
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 3 && (field == "Z" || field == "X" || field == "x")) return "";
    if (i == 22) return field;
  }
  return "";
}

// Claims this process holds and is compiling for ("owner\nkey").
std::mutex g_live_mu;
std::set<std::string> g_live_claims;

}  // namespace

void live_claim(const std::string& owner, const std::string& key, bool live) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  if (live) {
    g_live_claims.insert(owner + "\n" + key);
  } else {
    g_live_claims.erase(owner + "\n" + key);
  }
}

void forget_live_claims(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (auto it = g_live_claims.begin(); it != g_live_claims.end();) {
    const size_t nl = it->find('\n');
    it = it->compare(nl + 1, std::string::npos, key) == 0 ? g_live_claims.erase(it) : std::next(it);
  }
}

// A claim holds while its owner lives and renews its lease (every kClaimRenewSeconds while
// it compiles). Owner strings are "host|pid|starttime|handle". On this host the owner is
// dead when the process is gone, is a zombie, or is another process with the same pid; a
// live owner that stopped renewing (it could not write the database) lost the claim.
bool owner_is_dead(const std::string& owner, const std::string& key, int64_t started, int64_t now) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(owner);
  while (std::getline(in, part, '|')) parts.push_back(part);
  if (parts.size() < 3) return true;
  if (parts[0] != hostname()) return now - started > kForeignClaimLeaseSeconds;
  if (parts[1].empty() || parts[2].empty()) return true;
  if (now - started > kClaimLeaseSeconds) return true;
  const long pid = std::strtol(parts[1].c_str(), nullptr, 10);
  if (pid == static_cast<long>(getpid())) {
    std::lock_guard<std::mutex> lock(g_live_mu);
    return g_live_claims.count(owner + "\n" + key) == 0;
  }
  return process_start_time(pid) != parts[2];
}

Claim Claims::try_claim(const std::string& key, const std::string& owner, const Stored& stored,
                        bool failures_answer) {
  Claim out;
  if (db_.read_only()) {
    out.state = Claim::State::Claimed;  // cannot coordinate; compile without a claim
    return out;
  }
  const int64_t now = unix_time();
  IndexDb::Lease c = db_.acquire();
  Txn txn(*c, true);
  if (stored(*c, key)) {
    txn.commit();
    out.state = Claim::State::Present;
    return out;
  }
  sqlite3_stmt* s = c->stmt("SELECT owner, started, failure FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  bool take = true;
  if (c->step(s, "read claim") == SQLITE_ROW) {
    const std::string holder = col_text(s, 0);
    const int64_t started = sqlite3_column_int64(s, 1);
    const bool failed = sqlite3_column_type(s, 2) != SQLITE_NULL;
    if (failed && failures_answer && now - started <= kFailedClaimSeconds && now >= started) {
      // A recent compile error is the answer for everyone who asks: don't compile again.
      take = false;
      out.state = Claim::State::Failed;
      out.owner = holder;
      out.failure = col_text(s, 2);
    } else if (!failed && holder != owner && !owner_is_dead(holder, key, started, now)) {
      take = false;  // a live claim: wait for it
      out.state = Claim::State::Busy;
      out.owner = holder;
    }
  }
  sqlite3_reset(s);
  if (take) {
    s = c->stmt(
        "INSERT OR REPLACE INTO claims(key, owner, started, failure) "
        "VALUES(?1, ?2, ?3, NULL)");
    sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
    sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now);
    c->step(s, "write claim");
    // Failed claims that expired are no longer anyone's answer.
    s = c->stmt("DELETE FROM claims WHERE failure IS NOT NULL AND started < ?1");
    sqlite3_bind_int64(s, 1, now - kFailedClaimSeconds);
    c->step(s, "expire claims");
    out.state = Claim::State::Claimed;
  }
  txn.commit();
  if (out.state == Claim::State::Claimed) live_claim(owner, key, true);
  return out;
}

void Claims::renew(const std::string& key, const std::string& owner) {
  if (db_.read_only()) return;
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s =
      c->stmt("UPDATE claims SET started = ?3 WHERE key = ?1 AND owner = ?2 AND failure IS NULL");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, unix_time());
  c->step(s, "renew claim");
}

Claim Claims::read(const std::string& key) {
  Claim out;  // State::None: nobody holds it
  const int64_t now = unix_time();
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s = c->stmt("SELECT owner, started, failure FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  if (c->step(s, "read claim") == SQLITE_ROW) {
    out.owner = col_text(s, 0);
    const int64_t started = sqlite3_column_int64(s, 1);
    if (sqlite3_column_type(s, 2) != SQLITE_NULL) {
      if (now - started <= kFailedClaimSeconds) {  // an expired failure answers nobody
        out.state = Claim::State::Failed;
        out.failure = col_text(s, 2);
      }
    } else if (!owner_is_dead(out.owner, key, started, now)) {
      out.state = Claim::State::Busy;
    }
  }
  sqlite3_reset(s);
  return out;
}

void Claims::release(const std::string& key, const std::string& owner) {
  live_claim(owner, key, false);  // even if the row cannot be deleted, it is not live
  if (db_.read_only()) return;
  IndexDb::Lease c = db_.acquire();
  sqlite3_stmt* s = c->stmt("DELETE FROM claims WHERE key = ?1 AND owner = ?2");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  c->step(s, "release claim");
}

void Claims::fail(const std::string& key, const std::string& owner, const std::string& failure) {
  live_claim(owner, key, false);
  if (db_.read_only()) return;
  IndexDb::Lease c = db_.acquire();
  // `started` becomes the time of the failure, from which it answers for a while.
  sqlite3_stmt* s =
      c->stmt("UPDATE claims SET failure = ?3, started = ?4 WHERE key = ?1 AND owner = ?2");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 2, owner.data(), int(owner.size()), SQLITE_STATIC);
  sqlite3_bind_text(s, 3, failure.data(), int(failure.size()), SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, unix_time());
  c->step(s, "record failed compile");
}

void Claims::settle_locked(SqliteConn& c, const std::string& key) {
  sqlite3_stmt* s = c.stmt("DELETE FROM claims WHERE key = ?1");
  sqlite3_bind_text(s, 1, key.data(), int(key.size()), SQLITE_STATIC);
  c.step(s, "release claim");
}

void Claims::clear() {
  if (db_.read_only())
    kjit::fail(KJIT_ERROR_READ_ONLY, "cache database " + db_.path() + " is read-only");
  IndexDb::Lease c = db_.acquire();
  c->run("DELETE FROM claims", "clear claims");
}

}  // namespace kjit
