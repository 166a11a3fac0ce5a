// Single flight across processes: what a waiter gets from a failed compile.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/claims.h"
#include "store/entry.h"
#include "store/index_db.h"
#include "support/cache_api.h"
#include "support/test_support.h"

namespace {

using namespace kjit::test::capi;

// A process that waited for another's failed compile gets the failure as the compiling
// process had it: the log, and the key the compile gave its result (kjit_binary_key and
// kjit_compute_key of a failing program must not depend on who compiled it).
TEST(Flight, AWaiterGetsAFailedCompilesLogAndKey) {
  TempDir dir;
  const std::string flight(64, 'f'), result_key(64, 'e'), go = dir.file("go");
  const pid_t child = fork();
  if (child == 0) {
    kjit::CacheConfig cfg;
    cfg.directory = dir.path();
    kjit::Cache leader(cfg);
    leader.get_or_compile(flight, [&] {
      for (int i = 0; i < 2000 && access(go.c_str(), F_OK) != 0; ++i) usleep(5000);
      auto e = std::make_shared<kjit::Entry>();
      e->key = result_key;
      e->log = "error: boom";
      return kjit::Outcome{KJIT_ERROR_COMPILE, "compile failed", e, KJIT_TIER_COMPILED};
    });
    _exit(0);
  }
  {
    kjit::IndexDb index(dir.path(), false, true);
    kjit::Claims store(index);
    for (int i = 0; i < 2000 && store.read(flight).state != kjit::Claim::State::Busy; ++i) {
      usleep(5000);
    }
    ASSERT_EQ(store.read(flight).state, kjit::Claim::State::Busy) << "the child holds it";
  }
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  kjit::Cache waiter(cfg);
  bool compiled_here = false;
  std::thread release([&] {
    usleep(100000);
    std::ofstream(go) << "go";
  });
  const kjit::Outcome o = waiter.get_or_compile(flight, [&] {
    compiled_here = true;
    return kjit::Outcome{KJIT_ERROR_INTERNAL, "must not compile", nullptr, KJIT_TIER_COMPILED};
  });
  release.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(compiled_here) << "the failure is deterministic: the waiter takes it";
  EXPECT_EQ(o.status, KJIT_ERROR_COMPILE);
  ASSERT_TRUE(o.entry);
  EXPECT_EQ(o.entry->log, "error: boom");
  EXPECT_EQ(o.entry->key, result_key);
}

}  // namespace
