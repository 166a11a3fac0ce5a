// The counters table (store/counter_table.h) on its own: sums over every process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>

#include "store/counter_table.h"
#include "store/index_db.h"
#include "support/test_support.h"

namespace {

using kjit::CounterTable;
using kjit::IndexDb;
using kjit::test::TempDir;

std::map<std::string, int64_t> as_map(const CounterTable::Deltas& d) {
  return std::map<std::string, int64_t>(d.begin(), d.end());
}

TEST(CounterTable, AddsSumPerName) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  CounterTable counters(db);
  EXPECT_TRUE(counters.read().empty());
  counters.add({{"disk_hits", 2}, {"misses", 1}});
  counters.add({{"disk_hits", 3}});
  counters.add(CounterTable::Deltas{});
  EXPECT_EQ(as_map(counters.read()),
            (std::map<std::string, int64_t>{{"disk_hits", 5}, {"misses", 1}}));
}

TEST(CounterTable, WhatIsTakenUnderTheLockIsAddedInTheSameTransaction) {
  TempDir dir;
  IndexDb db(dir.path(), false, true);
  CounterTable counters(db);
  int calls = 0;
  counters.add([&] {
    ++calls;
    return CounterTable::Deltas{{"compiles", 4}};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(as_map(counters.read()), (std::map<std::string, int64_t>{{"compiles", 4}}));
}

TEST(CounterTable, ProcessesAddToOneTotal) {
  TempDir dir;
  { IndexDb create(dir.path(), false, true); }
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      IndexDb db(dir.path(), false, true);
      CounterTable counters(db);
      for (int j = 0; j < 25; ++j) counters.add({{"stores", 1}});
      _exit(0);
    }
  }
  for (int i = 0; i < 4; ++i) {
    int status = 0;
    ASSERT_GT(wait(&status), 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  IndexDb db(dir.path(), false, true);
  EXPECT_EQ(as_map(CounterTable(db).read()), (std::map<std::string, int64_t>{{"stores", 100}}));
}

TEST(CounterTable, AReadOnlyIndexAddsNothing) {
  TempDir dir;
  {
    IndexDb db(dir.path(), false, true);
    CounterTable(db).add({{"misses", 1}});
  }
  IndexDb db(dir.path(), /*read_only=*/true, true);
  CounterTable counters(db);
  bool taken = false;
  counters.add({{"misses", 1}});
  counters.add([&] {
    taken = true;
    return CounterTable::Deltas{{"misses", 1}};
  });
  EXPECT_FALSE(taken) << "nothing is taken that could not be added";
  EXPECT_EQ(as_map(counters.read()), (std::map<std::string, int64_t>{{"misses", 1}}));
}

}  // namespace
