// Many processes and threads sharing one cache: byte-correct results, zero errors, and
// each distinct key compiled exactly once (single flight), counted by the caches.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"
#include "support/test_support.h"

namespace {

std::string g_self;

// Each key k has its own kernel name and constant, so a wrong entry is detectable.
std::string source_for(int k) {
  return "extern \"C\" __global__ void k_" + std::to_string(k) +
         "(int* p) { p[threadIdx.x] = " + std::to_string(7000 + k) + " + threadIdx.x; }\n";
}

// Worker: `threads` threads each compile keys [0, keys) in a rotated order. Prints
// "compiles=<n> errors=<n>" and exits 0 only if every result was right.
int worker(const char* dir, int threads, int keys, int rotate) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir;
  kjit_cache* cache = nullptr;
  if (kjit_cache_open(&o, &cache) != KJIT_OK) return 2;
  kjit_compiler* comp = nullptr;
  kjit_compiler_create(cache, 1, &comp);
  kjit_options* opts = nullptr;
  kjit_options_create(&opts);
  kjit_options_set_target(opts, "sm_90");
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < keys; ++i) {
        const int k = (i + t + rotate) % keys;
        kjit_binary* b = nullptr;
        const kjit_status st = kjit_compile(comp, source_for(k).c_str(), opts, &b);
        size_t n = 0;
        const char* ptx = static_cast<const char*>(kjit_binary_data(b, KJIT_OUTPUT_PTX, &n));
        const bool right = st == KJIT_OK && ptx &&
                           std::string(ptx, n).find(".entry k_" + std::to_string(k) + "(") !=
                               std::string::npos &&
                           std::string(ptx, n).find(std::to_string(7000 + k)) != std::string::npos &&
                           std::string(kjit_binary_kernel_name(b, 0)) == "k_" + std::to_string(k);
        if (!right) {
          std::fprintf(stderr, "worker %d thread %d key %d: status %d %s\n", getpid(), t, k, st,
                       kjit_last_error());
          ++errors;
        }
        kjit_binary_destroy(b);
      }
    });
  }
  for (auto& th : pool) th.join();
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(cache, &s);
  std::printf("compiles=%llu errors=%d store_failures=%llu\n", (unsigned long long)s.compiles,
              errors.load(), (unsigned long long)s.store_failures);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  return errors == 0 && s.store_failures == 0 ? 0 : 1;
}

struct WorkerRun {
  int exit_code;
  std::string out;
};

std::vector<WorkerRun> run_workers(const std::string& dir, int procs, int threads, int keys) {
  std::vector<FILE*> pipes;
  for (int p = 0; p < procs; ++p) {
    const std::string cmd = "'" + g_self + "' --worker '" + dir + "' " + std::to_string(threads) +
                            " " + std::to_string(keys) + " " + std::to_string(p);
    pipes.push_back(popen(cmd.c_str(), "r"));
  }
  std::vector<WorkerRun> runs;
  for (FILE* f : pipes) {
    WorkerRun r{-1, ""};
    char buf[256];
    while (f && fgets(buf, sizeof buf, f)) r.out += buf;
    const int status = f ? pclose(f) : -1;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    runs.push_back(r);
  }
  return runs;
}

unsigned long long field(const std::string& out, const char* name) {
  const size_t pos = out.find(std::string(name) + "=");
  return pos == std::string::npos ? 99999 : std::strtoull(out.c_str() + pos + std::strlen(name) + 1,
                                                          nullptr, 10);
}

TEST(MultiProcess, EightProcessesShareOneCacheAndCompileEachKeyOnce) {
  kjit::test::TempDir dir;
  const int procs = 8, threads = 3, keys = 6;
  std::vector<WorkerRun> runs = run_workers(dir.path(), procs, threads, keys);
  unsigned long long compiles = 0;
  for (const WorkerRun& r : runs) {
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(field(r.out, "errors"), 0u) << r.out;
    compiles += field(r.out, "compiles");
  }
  EXPECT_EQ(compiles, unsigned(keys)) << "single flight: each key compiled once in total";
  // A second wave finds everything on disk.
  runs = run_workers(dir.path(), 4, 2, keys);
  for (const WorkerRun& r : runs) {
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(field(r.out, "compiles"), 0u) << r.out;
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 6 && std::strcmp(argv[1], "--worker") == 0) {
    return worker(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
  }
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) g_self.assign(buf, size_t(n));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
