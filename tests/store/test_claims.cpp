// Claims (store/claims.h) on their own: single flight across processes as rows of the index.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "store/claims.h"
#include "store/index_db.h"
#include "support/db.h"
#include "support/test_support.h"

namespace {

using kjit::Claim;
using kjit::Claims;
using kjit::IndexDb;
using kjit::test::TempDir;

std::string hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

// An owner string of this process (host|pid|start|handle); the start time is not checked
// for this process, whose claims are live while it records them (live_claim).
std::string me(const std::string& handle = "test") {
  return hostname() + "|" + std::to_string(getpid()) + "|1|" + handle;
}

const Claims::Stored kNotStored = [](kjit::SqliteConn&, const std::string&) { return false; };
const Claims::Stored kStored = [](kjit::SqliteConn&, const std::string&) { return true; };

const std::string kKey(64, 'a');

TEST(Claims, NobodyHoldsAKeyUntilItIsClaimed) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
  EXPECT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
  const Claim held = claims.read(kKey);
  EXPECT_EQ(held.state, Claim::State::Busy);
  EXPECT_EQ(held.owner, me());
  EXPECT_EQ(claims.try_claim(kKey, me("other handle"), kNotStored).state, Claim::State::Busy);
  claims.release(kKey, me());
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
}

TEST(Claims, AStoredEntryIsPresentAndNotClaimed) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  EXPECT_EQ(claims.try_claim(kKey, me(), kStored).state, Claim::State::Present);
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
}

TEST(Claims, AFailureAnswersEveryoneForAWhile) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  ASSERT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
  claims.fail(kKey, me(), "{\"log\":\"error\"}");
  const Claim failed = claims.try_claim(kKey, me("newcomer"), kNotStored);
  EXPECT_EQ(failed.state, Claim::State::Failed);
  EXPECT_EQ(failed.failure, "{\"log\":\"error\"}");
  EXPECT_EQ(claims.read(kKey).state, Claim::State::Failed);
  // A caller for whom a failure is no answer takes the key over.
  EXPECT_EQ(claims.try_claim(kKey, me("probe"), kNotStored, /*failures_answer=*/false).state,
            Claim::State::Claimed);
  // An old failure answers nobody.
  claims.fail(kKey, me("probe"), "{}");
  ASSERT_TRUE(kjit::test::Db(db.path()).exec("UPDATE claims SET started = started - 3600"));
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
  EXPECT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
}

TEST(Claims, TheClaimOfADeadProcessIsTakenOver) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const std::string dead = hostname() + "|" + std::to_string(child) + "|12345|gone";
  ASSERT_TRUE(kjit::test::Db(db.path()).exec(
      "INSERT INTO claims(key, owner, started, failure) VALUES('" + kKey + "', '" + dead +
      "', CAST(strftime('%s','now') AS INTEGER), NULL)"));
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None) << "its owner is gone";
  EXPECT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
}

TEST(Claims, AClaimNotRenewedForItsLeaseIsTakenOver) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  ASSERT_EQ(claims.try_claim(kKey, me("stalled"), kNotStored).state, Claim::State::Claimed);
  kjit::test::Db raw(db.path());
  ASSERT_TRUE(raw.exec("UPDATE claims SET started = started - " +
                       std::to_string(kjit::kClaimLeaseSeconds + 5)));
  claims.renew(kKey, me("stalled"));  // renewed: its lease starts again
  EXPECT_EQ(claims.read(kKey).state, Claim::State::Busy);
  ASSERT_TRUE(raw.exec("UPDATE claims SET started = started - " +
                       std::to_string(kjit::kClaimLeaseSeconds + 5)));
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
  EXPECT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
  claims.release(kKey, me("stalled"));  // no longer its claim: nothing happens
  EXPECT_EQ(claims.read(kKey).owner, me());
}

TEST(Claims, SettlingInTheStoringTransactionReleasesTheClaim) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  ASSERT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
  {
    IndexDb::Lease c = db.acquire();
    kjit::Txn txn(*c, true);
    Claims::settle_locked(*c, kKey);
    txn.commit();
  }
  Claims::settled(kKey);
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
}

TEST(Claims, ClearForgetsEveryClaim) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  Claims claims(db);
  ASSERT_EQ(claims.try_claim(kKey, me(), kNotStored).state, Claim::State::Claimed);
  claims.clear();
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
}

TEST(Claims, AReadOnlyIndexCannotCoordinate) {
  TempDir dir;
  { IndexDb create(dir.path(), false, true); }
  IndexDb db(dir.path(), /*read_only=*/true, true);
  Claims claims(db);
  EXPECT_EQ(claims.try_claim(kKey, me(), kStored).state, Claim::State::Claimed)
      << "compiles without a claim";
  EXPECT_EQ(claims.read(kKey).state, Claim::State::None);
  claims.release(kKey, me());
  EXPECT_THROW(claims.clear(), kjit::Error);
}

}  // namespace
