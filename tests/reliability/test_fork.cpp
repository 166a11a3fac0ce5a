// Reliability of the shared cache: fork() after opening.
#include <gtest/gtest.h>

#include "support/reliability.h"

namespace {

using namespace kjit::test::reliability;

// ---- 5: fork() after opening ---------------------------------------------------------------

bool read_byte(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  char b;
  return poll(&p, 1, timeout_ms) == 1 && read(fd, &b, 1) == 1;
}

TEST(Fork, ChildReopensWithItsOwnLocksAndParentIsUnaffected) {
  TempDir dir;
  const Out& ref = reference("saxpy");
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(compile(c, program("saxpy")).status, KJIT_OK);
  internal(c).insert(synthetic("before-fork", 3000));
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  ASSERT_EQ(compile(c, program("saxpy")).tier, KJIT_TIER_DISK);  // a pooled connection read
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    kjit_cache_clear_memory(c);
    const Out hit = compile(c, program("saxpy"));  // a hit needs no NVRTC
    if (hit.status != KJIT_OK || hit.tier != KJIT_TIER_DISK || hit.digest() != ref.digest())
      code = 10;
    if (get_synthetic(c, "before-fork", 3000) != Got::Right) code = 11;
    try {
      internal(c).insert(synthetic("child-1", 4000));
    } catch (const std::exception&) {
      code = 12;
    }
    if (write(up[1], "r", 1) != 1) code = 13;
    if (!read_byte(down[0], 120000)) code = 14;  // the parent has closed its cache now
    try {
      internal(c).insert(synthetic("child-2", 5000));
    } catch (const std::exception&) {
      code = 15;
    }
    kjit_cache_close(c);
    _exit(code);
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(read_byte(up[0], 120000));
  // The parent keeps working while the child has the database open...
  EXPECT_EQ(get_synthetic(c, "child-1", 4000), Got::Right);
  internal(c).insert(synthetic("parent-1", 2000));
  // ...and closing its last connection must not checkpoint away the WAL the child is still
  // using: that needs the child to hold real locks of its own.
  kjit_cache_close(c);
  EXPECT_TRUE(exists(dir.file("kjit.db-wal"))) << "the WAL was removed under the child";
  ASSERT_EQ(write(down[1], "g", 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child exit " << st;
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(get_synthetic(c, "before-fork", 3000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "parent-1", 2000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "child-1", 4000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "child-2", 5000), Got::Right) << "the child's last write was lost";
  EXPECT_EQ(compile(c, program("saxpy")).tier, KJIT_TIER_DISK);
  kjit_cache_close(c);
  EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
}

TEST(Fork, ChildClaimsUnderItsOwnProcessIdentity) {
  TempDir dir;
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK);
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(compile(c, program("saxpy")).status, KJIT_OK);
  const pid_t pid = fork();
  if (pid == 0) {
    const Out r = compile(c, program("cub"));
    _exit(r.status == KJIT_OK && r.digest() == ref.digest() ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  const std::string db = dir.file("kjit.db");
  pid_t owner = 0;
  const double deadline = now_ms() + 120000;
  while (now_ms() < deadline && !(owner = claim_owner(db)) &&
         Db(db).query("SELECT count(*) FROM entries") == "1\n") {
    usleep(1000);
  }
  if (owner) {
    EXPECT_EQ(owner, pid) << "the child claimed the key under the parent's identity";
  }
  // The parent asks for the key the child is compiling: it waits and hits.
  const Out r = compile(c, program("cub"));
  EXPECT_EQ(r.status, KJIT_OK);
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 1u) << "the parent compiled what its child was compiling";
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  kjit_cache_close(c);
}

}  // namespace
