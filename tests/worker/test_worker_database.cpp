// The compile worker keeps the cache's index open while it lives, through the store: a new
// process is then not the database's first connection, and the worker, the last to close
// it, checkpoints the log when it leaves.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "store/disk_store.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "worker/worker_fixture.h"

using kjit::test::TempDir;
using kjit::test::Worker;

namespace {

// The path that descriptor `fd` of process `pid` names ("" when none).
std::string fd_target(int64_t pid, const std::string& fd) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + fd;
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// Whether process `pid` has `path` open, waiting for it up to `seconds`.
bool holds_open(int64_t pid, const std::string& path, double seconds) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  do {
    if (DIR* d = ::opendir(fds.c_str())) {
      bool found = false;
      while (dirent* e = ::readdir(d)) found = found || fd_target(pid, e->d_name) == path;
      ::closedir(d);
      if (found) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

bool process_gone(int64_t pid, double seconds) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (::kill(pid_t(pid), 0) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

off_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST_F(Worker, HoldsTheCacheIndexOpenFollowsAReplacedOneAndCheckpointsWhenItLeaves) {
  TempDir dir;
  const std::string db = kjit::resolve_path(kjit::join_path(dir.path(), "kjit.db"));
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(kjit::CompileMode::Worker);
  const kjit::Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90("saxpy.cu"));
  ASSERT_EQ(o.status, KJIT_OK) << o.message;
  ASSERT_GT(size_of(db), 0) << "the compile's result was not stored";
  const int64_t pid = worker_pid(cache.get());
  ASSERT_GT(pid, 0);
  const kjit::WorkerAddress here = address(cache.get());
  EXPECT_TRUE(holds_open(pid, db, 5)) << "the worker does not hold " << db << " open";

  // The database is moved aside and a new one made: the worker follows it.
  cache.reset();
  ASSERT_EQ(std::rename(db.c_str(), (db + ".old").c_str()), 0);
  std::rename((db + "-wal").c_str(), (db + ".old-wal").c_str());
  std::rename((db + "-shm").c_str(), (db + ".old-shm").c_str());
  {
    auto fresh = open_cache(dir.path());
    ASSERT_NE(fresh->disk(), nullptr);  // creates the new index
    fresh->insert(*o.entry);            // and writes to its log
    EXPECT_TRUE(holds_open(pid, db, 5)) << "the worker did not open the new " << db;
    EXPECT_GT(size_of(db + "-wal"), 0) << "nothing in the log for the worker to checkpoint";
  }
  // This process's connections are closed; the worker's is the last. Once its socket file
  // is gone it leaves, and as the last connection it checkpoints and empties the log.
  ASSERT_EQ(::unlink(kjit::join_path(here.directory, here.name + ".sock").c_str()), 0);
  ASSERT_TRUE(process_gone(pid, 10)) << "the worker did not leave";
  EXPECT_EQ(size_of(db + "-wal"), 0) << "the worker left the log unchecked";
  // What the log held is in the database.
  auto after = open_cache(dir.path());
  const std::vector<std::string> keys = after->disk()->keys();
  EXPECT_NE(std::find(keys.begin(), keys.end(), o.entry->key), keys.end());
}

}  // namespace
