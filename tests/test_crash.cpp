// Crash consistency: writer processes insert entries (distinct keys, keys shared by all
// writers, a pool of keys they overwrite, and a few real NVRTC compiles) into one cache and
// are SIGKILLed at random moments. After every cycle the database must pass SQLite's
// integrity check, every entry must verify and have all its parts, the size totals must
// match the rows, and every entry a writer reported as committed (after kjit returned)
// must still be there with its exact bytes.
//
// 100 cycles by default; KJIT_SOAK_CYCLES=N runs more, KJIT_SOAK_SECONDS=S stops a long
// run after S seconds (but never before 100 cycles unless N says so).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/handles.h"
#include "kjit/kjit.h"
#include "store/entry.h"
#include "support/db.h"
#include "support/entry_file_edit.h"
#include "support/test_support.h"
#include "util/sha256.h"

namespace {

using kjit::test::TempDir;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Every writer derives an entry's bytes from its tag alone, so concurrent writers of one
// tag agree and the checker knows what must be there.
size_t size_for(const std::string& tag) {
  const size_t h = std::hash<std::string>()(tag);
  return h % 8 == 0 ? 20000 + h % 40000 : 64 + h % 9000;  // mostly small, some many pages
}

std::string bytes_for(const std::string& tag) {
  std::mt19937_64 rng(std::hash<std::string>()(tag) ^ 0x9e3779b97f4a7c15ull);
  std::string out(size_for(tag), '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

std::string key_for(const std::string& tag) {
  return kjit::to_hex(kjit::sha256("kjit-test-crash:" + tag));
}

kjit::Entry entry_for(const std::string& tag) {
  kjit::Entry e;
  e.key = key_for(tag);
  e.target = "sm_90";
  // Some entries have two parts, so a torn entry (one part without the other) is visible.
  const std::string b = bytes_for(tag);
  if (b.size() % 3 == 0) {
    e.ptx = b.substr(0, b.size() / 2);
    e.cubin = b.substr(b.size() / 2);
  } else {
    e.ptx = b;
  }
  e.kernels = {"k_" + tag};
  e.toolchain = "crash-test";
  e.program_name = "crash.cu";
  e.created = static_cast<int64_t>(time(nullptr));
  return e;
}

std::string small_source(int k) {
  return "extern \"C\" __global__ void crash_" + std::to_string(k) +
         "(int* p) { p[threadIdx.x] = " + std::to_string(1000 + k) + " * threadIdx.x; }\n";
}

kjit_cache* open_cache(const std::string& dir, uint64_t max_bytes = 0) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  o.max_size_bytes = max_bytes;
  kjit_cache* c = nullptr;
  return kjit_cache_open(&o, &c) == KJIT_OK ? c : nullptr;
}

void report(int fd, const std::string& line) {
  const std::string l = line + "\n";  // one write() below PIPE_BUF: atomic
  if (write(fd, l.data(), l.size()) != ssize_t(l.size())) _exit(71);
}

// A writer runs until it is killed. It reports "put <tag>" or "compiled <k> <key>" only
// after kjit returned success, i.e. after the transaction committed.
[[noreturn]] void writer(const std::string& dir, unsigned seed, int fd, bool compiles,
                         uint64_t max_bytes) {
  kjit_cache* c = open_cache(dir, max_bytes);
  if (!c) _exit(72);
  kjit_compiler* comp = nullptr;
  kjit_options* opts = nullptr;
  if (compiles) {
    kjit_compiler_create(c, 1, &comp);
    kjit_options_create(&opts);
    kjit_options_set_target(opts, "sm_90");
  }
  std::mt19937 rng(seed);
  int own = 0;
  for (;;) {
    const unsigned op = rng() % 16;
    if (compiles && op == 0) {
      const int k = int(rng() % 6);
      kjit_cache_stats before{};
      before.struct_size = sizeof before;
      kjit_cache_stats_get(c, &before);
      kjit_binary* b = nullptr;
      const kjit_status st = kjit_compile(comp, small_source(k).c_str(), opts, &b);
      kjit_cache_stats after{};
      after.struct_size = sizeof after;
      kjit_cache_stats_get(c, &after);
      if (st != KJIT_OK) _exit(73);
      const int tier = kjit_binary_tier(b);
      if (tier == KJIT_TIER_DISK || (tier == KJIT_TIER_COMPILED && after.stores > before.stores)) {
        report(fd, "compiled " + std::to_string(k) + " " + kjit_binary_key(b));
      }
      kjit_binary_destroy(b);
      continue;
    }
    if (op == 1) {  // readers die mid-read too
      kjit_binary* b = nullptr;
      kjit_cache_get(c, key_for("shared" + std::to_string(rng() % 16)).c_str(), &b);
      kjit_binary_destroy(b);
      continue;
    }
    std::string tag;
    if (op < 6) {
      tag = "shared" + std::to_string(rng() % 16);  // every writer writes these
    } else if (op < 14 || own >= 3) {
      tag = "pool" + std::to_string(rng() % 300);  // overwritten again and again
    } else {
      tag = "own" + std::to_string(seed) + "-" + std::to_string(own++);  // only this writer
    }
    try {
      c->cache->insert(entry_for(tag));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer %u: insert failed: %s\n", seed, e.what());
      _exit(74);
    }
    report(fd, "put " + tag);
  }
}

using kjit::test::Db;

struct Totals {
  int cycles = 0, writers = 0, killed = 0, exited_badly = 0;
  uint64_t reports = 0, checked_entries = 0;
};

// Drains the report pipe into `committed` (tag -> "") and `compiled` (key -> k).
void drain(int fd, std::set<std::string>* committed, std::map<std::string, int>* compiled,
           uint64_t* reports, std::string* partial) {
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) partial->append(buf, size_t(n));
  size_t start = 0, nl;
  while ((nl = partial->find('\n', start)) != std::string::npos) {
    const std::string line = partial->substr(start, nl - start);
    start = nl + 1;
    ++*reports;
    if (line.rfind("put ", 0) == 0) {
      committed->insert(line.substr(4));
    } else if (line.rfind("compiled ", 0) == 0) {
      const size_t sp = line.find(' ', 9);
      (*compiled)[line.substr(sp + 1)] = std::atoi(line.c_str() + 9);
    }
  }
  partial->erase(0, start);
}

// Checks the database as SQLite and as kjit see it; returns a description of every problem.
std::string check(const std::string& dir, const std::set<std::string>& committed,
                  const std::map<std::string, int>& compiled, uint64_t max_bytes,
                  uint64_t* entries_checked) {
  std::string problems;
  {
    Db d(dir + "/kjit.db");
    const std::string ic = d.query("PRAGMA integrity_check");
    if (ic != "ok\n") problems += "integrity_check: " + ic.substr(0, 300) + "\n";
    // Every writer of the first cycle may be killed before the schema is committed (on a
    // loaded machine): an empty database is then what a crash leaves, and kjit's next open
    // (below) creates the schema.
    const bool has_schema = d.query("SELECT count(*) FROM sqlite_master") != "0\n";
    if (has_schema) {
      // Files are put in place before their row commits and removed after their row's
      // deletion commits: a crash may leave a file without a row (indexed again by
      // verify), never a row without its file.
      std::istringstream rows(d.query("SELECT key FROM entries"));
      int fileless = 0;
      for (std::string key; std::getline(rows, key);) {
        if (::access(kjit::test::entry_file_path(dir, key).c_str(), F_OK) != 0) ++fileless;
      }
      if (fileless) problems += "entries without their file: " + std::to_string(fileless) + "\n";
      const std::string totals = d.query("SELECT entries, bytes FROM totals");
      const std::string actual = d.query("SELECT count(*), coalesce(sum(bytes), 0) FROM entries");
      if (totals != actual) problems += "totals " + totals + " but rows " + actual;
      if (max_bytes) {
        const uint64_t bytes = std::strtoull(actual.c_str() + actual.find('|') + 1, nullptr, 10);
        if (bytes > max_bytes) problems += "over the size bound: " + actual;
      }
    }
  }
  kjit_cache* c = open_cache(dir, max_bytes);
  if (!c) return problems + "cannot open the cache\n";
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(c, &s);
  if (s.disk_state != KJIT_DISK_OK) problems += std::string("disk state: ") + s.message + "\n";
  uint64_t checked = 0, bad = 0;
  if (kjit_cache_verify(c, &checked, &bad) != KJIT_OK || bad != 0) {
    problems += "verify: " + std::to_string(bad) + " bad of " + std::to_string(checked) + " " +
                kjit_last_error() + "\n";
  }
  *entries_checked += checked;
  int missing = 0, wrong = 0;
  for (const std::string& tag : committed) {
    kjit_binary* b = nullptr;
    const kjit_status st = kjit_cache_get(c, key_for(tag).c_str(), &b);
    if (st != KJIT_OK) {
      if (++missing <= 5)
        problems += "committed entry " + tag + " missing: " + kjit_last_error() + "\n";
      continue;
    }
    const kjit::Entry want = entry_for(tag);
    size_t n = 0;
    const void* ptx = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
    std::string got = ptx ? std::string(static_cast<const char*>(ptx), n) : "";
    const void* cubin = kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &n);
    std::string got_cubin = cubin ? std::string(static_cast<const char*>(cubin), n) : "";
    if (got != want.ptx || got_cubin != want.cubin) {
      if (++wrong <= 5) problems += "committed entry " + tag + " has wrong bytes\n";
    }
    kjit_binary_destroy(b);
  }
  for (const auto& [key, k] : compiled) {
    kjit_binary* b = nullptr;
    if (kjit_cache_get(c, key.c_str(), &b) != KJIT_OK) {
      problems += "compiled kernel " + std::to_string(k) + " missing\n";
      continue;
    }
    if (std::string(kjit_binary_kernel_name(b, 0) ? kjit_binary_kernel_name(b, 0) : "") !=
        "crash_" + std::to_string(k)) {
      problems += "compiled kernel " + std::to_string(k) + " is another kernel\n";
    }
    kjit_binary_destroy(b);
  }
  if (missing > 5 || wrong > 5) {
    problems +=
        std::to_string(missing) + " missing and " + std::to_string(wrong) + " wrong in all\n";
  }
  kjit_cache_close(c);
  return problems;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Runs kill cycles on one cache directory. Writers are forked (the test process has no
// threads and never runs NVRTC itself).
Totals run_cycles(const std::string& dir, int cycles, double seconds, uint64_t max_bytes,
                  bool check_presence) {
  Totals t;
  int fds[2];
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
  std::set<std::string> committed;
  std::map<std::string, int> compiled;
  std::string partial;
  std::mt19937 rng(unsigned(std::time(nullptr)));
  const double start = now_ms();
  for (int cycle = 0; cycle < cycles || (seconds > 0 && now_ms() - start < seconds * 1000);
       ++cycle) {
    if (cycle >= cycles && seconds <= 0) break;
    const int n = 2 + int(rng() % 3);
    std::vector<pid_t> pids;
    for (int w = 0; w < n; ++w) {
      const unsigned seed = unsigned(cycle * 16 + w) ^ unsigned(rng());
      const bool compiles = w == 0 && cycle % 2 == 0;
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        writer(dir, seed, fds[1], compiles, max_bytes);
      }
      pids.push_back(pid);
    }
    t.writers += n;
    // Kill each writer at its own random moment (some while it opens the cache, some
    // mid-transaction, some mid-compile).
    std::vector<double> at;
    for (int w = 0; w < n; ++w) at.push_back(now_ms() + double(rng() % 150));
    for (int w = 0; w < n; ++w) {
      const double wait = at[size_t(w)] - now_ms();
      if (wait > 0) usleep(useconds_t(wait * 1000));
      kill(pids[size_t(w)], SIGKILL);
    }
    for (pid_t pid : pids) {
      int st = 0;
      waitpid(pid, &st, 0);
      if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
        ++t.killed;
      } else {
        ++t.exited_badly;
        ADD_FAILURE() << "cycle " << cycle << ": a writer exited by itself (status " << st << ")";
      }
    }
    drain(fds[0], &committed, &compiled, &t.reports, &partial);
    static const std::set<std::string> none_set;
    static const std::map<std::string, int> none_map;
    const std::string problems =
        check(dir, check_presence ? committed : none_set, check_presence ? compiled : none_map,
              max_bytes, &t.checked_entries);
    ++t.cycles;
    if (!problems.empty()) {
      ADD_FAILURE() << "after cycle " << cycle << ":\n" << problems;
      break;
    }
  }
  close(fds[0]);
  close(fds[1]);
  std::printf(
      "kill cycles: %d, writers %d (killed %d), commits reported %llu, distinct "
      "entries expected %zu + %zu compiled, entries verified %llu, %.1f s\n",
      t.cycles, t.writers, t.killed, (unsigned long long)t.reports, committed.size(),
      compiled.size(), (unsigned long long)t.checked_entries, (now_ms() - start) / 1000);
  return t;
}

TEST(Crash, KilledWritersNeverLoseOrTearCommittedEntries) {
  TempDir dir;
  const int cycles = env_int("KJIT_SOAK_CYCLES", 100);
  const Totals t = run_cycles(dir.path(), cycles, env_int("KJIT_SOAK_SECONDS", 0), 0, true);
  EXPECT_GE(t.cycles, cycles);
  EXPECT_GT(t.reports, 0u);
  EXPECT_EQ(t.exited_badly, 0);
}

TEST(Crash, KilledWritersWhileEvicting) {
  // A small bound: most inserts evict in the same transaction. Committed entries may be
  // evicted legitimately, so only consistency and the bound are checked.
  TempDir dir;
  const int cycles = std::max(10, env_int("KJIT_SOAK_CYCLES", 100) / 5);
  const Totals t = run_cycles(dir.path(), cycles, 0, 2u << 20, false);
  EXPECT_GE(t.cycles, cycles);
  EXPECT_EQ(t.exited_badly, 0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
