// The compile worker: NVRTC crashes, a killed worker, time limits, cancellation, clients
// that die, and byte-identical results (its life and its sockets: test_worker_lifetime.cpp).
// CPU only: the worker is the real kjit-worker with the real NVRTC.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "cuda/nvrtc_lib.h"
#include "key/toolchain.h"
#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/fact_files.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/socket.h"
#include "worker/client.h"
#include "worker/protocol.h"
#include "worker/worker_fixture.h"

using kjit::CompileMode;
using kjit::CompileOptions;
using kjit::Outcome;
using kjit::test::kSlowSource;
using kjit::test::saxpy_variant;
using kjit::test::slow_source;
using kjit::test::TempDir;
using kjit::test::Worker;
namespace wk = kjit::worker;

namespace {

const char* const kCrashSource = "template <typename ~> __global__ void t(T* p) { *p = T(1); }\n";

// ---- crashes ---------------------------------------------------------------------------

// The input that kills NVRTC 13.0 costs its caller a status, never the process; the next
// compile gets a new worker; the crash is remembered for the same input.
TEST_F(Worker, NvrtcCrashIsAStatusThroughTheCApi) {
  TempDir dir;
  kjit_cache_options co;
  kjit_cache_options_init(&co);
  co.directory = dir.path().c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK);
  kjit_compiler* compiler = nullptr;
  ASSERT_EQ(kjit_compiler_create(cache, 1, &compiler), KJIT_OK);
  int mode = -1;
  ASSERT_EQ(kjit_compiler_get_compile_mode(compiler, &mode), KJIT_OK);
  EXPECT_EQ(mode, KJIT_COMPILE_MODE_AUTO);
  kjit_options* opts = nullptr;
  ASSERT_EQ(kjit_options_create(&opts), KJIT_OK);
  ASSERT_EQ(kjit_options_set_target(opts, "sm_90"), KJIT_OK);
  ASSERT_EQ(kjit_options_add_name_expression(opts, "t<int>"), KJIT_OK);

  kjit_binary* bin = nullptr;
  EXPECT_EQ(kjit_compile(compiler, kCrashSource, opts, &bin), KJIT_ERROR_NVRTC);
  EXPECT_EQ(bin, nullptr);
  const std::string msg = kjit_last_error();
  EXPECT_NE(msg.find("the compiler crashed on this input (signal 11"), std::string::npos) << msg;

  // Asked again at once: the same answer, without crashing another worker.
  EXPECT_EQ(kjit_compile(compiler, kCrashSource, opts, &bin), KJIT_ERROR_NVRTC);
  EXPECT_NE(std::string(kjit_last_error()).find("crashed on this input"), std::string::npos);
  // A valid program compiles on a new worker, which knows one worker crashed before it.
  kjit_options* plain = nullptr;
  ASSERT_EQ(kjit_options_create(&plain), KJIT_OK);
  ASSERT_EQ(kjit_options_set_target(plain, "sm_90"), KJIT_OK);
  ASSERT_EQ(kjit_compile(compiler, kjit::test::kSaxpySource, plain, &bin), KJIT_OK)
      << kjit_last_error();
  EXPECT_EQ(kjit_binary_tier(bin), KJIT_TIER_COMPILED);
  kjit_binary_destroy(bin);
  kjit_worker_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ASSERT_EQ(kjit_worker_info_get(cache, &info), KJIT_OK);
  EXPECT_EQ(info.running, 1);
  EXPECT_EQ(info.crashes, 1u);
  EXPECT_EQ(info.compiles, 1u);
  EXPECT_NE(info.pid, int64_t(getpid()));

  // Another process (a new cache handle) gets the remembered failure from the database.
  kjit_cache* other = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &other), KJIT_OK);
  kjit_compiler* c2 = nullptr;
  ASSERT_EQ(kjit_compiler_create(other, 1, &c2), KJIT_OK);
  EXPECT_EQ(kjit_compile(c2, kCrashSource, opts, &bin), KJIT_ERROR_NVRTC);
  EXPECT_NE(std::string(kjit_last_error()).find("crashed on this input"), std::string::npos);
  ASSERT_EQ(kjit_worker_info_get(cache, &info), KJIT_OK);
  EXPECT_EQ(info.crashes, 1u);  // no second crash

  EXPECT_EQ(kjit_compiler_set_compile_mode(c2, 7), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_compiler_destroy(c2);
  kjit_cache_close(other);
  kjit_options_destroy(plain);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
}

// Without a disk tier the crash is remembered by the process.
TEST_F(Worker, NvrtcCrashWithAMemoryOnlyCache) {
  kjit::CacheConfig c;
  c.memory_only = true;
  kjit::Cache cache(c);
  kjit::Compiler compiler(&cache, 1);
  CompileOptions o = sm90("memory-only.cu");  // another key than the other crash tests'
  o.add_name_expression("t<int>");
  const Outcome first = compiler.compile(kCrashSource, o);
  EXPECT_EQ(first.status, KJIT_ERROR_NVRTC);
  EXPECT_NE(first.message.find("crashed on this input"), std::string::npos) << first.message;
  const Outcome again = compiler.compile(kCrashSource, o);
  EXPECT_EQ(again.status, KJIT_ERROR_NVRTC);
  const Outcome ok = compiler.compile(kjit::test::kSaxpySource, sm90());
  ASSERT_EQ(ok.status, KJIT_OK) << ok.message;
  std::string why;
  auto st = kjit::worker_status_for(&cache, &why);
  ASSERT_TRUE(st) << why;
  EXPECT_EQ(st->crashes, 1u);
  // The worker of memory-only caches lives in the user's private directory.
  EXPECT_EQ(address(&cache).directory, tmp_.path() + "/kjit-" + std::to_string(geteuid()));
}

// ---- a worker killed while 4 processes run 100 compiles ---------------------------------

TEST_F(Worker, KilledMidwayEveryCompileEndsAndTheCacheVerifies) {
  TempDir dir;
  constexpr int kProcs = 4, kEach = 25;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto cache = open_cache(dir.path());
      kjit::Compiler compiler(cache.get(), 1);
      int unclear = 0;
      for (int i = 0; i < kEach; ++i) {
        const Outcome o = compiler.compile(saxpy_variant(p * kEach + i), sm90());
        if (o.status == KJIT_OK) continue;
        const bool clear =
            o.status == KJIT_ERROR_NVRTC && o.message.find("compile worker") != std::string::npos;
        std::fprintf(stderr, "compile %d: status %d: %s\n", p * kEach + i, int(o.status),
                     o.message.c_str());
        if (!clear) ++unclear;
      }
      _exit(unclear);
    }
    kids.push_back(pid);
  }
  // Kill the worker once it has done some of the work.
  auto cache = open_cache(dir.path());
  int64_t killed = 0;
  const double until = kjit::monotonic_ms() + 60000;
  while (!killed && kjit::monotonic_ms() < until) {
    std::string why;
    auto st = kjit::worker_status_for(cache.get(), &why);
    if (st && st->compiles >= 10) {
      ASSERT_EQ(kill(pid_t(st->pid), SIGKILL), 0);
      killed = st->pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(killed, 0) << "the worker never reached 10 compiles";
  // Nothing hangs: every child is done within a minute.
  for (pid_t k : kids) {
    int status = -1;
    const double deadline = kjit::monotonic_ms() + 60000;
    pid_t r = 0;
    while ((r = waitpid(k, &status, WNOHANG)) == 0 && kjit::monotonic_ms() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (r == 0) {
      kill(k, SIGKILL);
      waitpid(k, &status, 0);
      ADD_FAILURE() << "a client hung after the worker was killed";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "a compile ended without a result or a clear status";
  }
  uint64_t checked = 0, bad = 0;
  cache->verify(&checked, &bad);
  EXPECT_EQ(bad, 0u);
  EXPECT_GE(checked, 90u);
  // A new worker took over.
  const int64_t now = worker_pid(cache.get());
  EXPECT_NE(now, 0);
  EXPECT_NE(now, killed);
}

// ---- limits, cancellation, clients that die ------------------------------------------------

TEST_F(Worker, SlowCompileIsStoppedAtItsTimeLimit) {
  setenv("KJIT_COMPILE_TIMEOUT_S", "2", 1);
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  const double t0 = kjit::monotonic_ms();
  const Outcome o = compiler.compile(kSlowSource, sm90("slow.cu"));
  const double ms = kjit::monotonic_ms() - t0;
  EXPECT_EQ(o.status, KJIT_ERROR_TIMEOUT) << o.message;
  EXPECT_NE(o.message.find("time limit of 2 s"), std::string::npos) << o.message;
  EXPECT_GE(ms, 1900);
  EXPECT_LT(ms, 9000);
  const Outcome next = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(next.status, KJIT_OK) << next.message;
}

// KJIT_COMPILE_MEMORY_MB: a compile during which the worker's resident memory passes the
// limit is stopped with KJIT_ERROR_OUT_OF_MEMORY, and the worker serves the next compile.
// (1 MiB: any worker passes it at once.)
TEST_F(Worker, MemoryLimitStopsTheCompile) {
  setenv("KJIT_COMPILE_MEMORY_MB", "1", 1);
  TempDir dir;
  auto cache = open_cache(dir.path());
  {
    kjit::Compiler compiler(cache.get(), 1);
    compiler.set_mode(CompileMode::Worker);
    const Outcome o = compiler.compile(kSlowSource, sm90("slow.cu"));
    EXPECT_EQ(o.status, KJIT_ERROR_OUT_OF_MEMORY) << o.message;
    EXPECT_NE(o.message.find("KJIT_COMPILE_MEMORY_MB"), std::string::npos) << o.message;
  }
  unsetenv("KJIT_COMPILE_MEMORY_MB");
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome next = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(next.status, KJIT_OK) << next.message;
}

// A client killed in the middle of its request leaves the worker serving others.
TEST_F(Worker, ClientKilledMidRequestLeavesTheWorkerHealthy) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  ASSERT_EQ(compiler.compile(saxpy_variant(1), sm90()).status, KJIT_OK);
  const int64_t pid = worker_pid(cache.get());
  ASSERT_NE(pid, 0);
  const pid_t kid = fork();
  ASSERT_GE(kid, 0);
  if (kid == 0) {
    auto c = open_cache(dir.path());
    kjit::Compiler k(c.get(), 1);
    // Long enough to be killed in the middle, short enough that the next compile, which
    // waits for NVRTC to reach its next phase, does not wait long.
    k.compile(slow_source("300000"), sm90("slow.cu"));
    _exit(0);
  }
  std::string why;
  for (int i = 0; i < 500; ++i) {
    auto st = kjit::worker_status_for(cache.get(), &why);
    if (st && st->in_flight > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(kid, SIGKILL);
  int status;
  waitpid(kid, &status, 0);
  const Outcome o = compiler.compile(saxpy_variant(2), sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_EQ(worker_pid(cache.get()), pid);
}

TEST_F(Worker, CancelledAsyncCompileInTheWorker) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel->store(true);
  });
  const double t0 = kjit::monotonic_ms();
  const Outcome o = compiler.compile(kSlowSource, sm90("slow.cu"), cancel);
  t.join();
  EXPECT_EQ(o.status, KJIT_ERROR_CANCELLED) << o.message;
  EXPECT_LT(kjit::monotonic_ms() - t0, 3000);
}

// ---- the same bytes either way ----------------------------------------------------------------

TEST_F(Worker, ResultsAreByteIdenticalToInProcess) {
  struct Case {
    std::string source;
    CompileOptions opts;
  };
  std::vector<Case> cases;
  {
    CompileOptions o = sm90("scale.cu");
    o.add_name_expression("scale<float, 4>");
    o.add_name_expression("scale<double, 2>");
    cases.push_back({kjit::test::kTemplateSource, o});
  }
  cases.push_back({kjit::test::kCubReduceSource, sm90("cub.cu")});
  {
    CompileOptions o = sm90("warn.cu");
    o.outputs = KJIT_OUTPUT_PTX;
    cases.push_back({"extern \"C\" __global__ void w(int* p) { int unused; *p = 1; }\n", o});
  }
  cases.push_back(
      {"extern \"C\" __global__ void e(int* p) { *p = undeclared; }\n", sm90("err.cu")});
  kjit::Compiler inproc(nullptr, 1);
  inproc.set_mode(CompileMode::InProcess);
  kjit::Compiler worker(nullptr, 1);
  worker.set_mode(CompileMode::Worker);
  for (const Case& c : cases) {
    const Outcome a = inproc.compile(c.source, c.opts);
    const Outcome b = worker.compile(c.source, c.opts);
    ASSERT_EQ(a.status, b.status) << c.opts.name << ": " << a.message << " / " << b.message;
    EXPECT_EQ(a.message, b.message) << c.opts.name;
    ASSERT_TRUE(a.entry && b.entry) << c.opts.name;
    EXPECT_EQ(a.entry->key, b.entry->key);
    EXPECT_EQ(a.entry->ptx, b.entry->ptx) << c.opts.name;
    EXPECT_EQ(a.entry->cubin, b.entry->cubin) << c.opts.name;
    EXPECT_EQ(a.entry->log, b.entry->log) << c.opts.name;
    EXPECT_EQ(a.entry->names, b.entry->names) << c.opts.name;
    EXPECT_EQ(a.entry->kernels, b.entry->kernels) << c.opts.name;
    EXPECT_EQ(a.entry->options, b.entry->options) << c.opts.name;
    EXPECT_EQ(a.entry->target, b.entry->target) << c.opts.name;
    EXPECT_EQ(a.entry->toolchain, b.entry->toolchain) << c.opts.name;
  }
  EXPECT_FALSE(cases[2].source.empty());
}

// Relative include paths resolve from the client's working directory, not the worker's,
// and what NVRTC read is checked against the client's scan (the result is stored).
TEST_F(Worker, RelativeIncludesResolveInTheClientsDirectory) {
  TempDir dir;
  TempDir work;
  ASSERT_TRUE(kjit::make_directories(work.path() + "/inc", 0700));
  kjit::test::write_file(work.path() + "/inc/v.h", "#define V 321\n");
  char old[4096];
  ASSERT_NE(getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(chdir(work.path().c_str()), 0);
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  CompileOptions o = sm90("rel.cu");
  o.outputs = KJIT_OUTPUT_PTX;
  o.raw = {"-Iinc"};
  const Outcome r =
      compiler.compile("#include \"v.h\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n", o);
  ASSERT_EQ(chdir(old), 0);
  ASSERT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_NE(r.entry->ptx.find("321"), std::string::npos);
  const kjit::CacheStats st = cache->stats();
  EXPECT_EQ(st.not_stored, 0u);
  EXPECT_EQ(st.stores, 1u);
}

// A header rewritten while the worker starts, before NVRTC can read it: its bytes then are
// what NVRTC reads, and the compile is stored. The request's start time, which vouches for
// the files NVRTC reads (a file changed within kStampLagNs of it may have changed while
// NVRTC read it), is taken once a worker answers, not before the worker is started: the
// wait for it overlaps the worker's start instead of preceding it.
TEST_F(Worker, HeaderRewrittenWhileTheWorkerStartsIsReadAndStored) {
  const std::string script = tmp_.path() + "/slow-start-worker.sh";
  kjit::test::write_file(
      script, std::string("#!/bin/sh\nsleep 0.6\nexec '") + KJIT_TEST_WORKER + "' \"$@\"\n");
  ASSERT_EQ(chmod(script.c_str(), 0700), 0);
  setenv("KJIT_WORKER", script.c_str(), 1);
  TempDir dir, inc;
  const std::string header = inc.path() + "/v.h";
  kjit::test::write_file(header, "#error not rewritten yet\n");
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  CompileOptions o = sm90("rewritten.cu");
  o.outputs = KJIT_OUTPUT_PTX;
  o.raw = {"-I" + inc.path()};
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    kjit::test::write_file(header, "#define V 4321\n");
  });
  const Outcome r =
      compiler.compile("#include \"v.h\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n", o);
  writer.join();
  ASSERT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_NE(r.entry->ptx.find("4321"), std::string::npos);
  EXPECT_TRUE(r.stored) << r.not_stored;
  const kjit::CacheStats st = cache->stats();
  EXPECT_EQ(st.not_stored, 0u);
  EXPECT_EQ(st.stores, 1u);
}

}  // namespace
