// The compile worker's life: workers of their own for independent compiles, idle exit,
// versions, stale, silent and foreign sockets, read-only caches, long paths, the toolchain
// record it reads, and what happens when it cannot start. CPU only: the worker is the real
// kjit-worker with the real NVRTC.
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

// ---- lifetime, versions, sockets --------------------------------------------------------------

// Independent compiles at once run in workers of their own (KJIT_WORKER_PROCESSES): NVRTC
// compiles one program at a time in a process, so one worker would make them queue.
TEST_F(Worker, IndependentCompilesRunInWorkersOfTheirOwn) {
  setenv("KJIT_WORKER_PROCESSES", "2", 1);
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 2);
  compiler.set_mode(CompileMode::Worker);
  auto slow = [](int v) { return slow_source("150000", v); };
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int v = 0; v < 2; ++v) {
    threads.emplace_back([&, v] {
      CompileOptions o90 = sm90();
      o90.raw = {"-default-device"};
      const Outcome o = compiler.compile(slow(v), o90);
      EXPECT_EQ(o.status, KJIT_OK) << o.message << (o.entry ? o.entry->log : "");
      ok += o.status == KJIT_OK;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(ok.load(), 2);
  kjit::WorkerAddress a = address(cache.get());
  const std::string tool = kjit::toolchain_id(kjit::facts_of(cache.get()));
  std::string why;
  const auto first = kjit::query_worker(a, tool, &why);
  ASSERT_TRUE(first) << why;
  a.name += "-1";
  const auto second = kjit::query_worker(a, tool, &why);
  ASSERT_TRUE(second) << why;
  EXPECT_NE(first->pid, second->pid);
  EXPECT_EQ(first->compiles, 1u);
  EXPECT_EQ(second->compiles, 1u);
  unsetenv("KJIT_WORKER_PROCESSES");
}

TEST_F(Worker, ExitsWhenIdle) {
  setenv("KJIT_WORKER_IDLE_S", "1", 1);
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  ASSERT_EQ(compiler.compile(kjit::test::kSaxpySource, sm90()).status, KJIT_OK);
  ASSERT_NE(worker_pid(cache.get()), 0);  // (this status request is activity too)
  const kjit::WorkerAddress a = address(cache.get());
  const std::string sock = a.directory + "/" + a.name + ".sock";
  bool gone = false;
  for (int i = 0; i < 80 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = !kjit::is_regular_file(sock) && access(sock.c_str(), F_OK) != 0;
  }
  EXPECT_TRUE(gone) << "the idle worker did not remove its socket";
  EXPECT_EQ(worker_pid(cache.get()), 0);
  // The next miss starts a new one.
  EXPECT_EQ(compiler.compile(saxpy_variant(3), sm90()).status, KJIT_OK);
}

// Something that speaks the protocol with another version on the socket is never used.
TEST_F(Worker, MismatchedVersionIsReplaced) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  const kjit::WorkerAddress a = address(cache.get());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  const size_t len = kjit::socket_address(a.directory, -1, a.name + ".sock", &sa);
  ASSERT_GT(len, 0u);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), socklen_t(len)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  std::atomic<int> greeted{0};
  std::thread fake([&] {
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      wk::Hello h;
      h.library_version = "0.0.1";  // an older kjit
      h.toolchain = kjit::toolchain_id(kjit::facts_of(cache.get()));
      h.pid = getpid();
      wk::write_frame(c, wk::FrameType::Hello, wk::encode(h));
      greeted++;
      close(c);
    }
  });
  kjit::Compiler compiler(cache.get(), 1);
  const Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_GE(greeted.load(), 1);
  const int64_t pid = worker_pid(cache.get());
  EXPECT_NE(pid, 0);
  EXPECT_NE(pid, int64_t(getpid()));
  shutdown(fd, SHUT_RDWR);
  close(fd);
  fake.join();
}

TEST_F(Worker, StaleSocketFileIsReplaced) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  const kjit::WorkerAddress a = address(cache.get());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  const size_t len = kjit::socket_address(a.directory, -1, a.name + ".sock", &sa);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), socklen_t(len)), 0);
  close(fd);  // the file stays; nobody listens: a dead worker's leftover
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_NE(worker_pid(cache.get()), 0);
}

// Two processes that start the worker at the same moment end up with one.
TEST_F(Worker, SimultaneousStartsMakeOneWorker) {
  TempDir dir;
  std::vector<pid_t> kids;
  for (int p = 0; p < 3; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto cache = open_cache(dir.path());
      kjit::Compiler compiler(cache.get(), 1);
      compiler.set_mode(CompileMode::Worker);
      _exit(compiler.compile(saxpy_variant(10 + p), sm90()).status == KJIT_OK ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = -1;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto cache = open_cache(dir.path());
  std::string why;
  auto st = kjit::worker_status_for(cache.get(), &why);
  ASSERT_TRUE(st) << why;
  EXPECT_EQ(st->compiles, 3u);  // all three went to the one worker
}

TEST_F(Worker, PeerCredentialCheck) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  long peer = -2;
  EXPECT_TRUE(kjit::peer_is_user(sv[0], geteuid(), &peer));
  EXPECT_EQ(peer, long(geteuid()));
  EXPECT_FALSE(kjit::peer_is_user(sv[0], geteuid() + 1, &peer));
  close(sv[0]);
  close(sv[1]);
  int not_socket = open("/dev/null", O_RDONLY);
  EXPECT_FALSE(kjit::peer_is_user(not_socket, geteuid(), &peer));
  close(not_socket);
}

// Another user can neither use this user's worker nor pose as it (needs root to act as
// another user; elsewhere only the credential check above runs).
TEST_F(Worker, ForeignUsersAreRefusedBothWays) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  ASSERT_EQ(compiler.compile(kjit::test::kSaxpySource, sm90()).status, KJIT_OK);
  // So that another user can reach the socket (the directories are under tmp_).
  ASSERT_EQ(chmod(tmp_.path().c_str(), 0711), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  const kjit::WorkerAddress a = address(cache.get());
  const std::string sock = a.directory + "/" + a.name + ".sock";
  chmod(sock.c_str(), 0777);
  // 1. A client of another user is refused by the worker.
  const pid_t kid = fork();
  ASSERT_GE(kid, 0);
  if (kid == 0) {
    if (setuid(65534) != 0) _exit(90);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    const size_t len = kjit::socket_address(a.directory, -1, a.name + ".sock", &sa);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), socklen_t(len)) != 0) _exit(91);
    wk::FrameType type;
    std::string payload;
    if (wk::read_frame(fd, &type, &payload, kjit::monotonic_ms() + 5000) != wk::ReadResult::Ok)
      _exit(92);
    _exit(type == wk::FrameType::Refused && payload.find("serves user") != std::string::npos ? 0
                                                                                             : 93);
  }
  int status = -1;
  waitpid(kid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << WEXITSTATUS(status);
  const int64_t mine = worker_pid(cache.get());
  ASSERT_NE(mine, 0);

  // 2. A server of another user on the socket path is not used.
  kill(pid_t(mine), SIGKILL);
  for (int i = 0; i < 100 && kill(pid_t(mine), 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // (may stay a zombie)
  }
  unlink(sock.c_str());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t impostor = fork();
  ASSERT_GE(impostor, 0);
  if (impostor == 0) {
    if (setuid(65534) != 0) _exit(90);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    const size_t len = kjit::socket_address(a.directory, -1, a.name + ".sock", &sa);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), socklen_t(len)) != 0 || listen(fd, 8) != 0)
      _exit(91);
    if (write(ready[1], "r", 1) != 1) _exit(92);
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) _exit(0);
      wk::Hello h;
      h.library_version = std::to_string(KJIT_VERSION_MAJOR) + "." +
                          std::to_string(KJIT_VERSION_MINOR) + "." +
                          std::to_string(KJIT_VERSION_PATCH);
      h.toolchain = kjit::toolchain_id(nullptr);
      wk::write_frame(c, wk::FrameType::Hello, wk::encode(h));
      close(c);
    }
  }
  close(ready[1]);
  char r;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  close(ready[0]);
  const Outcome o = compiler.compile(saxpy_variant(4), sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  const int64_t now = worker_pid(cache.get());
  EXPECT_NE(now, 0);
  EXPECT_NE(now, int64_t(impostor));
  kill(impostor, SIGKILL);
  waitpid(impostor, &status, 0);
}

TEST_F(Worker, ReadOnlyCacheUsesAPrivateSocketDirectory) {
  TempDir dir;
  {
    auto rw = open_cache(dir.path());
    kjit::Compiler c(rw.get(), 1);
    c.set_mode(CompileMode::InProcess);
    ASSERT_EQ(c.compile(saxpy_variant(5), sm90()).status, KJIT_OK);
  }
  auto ro = open_cache(dir.path(), true);
  kjit::Compiler compiler(ro.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome o = compiler.compile(saxpy_variant(6), sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  const kjit::WorkerAddress a = address(ro.get());
  EXPECT_EQ(a.directory, tmp_.path() + "/kjit-" + std::to_string(geteuid()));
  EXPECT_NE(worker_pid(ro.get()), 0);
  struct stat st;
  ASSERT_EQ(stat(a.directory.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// A cache directory whose socket path does not fit in sun_path.
TEST_F(Worker, LongCacheDirectoryPath) {
  TempDir dir;
  std::string deep = dir.path();
  while (deep.size() < 200) deep += "/a-rather-long-directory-name";
  ASSERT_TRUE(kjit::make_directories(deep, 0700));
  auto cache = open_cache(deep);
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_NE(worker_pid(cache.get()), 0);
}

// A worker started for a cache directory takes NVRTC's identity from the directory's record
// for the library file it loads, as every process of the cache does, rather than probing
// NVRTC with a compile of its own before it can listen: a record that names another build
// is what the started worker then says in its hello (and the client refuses it).
TEST_F(Worker, TakesNvrtcIdentityFromTheCacheDirectorysRecord) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  const std::string lib = kjit::nvrtc_library_as_named();
  ASSERT_FALSE(lib.empty());
  const kjit::ToolchainFacts& real = kjit::toolchain_facts(kjit::facts_of(cache.get()));
  const std::string other = "nvrtc 99.9.12345 CL-1";
  ASSERT_NE(real.id, other);
  // The record as key/toolchain.cpp writes it (named by the library file's identity).
  kjit::ToolchainFacts forged = real;
  forged.id = other;
  kjit::FactFiles(dir.path())
      .write(kjit::toolchain_record_name(), kjit::encode_toolchain_record(forged));
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(o.status, KJIT_ERROR_UNSUPPORTED) << o.message;
  EXPECT_NE(o.message.find(other), std::string::npos) << o.message;
  // With the directory's record as this process wrote it, the worker serves.
  TempDir good;
  auto cache2 = open_cache(good.path());
  kjit::FactFiles(good.path())
      .write(kjit::toolchain_record_name(), kjit::encode_toolchain_record(real));
  kjit::Compiler compiler2(cache2.get(), 1);
  compiler2.set_mode(CompileMode::Worker);
  const Outcome g = compiler2.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(g.status, KJIT_OK) << g.message;
  EXPECT_NE(worker_pid(cache2.get()), 0);
}

// A cache directory opened after this process learnt NVRTC's identity from another gets
// the record before a worker is started for it, so that the worker reads it instead of
// probing NVRTC with a compile of its own.
TEST_F(Worker, ACacheOpenedLaterGetsTheToolchainRecordItsWorkerReads) {
  TempDir first, later;
  auto a = open_cache(first.path());
  kjit::Compiler ca(a.get(), 1);
  ca.set_mode(CompileMode::Worker);
  ASSERT_EQ(ca.compile(kjit::test::kSaxpySource, sm90()).status, KJIT_OK);
  const std::string name = kjit::toolchain_record_name();
  ASSERT_FALSE(name.empty());
  auto b = open_cache(later.path());
  EXPECT_EQ(kjit::FactFiles(later.path()).read(name), std::nullopt) << "not there yet";
  kjit::Compiler cb(b.get(), 1);
  cb.set_mode(CompileMode::Worker);
  const Outcome o = cb.compile(kjit::test::kSaxpySource, sm90());
  ASSERT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_NE(worker_pid(b.get()), 0);
  const std::optional<std::string> rec = kjit::FactFiles(later.path()).read(name);
  ASSERT_TRUE(rec.has_value()) << "the later directory's record";
  kjit::ToolchainFacts f;
  ASSERT_TRUE(kjit::decode_toolchain_record(*rec, &f));
  EXPECT_EQ(f.id, kjit::toolchain_facts(kjit::facts_of(a.get())).id);
}

TEST_F(Worker, ModesWhenTheWorkerCannotStart) {
  setenv("KJIT_WORKER", (tmp_.path() + "/no-such-worker").c_str(), 1);
  TempDir dir;
  auto cache = open_cache(dir.path());
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome w = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(w.status, KJIT_ERROR_UNSUPPORTED);
  EXPECT_NE(w.message.find("no-such-worker"), std::string::npos) << w.message;
  compiler.set_mode(CompileMode::Auto);
  const Outcome a = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(a.status, KJIT_OK) << a.message;  // in this process
  setenv("KJIT_COMPILE_MODE", "inprocess", 1);
  kjit::Compiler from_env(cache.get(), 1);
  EXPECT_EQ(from_env.mode(), CompileMode::InProcess);
}

// A started "worker" that misbehaves costs a bounded wait: worker mode returns a status,
// auto mode compiles in this process.
class WorkerStart : public Worker {
 protected:
  void use_script(const std::string& body) {
    const std::string path = tmp_.path() + "/fake-worker.sh";
    kjit::test::write_file(path, "#!/bin/sh\n" + body);
    ASSERT_EQ(chmod(path.c_str(), 0700), 0);
    setenv("KJIT_WORKER", path.c_str(), 1);
  }
  // Worker mode fails within `bound_ms` and names the start; auto mode succeeds.
  void expect_bounded(double bound_ms, const char* said) {
    TempDir dir;
    auto cache = open_cache(dir.path());
    kjit::Compiler compiler(cache.get(), 1);
    compiler.set_mode(CompileMode::Worker);
    const double t0 = kjit::monotonic_ms();
    const Outcome w = compiler.compile(kjit::test::kSaxpySource, sm90());
    EXPECT_LT(kjit::monotonic_ms() - t0, bound_ms);
    EXPECT_EQ(w.status, KJIT_ERROR_UNSUPPORTED) << w.message;
    EXPECT_NE(w.message.find(said), std::string::npos) << w.message;
    compiler.set_mode(CompileMode::Auto);
    const Outcome a = compiler.compile(kjit::test::kSaxpySource, sm90());
    EXPECT_EQ(a.status, KJIT_OK) << a.message;
  }
};

TEST_F(WorkerStart, ClosesTheReadyPipeAndDoesNotExit) {
  use_script("exec 3>&-\nsleep 100\n");
  expect_bounded(5000, "did not start (no report)");
}

TEST_F(WorkerStart, WritesMoreThanAPipeHolds) {
  use_script("head -c 100000 /dev/zero >&3\nsleep 100\n");
  expect_bounded(5000, "did not start");
}

TEST_F(WorkerStart, ReportsReadyButDoesNotExitOrListen) {
  use_script("echo 'OK 1' >&3\nexec 3>&-\nsleep 100\n");
  expect_bounded(8000, "the started worker does not answer");
}

TEST_F(WorkerStart, SaysNothingWithThePipeOpen) {
  use_script("sleep 100\n");
  expect_bounded(15000, "did not start (no report)");
}

// A peer that accepts and never greets (a stopped worker) is asked once, briefly, then
// replaced by a new worker.
TEST_F(Worker, SilentSocketIsAskedOnceThenReplaced) {
  TempDir dir;
  auto cache = open_cache(dir.path());
  const kjit::WorkerAddress a = address(cache.get());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  const size_t len = kjit::socket_address(a.directory, -1, a.name + ".sock", &sa);
  ASSERT_GT(len, 0u);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), socklen_t(len)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  std::atomic<int> accepted{0};
  std::vector<int> held;
  std::thread silent([&] {
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      held.push_back(c);  // says nothing
      accepted++;
    }
  });
  kjit::Compiler compiler(cache.get(), 1);
  compiler.set_mode(CompileMode::Worker);
  const Outcome o = compiler.compile(kjit::test::kSaxpySource, sm90());
  EXPECT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_EQ(accepted.load(), 1);
  const int64_t pid = worker_pid(cache.get());
  EXPECT_NE(pid, 0);
  EXPECT_NE(pid, int64_t(getpid()));
  shutdown(fd, SHUT_RDWR);
  close(fd);
  silent.join();
  for (int c : held) close(c);
}

}  // namespace
