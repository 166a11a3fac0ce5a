// What the reliability tests (tests/reliability/) share: programs to compile and their
// reference results, synthetic entries, a log capture, raw access to the database's files,
// and worker processes (this program re-executed with --worker ...; they start together on
// a pipe barrier and report one line on stdout). The headers they need come with it.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/handles.h"
#include "kjit/kjit.h"
#include "store/entry.h"
#include "support/db.h"
#include "support/entry_file_edit.h"
#include "support/test_support.h"
#include "util/sha256.h"

namespace kjit::test::reliability {

using kjit::test::TempDir;

inline std::string g_self;

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// ---- programs ----------------------------------------------------------------------------

struct Program {
  std::string source;
  std::string target = "sm_90";
  std::vector<std::string> options;
  std::vector<std::string> exprs;
};

const char* const kBrokenCubSource = R"(
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void broken(float* out) {
  using BlockReduce = cub::BlockReduce<float, 128>;
  __shared__ typename BlockReduce::TempStorage temp;
  out[0] = BlockReduce(temp).Sum(kjit_undefined_identifier);
}
)";

inline Program program(const std::string& kind) {
  Program p;
  if (kind == "cub") {
    p.source = kjit::test::kCubReduceSource;
    p.options = {"-I" + kjit::test::cub_include_dir()};
  } else if (kind == "broken") {
    p.source = kBrokenCubSource;
    p.options = {"-I" + kjit::test::cub_include_dir()};
  } else if (kind == "saxpy") {
    p.source = kjit::test::kSaxpySource;
  } else if (kind == "template") {
    p.source = kjit::test::kTemplateSource;
    p.exprs = {"scale<float, 4>"};
  } else {  // "small<N>": a tiny kernel with its own constant and name
    const std::string n = kind.substr(5);
    p.source = "extern \"C\" __global__ void small_" + n + "(int* p) { p[threadIdx.x] = " + n +
               " * 7 + threadIdx.x; }\n";
  }
  return p;
}

struct Out {
  kjit_status status = KJIT_ERROR_INTERNAL;
  int tier = -1;
  std::string ptx, cubin, log, key, lowered, message;
  std::string digest() const {
    return kjit::to_hex(kjit::sha256(ptx + std::string(1, '\0') + cubin + '\0' + lowered));
  }
};

inline kjit_options* make_options(const Program& p) {
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, p.target.c_str());
  for (const auto& opt : p.options) kjit_options_add(o, opt.c_str());
  for (const auto& e : p.exprs) kjit_options_add_name_expression(o, e.c_str());
  return o;
}

inline Out read_binary(kjit_status st, kjit_binary* b) {
  Out r;
  r.status = st;
  if (st != KJIT_OK) r.message = kjit_last_error();
  if (!b) return r;
  size_t n = 0;
  const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
  if (p) r.ptx.assign(static_cast<const char*>(p), n);
  p = kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &n);
  if (p) r.cubin.assign(static_cast<const char*>(p), n);
  r.tier = kjit_binary_tier(b);
  r.key = kjit_binary_key(b);
  r.log = kjit_binary_log(b);
  for (size_t i = 0; i < kjit_binary_name_count(b); ++i) {
    r.lowered += std::string(kjit_binary_name_expression(b, i)) + "=" +
                 kjit_binary_lowered_name_at(b, i) + ";";
  }
  return r;
}

// Compiles `p` through `cache` (NULL: no cache at all, the reference).
inline Out compile(kjit_cache* cache, const Program& p) {
  kjit_compiler* c = nullptr;
  if (kjit_compiler_create(cache, 1, &c) != KJIT_OK) return Out{};
  kjit_options* o = make_options(p);
  kjit_binary* b = nullptr;
  const kjit_status st = kjit_compile(c, p.source.c_str(), o, &b);
  Out r = read_binary(st, b);
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  return r;
}

inline const Out& reference(const std::string& kind) {
  static std::mutex mu;
  static std::map<std::string, Out> refs;
  std::lock_guard<std::mutex> lock(mu);
  auto it = refs.find(kind);
  if (it == refs.end()) it = refs.emplace(kind, compile(nullptr, program(kind))).first;
  return it->second;
}

inline kjit_cache* open_cache(const std::string& dir, uint64_t max_bytes = 0) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  o.max_size_bytes = max_bytes;
  kjit_cache* c = nullptr;
  if (kjit_cache_open(&o, &c) != KJIT_OK) return nullptr;
  return c;
}

inline kjit_cache_stats stats_of(kjit_cache* c) {
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(c, &s);
  return s;
}

inline kjit::Cache& internal(kjit_cache* c) {
  return *c->cache;
}

// ---- synthetic entries (raw inserts: no NVRTC) ----------------------------------------------

inline std::string synthetic_key(const std::string& tag) {
  return kjit::to_hex(kjit::sha256("kjit-test-synthetic:" + tag));
}

inline std::string synthetic_bytes(const std::string& tag, size_t size) {
  std::mt19937_64 rng(std::hash<std::string>()(tag));
  std::string out(size, '\0');
  for (char& ch : out) ch = static_cast<char>(rng());
  return out;
}

inline kjit::Entry synthetic(const std::string& tag, size_t size) {
  kjit::Entry e;
  e.key = synthetic_key(tag);
  e.target = "sm_90";
  e.ptx = synthetic_bytes(tag, size);
  e.kernels = {"syn_" + tag};
  e.toolchain = "synthetic";
  e.program_name = "synthetic.cu";
  e.compile_ms = 1;
  e.created = static_cast<int64_t>(time(nullptr));
  return e;
}

// What a raw lookup of a synthetic entry gave.
enum class Got { Right, Missing, Corrupt, Wrong, Error };

inline Got get_synthetic(kjit_cache* c, const std::string& tag, size_t size) {
  kjit_binary* b = nullptr;
  const kjit_status st = kjit_cache_get(c, synthetic_key(tag).c_str(), &b);
  if (st == KJIT_ERROR_NOT_FOUND) return Got::Missing;
  if (st == KJIT_ERROR_CACHE_CORRUPT) return Got::Corrupt;
  if (st != KJIT_OK) return Got::Error;
  size_t n = 0;
  const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
  const bool right = p && std::string(static_cast<const char*>(p), n) == synthetic_bytes(tag, size);
  kjit_binary_destroy(b);
  return right ? Got::Right : Got::Wrong;
}

// ---- log capture -----------------------------------------------------------------------

struct LogCapture {
  std::mutex mu;
  std::vector<std::string> warnings;  // WARN and ERROR messages
};
inline LogCapture g_log;

inline void capture_log(int level, const char* message, void*) {
  if (level < KJIT_LOG_WARN) return;
  std::lock_guard<std::mutex> lock(g_log.mu);
  g_log.warnings.emplace_back(message);
}

inline void start_capture() {
  {
    std::lock_guard<std::mutex> lock(g_log.mu);
    g_log.warnings.clear();
  }
  kjit_set_log_callback(capture_log, nullptr);
}

inline std::vector<std::string> stop_capture() {
  kjit_set_log_callback(nullptr, nullptr);
  std::lock_guard<std::mutex> lock(g_log.mu);
  return g_log.warnings;
}

// ---- raw SQLite access (independent of kjit) -----------------------------------------------

using kjit::test::Db;

inline std::string integrity(const std::string& db) {
  Db d(db);
  return d.query("PRAGMA integrity_check");
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline int count_quarantined(const std::string& dir) {
  int n = 0;
  for (const auto& f : files_in(dir)) {
    if (f.find(".corrupt-") != std::string::npos && f.find("-wal") == std::string::npos &&
        f.find("-shm") == std::string::npos) {
      ++n;
    }
  }
  return n;
}

inline std::string file_bytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

inline void put_bytes(const std::string& path, const std::string& bytes) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

inline bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

inline uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// ---- worker processes ----------------------------------------------------------------------

// All workers start at once: each writes a byte to `ready` when prepared and blocks on `go`
// until the parent closes its end.
struct Barrier {
  int ready[2] = {-1, -1}, go[2] = {-1, -1};
  Barrier() {
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) std::abort();
    fcntl(ready[1], F_SETFD, 0);  // the ends the workers use survive exec
    fcntl(go[0], F_SETFD, 0);
  }
  ~Barrier() {
    for (int fd : {ready[0], ready[1], go[0], go[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  std::vector<std::string> args() const {
    return {std::to_string(ready[1]), std::to_string(go[0])};
  }
  // After spawning: waits for `n` workers to be ready (bounded), then releases them all.
  bool release(int n, int timeout_ms) {
    close(ready[1]);
    ready[1] = -1;
    close(go[0]);
    go[0] = -1;
    int got = 0;
    const double deadline = now_ms() + timeout_ms;
    while (got < n) {
      pollfd p{ready[0], POLLIN, 0};
      const int left = int(deadline - now_ms());
      if (left <= 0 || poll(&p, 1, left) <= 0) break;
      char buf[64];
      const ssize_t r = read(ready[0], buf, sizeof buf);
      if (r <= 0) break;
      got += int(r);
    }
    close(go[1]);
    go[1] = -1;
    return got == n;
  }
};

inline void worker_wait(int ready_fd, int go_fd) {
  const char c = 'r';
  if (write(ready_fd, &c, 1) != 1) _exit(70);
  close(ready_fd);
  char b;
  while (read(go_fd, &b, 1) > 0) {
  }
  close(go_fd);
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string output;
  int status = -1;
  bool reaped = false;
  bool killed = false;
};

inline Child spawn(const std::vector<std::string>& args) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) std::abort();
  std::vector<std::string> all = {g_self, "--worker"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(p[1], 1);
    execv(g_self.c_str(), argv.data());
    _exit(127);
  }
  close(p[1]);
  c.out = p[0];
  return c;
}

// Reads every child's output to EOF and reaps it; children still running at the deadline
// are killed (and reported as such).
inline void finish(std::vector<Child>& kids, double deadline_ms) {
  for (auto& k : kids) {
    if (k.reaped) continue;
    while (k.out >= 0) {
      pollfd p{k.out, POLLIN, 0};
      const int left = int(deadline_ms - now_ms());
      if (left <= 0) {
        kill(k.pid, SIGKILL);
        k.killed = true;
        break;
      }
      if (poll(&p, 1, std::min(left, 1000)) <= 0) continue;
      char buf[4096];
      const ssize_t r = read(k.out, buf, sizeof buf);
      if (r <= 0) break;
      k.output.append(buf, size_t(r));
    }
    if (k.out >= 0) close(k.out);
    k.out = -1;
    waitpid(k.pid, &k.status, 0);
    k.reaped = true;
  }
}

inline bool exited_ok(const Child& k) {
  return k.reaped && WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0;
}

inline std::string field(const std::string& out, const std::string& name) {
  const std::string tag = name + "=";
  size_t pos = out.find(tag);
  if (pos == std::string::npos) return "";
  pos += tag.size();
  return out.substr(pos, out.find_first_of(" \n", pos) - pos);
}

inline unsigned long long number(const std::string& out, const std::string& name) {
  const std::string v = field(out, name);
  return v.empty() ? 999999 : std::strtoull(v.c_str(), nullptr, 10);
}

// Worker: compile program `kind` through the cache in `dir` once everyone is ready.
inline int compile_worker(const std::string& dir, const std::string& kind, int ready_fd,
                          int go_fd) {
  kjit_cache* cache = open_cache(dir);
  if (!cache) return 2;
  kjit_compiler* comp = nullptr;
  if (kjit_compiler_create(cache, 1, &comp) != KJIT_OK) return 3;
  const Program p = program(kind);
  kjit_options* o = make_options(p);
  worker_wait(ready_fd, go_fd);
  kjit_binary* b = nullptr;
  const kjit_status st = kjit_compile(comp, p.source.c_str(), o, &b);
  const Out r = read_binary(st, b);
  kjit_binary_destroy(b);
  const kjit_cache_stats s = stats_of(cache);
  const bool has_log = r.log.find("kjit_undefined_identifier") != std::string::npos;
  std::printf("status=%d compiles=%llu waits=%llu tier=%d digest=%s haslog=%d state=%d\n", int(st),
              (unsigned long long)s.compiles, (unsigned long long)s.waits, r.tier,
              r.digest().c_str(), has_log ? 1 : 0, s.disk_state);
  std::fflush(stdout);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  return 0;
}

// Worker: open the cache in `dir` at the same moment as the others; report its state.
inline int open_worker(const std::string& dir, int ready_fd, int go_fd) {
  worker_wait(ready_fd, go_fd);
  kjit_cache* cache = open_cache(dir);
  if (!cache) return 2;
  const kjit_cache_stats s = stats_of(cache);
  std::printf("state=%d corrupt=%llu message=[%s]\n", s.disk_state,
              (unsigned long long)s.corrupt_entries, s.message);
  std::fflush(stdout);
  kjit_cache_close(cache);
  return 0;
}

inline std::vector<Child> start_workers(const std::vector<std::string>& args, int n,
                                        Barrier& barrier) {
  std::vector<Child> kids;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> a = args;
    for (const auto& b : barrier.args()) a.push_back(b);
    kids.push_back(spawn(a));
  }
  return kids;
}

// The owner's pid from the claims table ("host|pid|start|handle"), 0 if none yet.
inline pid_t claim_owner(const std::string& db) {
  if (!exists(db)) return 0;
  Db d(db);
  const std::string row = d.query("SELECT owner FROM claims WHERE failure IS NULL LIMIT 1");
  if (row.empty() || row.rfind("ERROR", 0) == 0) return 0;
  const size_t a = row.find('|');
  if (a == std::string::npos) return 0;
  return pid_t(std::strtol(row.c_str() + a + 1, nullptr, 10));
}

// The fault worker (test_faults.cpp), run by main() for "--worker fault FAULT DIR".
int fault_worker(const std::string& fault, const std::string& dir);

}  // namespace kjit::test::reliability
