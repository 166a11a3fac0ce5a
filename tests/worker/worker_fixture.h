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

// Tens of millions of constant-evaluation steps: about 10 s of NVRTC on a CPU core.
inline const char* const kSlowSource = R"(
constexpr unsigned long long spin(unsigned long long n) {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < n; ++i) s = s * 6364136223846793005ull + i;
  return s;
}
template <int I> struct S { static constexpr unsigned long long v = spin(1000000ull + I); };
template <int... I> struct L { static constexpr unsigned long long v = (S<I>::v ^ ...); };
extern "C" __global__ void k(unsigned long long* o) {
  *o = L<1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20>::v;
}
)";

// kSlowSource with `steps` (1000000 in it) evaluation steps per term: 150000 is a second or
// two of NVRTC. The variant makes another program (another key).
inline std::string slow_source(const char* steps, int variant = 0) {
  std::string text = kSlowSource;
  text.replace(text.find("1000000ull"), 10, std::string(steps) + "ull");
  return text + "// variant " + std::to_string(variant) + "\n";
}

inline std::string saxpy_variant(int i) {
  return std::string(kSaxpySource) + "// variant " + std::to_string(i) +
         "\nextern \"C\" __global__ void v" + std::to_string(i) +
         "(float* p) { *p = " + std::to_string(i) + ".0f; }\n";
}

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
