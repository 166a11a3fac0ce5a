// Reliability of the shared cache: faults (read-only, no permission, disk full, no GPU
// driver) degrade to compiling without the disk tier and say so once.
#include <gtest/gtest.h>

#include "support/reliability.h"

namespace {

using namespace kjit::test::reliability;

// ---- 7: faults -------------------------------------------------------------------------------

constexpr uid_t kNobody = 65534;

// Fault workers run in a fresh process. They print "warnings=<n> state=<s> ..." and exit 0
// when every compile gave the right bytes.
int compile_all_right(kjit_cache* c, const std::vector<std::string>& kinds, std::string* notes) {
  int bad = 0;
  for (const auto& kind : kinds) {
    const Out o = compile(c, program(kind));
    const Out ref = compile(nullptr, program(kind));
    if (o.status != KJIT_OK || o.digest() != ref.digest()) {
      ++bad;
      *notes += kind + ": " + o.message + "; ";
    }
  }
  return bad;
}

void report(kjit_cache* c, const std::vector<std::string>& warnings, const std::string& notes) {
  const kjit_cache_stats s = stats_of(c);
  std::printf(
      "warnings=%zu state=%d compiles=%llu store_failures=%llu stores=%llu message=[%s] "
      "notes=[%s]\n",
      warnings.size(), s.disk_state, (unsigned long long)s.compiles,
      (unsigned long long)s.store_failures, (unsigned long long)s.stores, s.message, notes.c_str());
  for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
  std::fflush(stdout);
}

bool become(uid_t uid, const std::string& dir) {
  if (geteuid() != 0) return true;  // not root: permission bits already apply
  return chown(dir.c_str(), uid, uid) == 0 && setgid(uid) == 0 && setuid(uid) == 0;
}

}  // namespace

namespace kjit::test::reliability {

int fault_worker(const std::string& fault, const std::string& dir) {
  std::string notes;
  int bad = 0;
  if (fault == "readonly" || fault == "noperm" || fault == "dbnoperm") {
    if (!become(kNobody, dir)) return 90;
    {  // populate first
      kjit_cache* c = open_cache(dir);
      bad += compile_all_right(c, {"saxpy"}, &notes);
      kjit_cache_close(c);
    }
    if (fault == "readonly") chmod(dir.c_str(), 0500);
    if (fault == "noperm") chmod(dir.c_str(), 0);
    if (fault == "dbnoperm") chmod((dir + "/kjit.db").c_str(), 0);
    start_capture();
    kjit_cache* c = open_cache(dir);
    if (!c) return 91;
    bad += compile_all_right(c, {"saxpy", "small3", "small4"}, &notes);
    const std::vector<std::string> w = stop_capture();
    report(c, w, notes);
    kjit_cache_close(c);
    chmod(dir.c_str(), 0700);
    return bad;
  }
  if (fault == "fsize" || fault == "tmpfs") {
    if (fault == "tmpfs") {
      if (unshare(CLONE_NEWNS) != 0 ||
          mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          mount("kjit-test", dir.c_str(), "tmpfs", 0, "size=192k,mode=0700") != 0) {
        std::printf("skipped=%s\n", std::strerror(errno));
        return 0;
      }
    } else {
      signal(SIGXFSZ, SIG_IGN);
      rlimit lim{96 << 10, RLIM_INFINITY};
      if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 92;
    }
    start_capture();
    kjit_cache* c = open_cache(dir);
    if (!c) return 93;
    // Small results may still fit; the CUB kernel's do not.
    bad += compile_all_right(c, {"saxpy", "cub", "template", "small5", "cub"}, &notes);
    const std::vector<std::string> w = stop_capture();
    report(c, w, notes);
    kjit_cache_close(c);
    if (fault == "fsize") {
      rlimit lim{RLIM_INFINITY, RLIM_INFINITY};
      setrlimit(RLIMIT_FSIZE, &lim);
    }
    // What was stored is intact and served right.
    c = open_cache(dir);
    bad += compile_all_right(c, {"saxpy", "template"}, &notes);
    uint64_t checked = 0, badn = 0;
    kjit_cache_verify(c, &checked, &badn);
    std::printf("after: verified=%llu bad=%llu\n", (unsigned long long)checked,
                (unsigned long long)badn);
    kjit_cache_close(c);
    return bad + int(badn);
  }
  if (fault == "nodriver") {
    setenv("KJIT_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    start_capture();
    int count = -1;
    if (kjit_device_count(&count) != KJIT_ERROR_CUDA_UNAVAILABLE) ++bad;
    kjit_cache* c = open_cache(dir);
    bad += compile_all_right(c, {"saxpy", "template"}, &notes);
    Program p = program("saxpy");
    p.target = "auto";
    for (int i = 0; i < 2; ++i) {
      const Out o = compile(c, p);
      if (o.status != KJIT_ERROR_CUDA_UNAVAILABLE || o.message.find("CUDA") == std::string::npos) {
        ++bad;
        notes += "auto target: status " + std::to_string(o.status) + " " + o.message + "; ";
      } else if (i == 0) {
        notes += "auto target: " + o.message;
      }
    }
    if (kjit_device_count(&count) != KJIT_ERROR_CUDA_UNAVAILABLE) ++bad;
    const std::vector<std::string> w = stop_capture();
    report(c, w, notes);
    kjit_cache_close(c);
    return bad;
  }
  return 64;
}

}  // namespace kjit::test::reliability

namespace {

using namespace kjit::test::reliability;

Child run_fault(const std::string& fault, const std::string& dir) {
  std::vector<Child> kids{spawn({"fault", fault, dir})};
  finish(kids, now_ms() + 300000);
  std::printf("%s: %s", fault.c_str(), kids[0].output.c_str());
  return kids[0];
}

// A private directory the unprivileged user can reach.
std::string reachable_dir(const TempDir& root) {
  chmod(root.path().c_str(), 0755);
  const std::string dir = root.file("cache");
  mkdir(dir.c_str(), 0700);
  return dir;
}

TEST(Faults, ReadOnlyDirectoryDegradesAndSaysSoOnce) {
  TempDir root;
  const Child k = run_fault("readonly", reachable_dir(root));
  ASSERT_TRUE(exited_ok(k)) << k.output;
  EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_READ_ONLY)) << k.output;
  EXPECT_EQ(number(k.output, "warnings"), 1u) << k.output;
  EXPECT_EQ(number(k.output, "compiles"), 2u)
      << "what was stored before is still served: " << k.output;
  EXPECT_EQ(number(k.output, "store_failures"), 0u) << "read-only: no attempted writes";
}

TEST(Faults, NoPermissionDegradesAndSaysSoOnce) {
  for (const char* fault : {"noperm", "dbnoperm"}) {
    TempDir root;
    const Child k = run_fault(fault, reachable_dir(root));
    ASSERT_TRUE(exited_ok(k)) << fault << ": " << k.output;
    EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_UNAVAILABLE)) << k.output;
    EXPECT_EQ(number(k.output, "warnings"), 1u) << k.output;
    EXPECT_NE(field(k.output, "message"), "[]") << "the reason is in the stats";
  }
}

TEST(Faults, DiskFullDegradesAndSaysSoOnce) {
  for (const char* fault : {"fsize", "tmpfs"}) {
    TempDir root;
    const Child k = run_fault(fault, reachable_dir(root));
    ASSERT_TRUE(exited_ok(k)) << fault << ": " << k.output;
    if (!field(k.output, "skipped").empty()) continue;  // no permission to mount here
    EXPECT_GE(number(k.output, "store_failures"), 1u)
        << fault << ": the disk never filled: " << k.output;
    EXPECT_EQ(number(k.output, "warnings"), 1u) << fault << ": " << k.output;
  }
}

TEST(Faults, NoGpuDriverStillCompilesAndCaches) {
  TempDir dir;
  const Child k = run_fault("nodriver", dir.path());
  ASSERT_TRUE(exited_ok(k)) << k.output;
  EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_OK));
  EXPECT_LE(number(k.output, "warnings"), 1u) << "said at most once: " << k.output;
}

}  // namespace
