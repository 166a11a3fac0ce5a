// Reliability of the shared cache: compile-once under a multi-process stampede (also with
// the compiling process SIGKILLed, and for a compile error), waits that can be cancelled,
// abandoned claims, concurrent first opens.
#include <gtest/gtest.h>

#include "support/reliability.h"

namespace {

using namespace kjit::test::reliability;

// ---- 1-3: compile once under a stampede ----------------------------------------------------

constexpr int kProcs = 8;

TEST(Stampede, EightProcessesCompileOneCubKernelOnce) {
  TempDir dir;  // fresh: the workers also race to create the database
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK) << ref.message;
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, kProcs, barrier);
  ASSERT_TRUE(barrier.release(kProcs, 120000));
  finish(kids, now_ms() + 300000);
  unsigned long long compiles = 0, waits = 0;
  for (const Child& k : kids) {
    ASSERT_TRUE(exited_ok(k)) << k.output;
    EXPECT_EQ(number(k.output, "status"), 0u) << k.output;
    EXPECT_EQ(field(k.output, "digest"), ref.digest()) << "identical bytes everywhere";
    EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_OK)) << k.output;
    compiles += number(k.output, "compiles");
    waits += number(k.output, "waits");
  }
  EXPECT_EQ(compiles, 1u) << "exactly one NVRTC compile across all processes";
  std::printf("stampede: %d processes, %llu compile(s), %llu waited\n", kProcs, compiles, waits);
  EXPECT_EQ(count_quarantined(dir.path()), 0);
}

TEST(Stampede, OwnerKilledMidCompileIsTakenOver) {
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK) << ref.message;
  // The owner is stopped before it is killed, so it is certain it had not stored the entry;
  // if it had (it finished between being seen and being stopped) the round is repeated.
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    const std::string db = dir.file("kjit.db");
    Barrier barrier;
    std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, kProcs, barrier);
    ASSERT_TRUE(barrier.release(kProcs, 120000));
    pid_t owner = 0;
    const double deadline = now_ms() + 120000;
    while (now_ms() < deadline && !(owner = claim_owner(db))) usleep(2000);
    ASSERT_NE(owner, 0) << "no process claimed the key";
    auto victim =
        std::find_if(kids.begin(), kids.end(), [&](const Child& k) { return k.pid == owner; });
    ASSERT_NE(victim, kids.end()) << "claim owner " << owner << " is not a worker";
    ASSERT_EQ(kill(owner, SIGSTOP), 0);
    int st = 0;
    ASSERT_EQ(waitpid(owner, &st, WUNTRACED), owner);
    ASSERT_TRUE(WIFSTOPPED(st));
    const bool stored = Db(db).query("SELECT count(*) FROM entries") != "0\n";
    if (stored) {
      kill(owner, SIGCONT);
      finish(kids, now_ms() + 300000);
      std::printf("owner finished before it was stopped; repeating\n");
      continue;
    }
    ASSERT_EQ(kill(owner, SIGKILL), 0);
    waitpid(owner, &victim->status, 0);
    victim->reaped = true;
    victim->killed = true;
    close(victim->out);
    victim->out = -1;
    const double killed_at = now_ms();
    pid_t next = 0;
    while (now_ms() < killed_at + 120000 && ((next = claim_owner(db)) == owner || next == 0) &&
           Db(db).query("SELECT count(*) FROM entries") == "0\n") {
      usleep(2000);
    }
    const double takeover_ms = now_ms() - killed_at;
    finish(kids, now_ms() + 300000);
    unsigned long long compiles = 0;
    int survivors = 0;
    for (const Child& k : kids) {
      if (k.pid == owner) continue;
      ++survivors;
      ASSERT_TRUE(exited_ok(k)) << k.output;
      EXPECT_EQ(number(k.output, "status"), 0u) << k.output;
      EXPECT_EQ(field(k.output, "digest"), ref.digest());
      compiles += number(k.output, "compiles");
    }
    EXPECT_EQ(survivors, kProcs - 1);
    EXPECT_EQ(compiles, 1u) << "one survivor took the claim over and compiled once";
    std::printf(
        "owner killed mid-compile: claim taken over after %.0f ms, %d survivors, "
        "%llu compile(s)\n",
        takeover_ms, survivors, compiles);
    return;
  }
  FAIL() << "the owner finished before it could be stopped in 3 rounds";
}

TEST(Stampede, CompileErrorIsDeliveredToEveryWaiter) {
  TempDir dir;
  const Out& ref = reference("broken");
  ASSERT_EQ(ref.status, KJIT_ERROR_COMPILE);
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "broken"}, kProcs, barrier);
  ASSERT_TRUE(barrier.release(kProcs, 120000));
  finish(kids, now_ms() + 300000);
  unsigned long long compiles = 0;
  for (const Child& k : kids) {
    ASSERT_TRUE(exited_ok(k)) << k.output;
    EXPECT_EQ(number(k.output, "status"), unsigned(KJIT_ERROR_COMPILE)) << k.output;
    EXPECT_EQ(number(k.output, "haslog"), 1u) << "every process gets NVRTC's log: " << k.output;
    compiles += number(k.output, "compiles");
  }
  EXPECT_EQ(compiles, 1u) << "the failing compile ran once, not once per process";
  std::printf("compile error: %d processes, %llu compile(s)\n", kProcs, compiles);
}

TEST(Stampede, WaitingForAnotherProcessIsCancellable) {
  TempDir dir;
  const std::string db = dir.file("kjit.db");
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, 1, barrier);
  ASSERT_TRUE(barrier.release(1, 120000));
  pid_t owner = 0;
  double deadline = now_ms() + 120000;
  while (now_ms() < deadline && !(owner = claim_owner(db))) usleep(2000);
  ASSERT_EQ(owner, kids[0].pid);
  ASSERT_EQ(kill(owner, SIGSTOP), 0);  // it holds the claim and makes no progress
  kjit_cache* c = open_cache(dir.path());
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(c, 1, &comp), KJIT_OK);
  const Program p = program("cub");
  kjit_options* o = make_options(p);
  kjit_future* f = nullptr;
  ASSERT_EQ(kjit_compile_async(comp, p.source.c_str(), o, &f), KJIT_OK);
  deadline = now_ms() + 120000;
  while (now_ms() < deadline && stats_of(c).waits == 0) usleep(2000);
  EXPECT_EQ(stats_of(c).waits, 1u) << "the compile did not wait for the owner";
  ASSERT_EQ(kjit_future_cancel(f), KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_future_wait(f, 120000, &b), KJIT_ERROR_CANCELLED) << kjit_last_error();
  EXPECT_EQ(stats_of(c).compiles, 0u);
  kjit_binary_destroy(b);
  kjit_future_destroy(f);
  kill(owner, SIGCONT);
  finish(kids, now_ms() + 300000);
  ASSERT_TRUE(exited_ok(kids[0])) << kids[0].output;
  EXPECT_EQ(number(kids[0].output, "status"), 0u);
  // The cancelled waiter left nothing behind: the next request hits.
  EXPECT_EQ(compile(c, p).tier, KJIT_TIER_DISK);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  kjit_cache_close(c);
}

std::string start_time_of(pid_t pid) {
  const std::string stat = file_bytes("/proc/" + std::to_string(pid) + "/stat");
  size_t pos = stat.rfind(')');
  for (int field = 2; field < 22 && pos != std::string::npos; ++field)
    pos = stat.find(' ', pos + 1);
  return pos == std::string::npos ? "" : stat.substr(pos + 1, stat.find(' ', pos + 1) - pos - 1);
}

// Compiles `kind` asynchronously, giving up (and failing) after `limit_ms`.
Out compile_within(kjit_cache* c, const std::string& kind, int64_t limit_ms) {
  kjit_compiler* comp = nullptr;
  kjit_compiler_create(c, 1, &comp);
  const Program p = program(kind);
  kjit_options* o = make_options(p);
  kjit_future* f = nullptr;
  kjit_compile_async(comp, p.source.c_str(), o, &f);
  kjit_binary* b = nullptr;
  kjit_status st = kjit_future_wait(f, limit_ms, &b);
  if (st == KJIT_ERROR_TIMEOUT) {
    kjit_future_cancel(f);
    kjit_future_wait(f, -1, &b);
  }
  Out r = read_binary(st, b);
  kjit_binary_destroy(b);
  kjit_future_destroy(f);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  return r;
}

TEST(Stampede, AbandonedClaimsOfLiveProcessesAreTakenOver) {
  TempDir dir;
  const Out& ref = reference("saxpy");
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  stats_of(c);  // the index is opened when first needed: now, before claims are written into it
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  auto claim = [&](pid_t pid, int64_t age) {
    Db d(dir.file("kjit.db"));
    const std::string owner =
        std::string(host) + "|" + std::to_string(pid) + "|" + start_time_of(pid) + "|0xabandoned";
    ASSERT_TRUE(d.exec("INSERT OR REPLACE INTO claims(key, owner, started, failure) VALUES('" +
                       ref.key + "', '" + owner + "', CAST(strftime('%s','now') AS INTEGER) - " +
                       std::to_string(age) + ", NULL)"));
  };
  // A live process that stopped renewing its claim (it could not write, or hangs).
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  claim(sleeper, 40);
  Out r = compile_within(c, "saxpy", 60000);
  EXPECT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 1u);
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  // This very process, through a handle that is gone (its release failed): taken over at
  // once, without waiting for the lease.
  ASSERT_EQ(kjit_cache_remove(c, ref.key.c_str()), KJIT_OK);
  claim(getpid(), 0);
  r = compile_within(c, "saxpy", 20000);
  EXPECT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 2u);
  kjit_cache_close(c);
}

TEST(Stampede, ConcurrentFirstOpensNeverQuarantineAFreshDatabase) {
  // Every round: 8 processes create and open the same new database at the same moment.
  const int rounds = 6;
  int opened = 0;
  for (int round = 0; round < rounds; ++round) {
    TempDir dir;
    Barrier barrier;
    std::vector<Child> kids = start_workers({"open", dir.path()}, kProcs, barrier);
    ASSERT_TRUE(barrier.release(kProcs, 120000));
    finish(kids, now_ms() + 120000);
    for (const Child& k : kids) {
      ASSERT_TRUE(exited_ok(k)) << k.output;
      EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_OK)) << k.output;
      EXPECT_EQ(number(k.output, "corrupt"), 0u) << k.output;
      ++opened;
    }
    EXPECT_EQ(count_quarantined(dir.path()), 0) << "a fresh database was moved aside";
    EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
  }
  std::printf("concurrent first opens: %d\n", opened);
}

}  // namespace
