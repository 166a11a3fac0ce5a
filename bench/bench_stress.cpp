// Stress: 8 processes x 8 threads x a fixed number of mixed operations on one cache
// directory with a small size bound, so that hits, misses, NVRTC compiles (single flight
// across processes), raw inserts, evictions, explicit prunes, listings and statistics all
// run against each other. Every operation's status is checked; any error, any message or
// log line mentioning a busy/locked database, and any store failure is counted.
//
//   bench_stress [--procs 8] [--threads 8] [--ops 400] [--max-mib 8] [--dir DIR]
//
// Prints a table and exits non-zero if anything went wrong.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/handles.h"
#include "kjit/kjit.h"
#include "store/entry.h"
#include "util/sha256.h"

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

enum Op { kHit, kLookup, kCompile, kInsert, kStats, kList, kPrune, kOps };
const char* const kOpNames[kOps] = {"hit", "lookup", "compile", "insert", "stats", "list", "prune"};

std::string key_of(const std::string& tag) { return kjit::to_hex(kjit::sha256("stress:" + tag)); }

kjit::Entry entry_of(const std::string& tag, size_t size) {
  kjit::Entry e;
  e.key = key_of(tag);
  e.target = "sm_90";
  std::mt19937_64 rng(std::hash<std::string>()(tag));
  char* ptx = e.ptx.uninitialized(size);
  for (size_t i = 0; i < size; ++i) ptx[i] = static_cast<char>(rng());
  e.kernels = {"stress"};
  e.toolchain = "stress";
  e.program_name = "stress.cu";
  e.created = static_cast<int64_t>(time(nullptr));
  return e;
}

size_t payload_size(const std::string& tag) { return 512 + std::hash<std::string>()(tag) % (32 << 10); }

std::string kernel(int k) {
  return "extern \"C\" __global__ void stress_" + std::to_string(k) + "(int* p) { p[threadIdx.x] = " +
         std::to_string(k) + " + threadIdx.x; }\n";
}

bool busy_text(const std::string& s) {
  return s.find("locked") != std::string::npos || s.find("busy") != std::string::npos ||
         s.find("BUSY") != std::string::npos;
}

std::atomic<uint64_t> g_busy_logs{0};
void on_log(int level, const char* message, void*) {
  if (level >= KJIT_LOG_WARN) {
    if (busy_text(message)) ++g_busy_logs;
    std::fprintf(stderr, "log: %s\n", message);
  }
}

struct Counts {
  uint64_t ops[kOps] = {}, errors = 0, busy = 0, wrong = 0;
};

int worker(const std::string& dir, int threads, int ops, uint64_t max_bytes, int index,
           int ready_fd, int go_fd) {
  kjit_set_log_callback(on_log, nullptr);
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  o.max_size_bytes = max_bytes;
  kjit_cache* cache = nullptr;
  if (kjit_cache_open(&o, &cache) != KJIT_OK) return 2;
  kjit_compiler* comp = nullptr;
  kjit_compiler_create(cache, 1, &comp);
  kjit_options* opts = nullptr;
  kjit_options_create(&opts);
  kjit_options_set_target(opts, "sm_90");
  const char r = 'r';
  if (write(ready_fd, &r, 1) != 1) return 3;
  close(ready_fd);
  char b;
  while (read(go_fd, &b, 1) > 0) {
  }
  std::mutex mu;
  Counts total;
  const double start = now_ms();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Counts c;
      std::mt19937 rng(static_cast<unsigned>(index * 1000 + t));
      auto fail = [&](const std::string& what) {
        const std::string msg = kjit_last_error();
        ++c.errors;
        if (busy_text(msg)) ++c.busy;
        std::fprintf(stderr, "process %d thread %d: %s: %s\n", index, t, what.c_str(), msg.c_str());
      };
      for (int i = 0; i < ops; ++i) {
        const auto dice = rng() % 200;
        const Op op = dice < 70 ? kHit : dice < 100 ? kLookup : dice < 120 ? kCompile
                    : dice < 170 ? kInsert : dice < 190 ? kStats : dice < 198 ? kList : kPrune;
        ++c.ops[op];
        switch (op) {
          case kHit:
          case kLookup: {
            // Hot keys (inserted by everyone, recently used) or any key of the pool.
            const std::string tag = op == kHit ? "hot" + std::to_string(rng() % 48)
                                               : "pool" + std::to_string(rng() % 4000);
            kjit_binary* bin = nullptr;
            const kjit_status st = kjit_cache_get(cache, key_of(tag).c_str(), &bin);
            if (st == KJIT_OK) {
              size_t n = 0;
              const void* p = kjit_binary_data(bin, KJIT_OUTPUT_PTX, &n);
              if (!p || std::string(static_cast<const char*>(p), n) != entry_of(tag, payload_size(tag)).ptx) {
                ++c.wrong;
                fail("wrong bytes for " + tag);
              }
            } else if (st != KJIT_ERROR_NOT_FOUND) {
              fail("get " + tag);
            }
            kjit_binary_destroy(bin);
            if (op == kHit && st == KJIT_ERROR_NOT_FOUND) {  // evicted: put it back
              try {
                cache->cache->insert(entry_of(tag, payload_size(tag)));
              } catch (const std::exception& e) {
                fail(std::string("re-insert: ") + e.what());
              }
            }
            break;
          }
          case kCompile: {
            const int k = int(rng() % 24);
            kjit_binary* bin = nullptr;
            const kjit_status st = kjit_compile(comp, kernel(k).c_str(), opts, &bin);
            if (st != KJIT_OK) {
              fail("compile " + std::to_string(k));
            } else if (std::string(kjit_binary_kernel_name(bin, 0)) != "stress_" + std::to_string(k)) {
              ++c.wrong;
              fail("compile gave another kernel");
            }
            kjit_binary_destroy(bin);
            break;
          }
          case kInsert: {
            const std::string tag = "pool" + std::to_string(rng() % 4000);
            try {
              cache->cache->insert(entry_of(tag, payload_size(tag)));
            } catch (const std::exception& e) {
              fail(std::string("insert: ") + e.what());
            }
            break;
          }
          case kStats: {
            kjit_cache_stats s{};
            s.struct_size = sizeof s;
            if (kjit_cache_stats_get(cache, &s) != KJIT_OK) fail("stats");
            break;
          }
          case kList: {
            int rows = 0;
            if (kjit_cache_list(cache, [](const kjit_cache_entry_info*, void* u) {
                  return ++*static_cast<int*>(u) >= 20 ? 1 : 0;
                }, &rows) != KJIT_OK) {
              fail("list");
            }
            break;
          }
          case kPrune: {
            uint64_t removed = 0;
            if (kjit_cache_prune(cache, max_bytes / 2, &removed) != KJIT_OK) fail("prune");
            break;
          }
          case kOps:
            break;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      for (int k = 0; k < kOps; ++k) total.ops[k] += c.ops[k];
      total.errors += c.errors;
      total.busy += c.busy;
      total.wrong += c.wrong;
    });
  }
  for (auto& th : pool) th.join();
  const double ms = now_ms() - start;
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(cache, &s);
  std::printf("ms=%.1f errors=%llu busy=%llu wrong=%llu busy_logs=%llu compiles=%llu "
              "store_failures=%llu evictions=%llu waits=%llu",
              ms, (unsigned long long)total.errors, (unsigned long long)total.busy,
              (unsigned long long)total.wrong, (unsigned long long)g_busy_logs.load(),
              (unsigned long long)s.compiles, (unsigned long long)s.store_failures,
              (unsigned long long)s.evictions, (unsigned long long)s.waits);
  for (int k = 0; k < kOps; ++k) std::printf(" %s=%llu", kOpNames[k], (unsigned long long)total.ops[k]);
  std::printf("\n");
  std::fflush(stdout);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  return 0;
}

unsigned long long field(const std::string& out, const std::string& name) {
  const size_t pos = out.find(" " + name + "=") != std::string::npos ? out.find(" " + name + "=") + 1
                                                                     : out.find(name + "=");
  return pos == std::string::npos ? 0 : std::strtoull(out.c_str() + pos + name.size() + 1, nullptr, 10);
}

double field_ms(const std::string& out) {
  const size_t pos = out.find("ms=");
  return pos == std::string::npos ? 0 : std::strtod(out.c_str() + pos + 3, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 9 && std::strcmp(argv[1], "--worker") == 0) {
    return worker(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::strtoull(argv[5], nullptr, 10),
                  std::atoi(argv[6]), std::atoi(argv[7]), std::atoi(argv[8]));
  }
  int procs = 8, threads = 8, ops = 400;
  uint64_t max_mib = 8;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--procs") procs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--ops") ops = std::atoi(argv[i + 1]);
    else if (a == "--max-mib") max_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--dir") dir = argv[i + 1];
  }
  char tmpl[] = "/tmp/kjit-stress-XXXXXX";
  const bool own_dir = dir.empty();
  if (own_dir) dir = mkdtemp(tmpl);
  const uint64_t max_bytes = max_mib << 20;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';

  // Hot entries exist before the start.
  {
    kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
    o.directory = dir.c_str();
    o.max_size_bytes = max_bytes;
    kjit_cache* c = nullptr;
    if (kjit_cache_open(&o, &c) != KJIT_OK) return 1;
    for (int i = 0; i < 48; ++i) {
      const std::string tag = "hot" + std::to_string(i);
      c->cache->insert(entry_of(tag, payload_size(tag)));
    }
    kjit_cache_close(c);
  }

  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) return 1;
  std::vector<pid_t> pids;
  std::vector<int> outs;
  for (int p = 0; p < procs; ++p) {
    int out[2];
    if (pipe(out) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(ready[0]);
      close(go[1]);
      const std::string args[] = {self, "--worker", dir, std::to_string(threads), std::to_string(ops),
                                  std::to_string(max_bytes), std::to_string(p),
                                  std::to_string(ready[1]), std::to_string(go[0])};
      std::vector<char*> argv2;
      for (const auto& a : args) argv2.push_back(const_cast<char*>(a.c_str()));
      argv2.push_back(nullptr);
      execv(self, argv2.data());
      _exit(127);
    }
    close(out[1]);
    pids.push_back(pid);
    outs.push_back(out[0]);
  }
  close(ready[1]);
  close(go[0]);
  for (int got = 0; got < procs;) {
    char buf[64];
    const ssize_t r = read(ready[0], buf, sizeof buf);
    if (r <= 0) break;
    got += int(r);
  }
  const double start = now_ms();
  close(go[1]);  // everyone starts now
  std::vector<std::string> results(static_cast<size_t>(procs), std::string());
  int exit_failures = 0;
  for (int p = 0; p < procs; ++p) {
    char buf[4096];
    ssize_t r;
    while ((r = read(outs[size_t(p)], buf, sizeof buf)) > 0) results[size_t(p)].append(buf, size_t(r));
    close(outs[size_t(p)]);
    int st = 0;
    waitpid(pids[size_t(p)], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++exit_failures;
  }
  const double wall = now_ms() - start;
  close(ready[0]);

  unsigned long long ops_by[kOps] = {}, errors = 0, busy = 0, wrong = 0, busy_logs = 0,
                     compiles = 0, store_failures = 0, evictions = 0, waits = 0;
  double slowest = 0;
  for (const auto& r : results) {
    for (int k = 0; k < kOps; ++k) ops_by[k] += field(r, kOpNames[k]);
    errors += field(r, "errors");
    busy += field(r, "busy");
    wrong += field(r, "wrong");
    busy_logs += field(r, "busy_logs");
    compiles += field(r, "compiles");
    store_failures += field(r, "store_failures");
    evictions += field(r, "evictions");
    waits += field(r, "waits");
    slowest = std::max(slowest, field_ms(r));
  }
  unsigned long long total = 0;
  for (int k = 0; k < kOps; ++k) total += ops_by[k];
  std::printf("stress: %d processes x %d threads x %d operations on one cache (bound %llu MiB)\n",
              procs, threads, ops, (unsigned long long)max_mib);
  std::printf("| operation | count |\n|---|---:|\n");
  for (int k = 0; k < kOps; ++k) std::printf("| %s | %llu |\n", kOpNames[k], ops_by[k]);
  std::printf("| **total** | **%llu** |\n\n", total);
  std::printf("wall %.2f s, %.0f operations/s; NVRTC compiles %llu (24 distinct kernels; more "
              "only after eviction), evictions %llu, waits %llu\n",
              wall / 1000, double(total) / (wall / 1000), compiles, evictions, waits);
  std::printf("errors %llu, busy/locked reaching a caller %llu, busy/locked in logs %llu, wrong "
              "results %llu, store failures %llu, worker exit failures %d\n",
              errors, busy, busy_logs, wrong, store_failures, exit_failures);
  if (own_dir) {
    const std::string cmd = "rm -rf '" + dir + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  }
  const bool ok = total == static_cast<unsigned long long>(procs) * unsigned(threads) * unsigned(ops) &&
                  errors == 0 && busy == 0 && busy_logs == 0 && wrong == 0 && store_failures == 0 &&
                  exit_failures == 0;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
