// The fixture of the compile worker's tests (tests/worker/): the built kjit-worker
// (KJIT_TEST_WORKER), private worker directories under a temporary TMPDIR, one worker per
// address, and no compile settings from the environment.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "key/request.h"
#include "key/toolchain.h"
#include "store/cache.h"
#include "support/test_support.h"
#include "worker/client.h"

namespace kjit::test {

class Worker : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* t = std::getenv("TMPDIR");
    had_tmpdir_ = t != nullptr;
    if (t) old_tmpdir_ = t;
    setenv("KJIT_WORKER_IDLE_S", "20", 1);
    setenv("KJIT_WORKER", KJIT_TEST_WORKER, 1);
    setenv("TMPDIR", tmp_.path().c_str(), 1);  // private worker directories live here
    unsetenv("KJIT_COMPILE_MODE");
    unsetenv("KJIT_COMPILE_TIMEOUT_S");
    unsetenv("KJIT_COMPILE_MEMORY_MB");
    unsetenv("KJIT_CACHE_DIR");
    setenv("KJIT_WORKER_PROCESSES", "1", 1);  // one worker per address unless a test says
  }
  void TearDown() override {
    if (had_tmpdir_) {
      setenv("TMPDIR", old_tmpdir_.c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
  }

  std::unique_ptr<kjit::Cache> open_cache(const std::string& dir, bool read_only = false) {
    kjit::CacheConfig c;
    c.directory = dir;
    c.read_only = read_only;
    return std::make_unique<kjit::Cache>(c);
  }

  static kjit::CompileOptions sm90(const char* name = "kernel.cu") {
    kjit::CompileOptions o;
    o.target = "sm_90";
    o.name = name;
    return o;
  }

  // The running worker for `cache`, or pid 0.
  static int64_t worker_pid(kjit::Cache* cache) {
    std::string why;
    auto st = kjit::worker_status_for(cache, &why);
    return st ? st->pid : 0;
  }

  static kjit::WorkerAddress address(kjit::Cache* cache) {
    std::string why;
    kjit::WorkerAddress a =
        kjit::worker_address(cache, kjit::toolchain_id(kjit::facts_of(cache)), &why);
    EXPECT_FALSE(a.directory.empty()) << why;
    return a;
  }

  TempDir tmp_;
  bool had_tmpdir_ = false;
  std::string old_tmpdir_;
};

}  // namespace kjit::test
