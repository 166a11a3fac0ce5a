// Reliability of the shared cache: compile-once under a multi-process stampede (also with
// the compiling process SIGKILLed, and for a compile error), bounded size with LRU,
// fork() after opening, corruption injection (checked against compiles without a cache)
// and faults (read-only, no permission, disk full, no GPU driver).
//
// Worker processes are this program re-executed with --worker ...; they start together
// on a pipe barrier and report one line on stdout. Nothing here needs a GPU.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
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

namespace {

using kjit::test::TempDir;

std::string g_self;

double now_ms() {
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

Program program(const std::string& kind) {
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

kjit_options* make_options(const Program& p) {
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, p.target.c_str());
  for (const auto& opt : p.options) kjit_options_add(o, opt.c_str());
  for (const auto& e : p.exprs) kjit_options_add_name_expression(o, e.c_str());
  return o;
}

Out read_binary(kjit_status st, kjit_binary* b) {
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
Out compile(kjit_cache* cache, const Program& p) {
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

const Out& reference(const std::string& kind) {
  static std::mutex mu;
  static std::map<std::string, Out> refs;
  std::lock_guard<std::mutex> lock(mu);
  auto it = refs.find(kind);
  if (it == refs.end()) it = refs.emplace(kind, compile(nullptr, program(kind))).first;
  return it->second;
}

kjit_cache* open_cache(const std::string& dir, uint64_t max_bytes = 0) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.c_str();
  o.max_size_bytes = max_bytes;
  kjit_cache* c = nullptr;
  if (kjit_cache_open(&o, &c) != KJIT_OK) return nullptr;
  return c;
}

kjit_cache_stats stats_of(kjit_cache* c) {
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(c, &s);
  return s;
}

kjit::Cache& internal(kjit_cache* c) { return *c->cache; }

// ---- synthetic entries (raw inserts: no NVRTC) ----------------------------------------------

std::string synthetic_key(const std::string& tag) {
  return kjit::to_hex(kjit::sha256("kjit-test-synthetic:" + tag));
}

std::string synthetic_bytes(const std::string& tag, size_t size) {
  std::mt19937_64 rng(std::hash<std::string>()(tag));
  std::string out(size, '\0');
  for (char& ch : out) ch = static_cast<char>(rng());
  return out;
}

kjit::Entry synthetic(const std::string& tag, size_t size) {
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

Got get_synthetic(kjit_cache* c, const std::string& tag, size_t size) {
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
LogCapture g_log;

void capture_log(int level, const char* message, void*) {
  if (level < KJIT_LOG_WARN) return;
  std::lock_guard<std::mutex> lock(g_log.mu);
  g_log.warnings.emplace_back(message);
}

void start_capture() {
  {
    std::lock_guard<std::mutex> lock(g_log.mu);
    g_log.warnings.clear();
  }
  kjit_set_log_callback(capture_log, nullptr);
}

std::vector<std::string> stop_capture() {
  kjit_set_log_callback(nullptr, nullptr);
  std::lock_guard<std::mutex> lock(g_log.mu);
  return g_log.warnings;
}

// ---- raw SQLite access (independent of kjit) -----------------------------------------------

using kjit::test::Db;

std::string integrity(const std::string& db) {
  Db d(db);
  return d.query("PRAGMA integrity_check");
}

std::vector<std::string> files_in(const std::string& dir) {
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

int count_quarantined(const std::string& dir) {
  int n = 0;
  for (const auto& f : files_in(dir)) {
    if (f.find(".corrupt-") != std::string::npos && f.find("-wal") == std::string::npos &&
        f.find("-shm") == std::string::npos) {
      ++n;
    }
  }
  return n;
}

std::string file_bytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void put_bytes(const std::string& path, const std::string& bytes) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    ::mkdir(path.substr(0, slash).c_str(), 0700);
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t file_size(const std::string& path) {
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
  std::vector<std::string> args() const { return {std::to_string(ready[1]), std::to_string(go[0])}; }
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

void worker_wait(int ready_fd, int go_fd) {
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

Child spawn(const std::vector<std::string>& args) {
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
void finish(std::vector<Child>& kids, double deadline_ms) {
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

bool exited_ok(const Child& k) { return k.reaped && WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0; }

std::string field(const std::string& out, const std::string& name) {
  const std::string tag = name + "=";
  size_t pos = out.find(tag);
  if (pos == std::string::npos) return "";
  pos += tag.size();
  return out.substr(pos, out.find_first_of(" \n", pos) - pos);
}

unsigned long long number(const std::string& out, const std::string& name) {
  const std::string v = field(out, name);
  return v.empty() ? 999999 : std::strtoull(v.c_str(), nullptr, 10);
}

// Worker: compile program `kind` through the cache in `dir` once everyone is ready.
int compile_worker(const std::string& dir, const std::string& kind, int ready_fd, int go_fd) {
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
  std::printf("status=%d compiles=%llu waits=%llu tier=%d digest=%s haslog=%d state=%d\n",
              int(st), (unsigned long long)s.compiles, (unsigned long long)s.waits, r.tier,
              r.digest().c_str(), has_log ? 1 : 0, s.disk_state);
  std::fflush(stdout);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  return 0;
}

// Worker: open the cache in `dir` at the same moment as the others; report its state.
int open_worker(const std::string& dir, int ready_fd, int go_fd) {
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

std::vector<Child> start_workers(const std::vector<std::string>& args, int n, Barrier& barrier) {
  std::vector<Child> kids;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> a = args;
    for (const auto& b : barrier.args()) a.push_back(b);
    kids.push_back(spawn(a));
  }
  return kids;
}

// The owner's pid from the claims table ("host|pid|start|handle"), 0 if none yet.
pid_t claim_owner(const std::string& db) {
  if (!exists(db)) return 0;
  Db d(db);
  const std::string row = d.query("SELECT owner FROM claims WHERE failure IS NULL LIMIT 1");
  if (row.empty() || row.rfind("ERROR", 0) == 0) return 0;
  const size_t a = row.find('|');
  if (a == std::string::npos) return 0;
  return pid_t(std::strtol(row.c_str() + a + 1, nullptr, 10));
}

// ---- 1-3: compile once under a stampede ----------------------------------------------------

constexpr int kProcs = 8;

TEST(Stampede, EightProcessesCompileOneCubKernelOnce) {
  TempDir dir;  // fresh: the workers also race to create the database
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK) << ref.message;
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, kProcs, barrier);
  ASSERT_TRUE(barrier.release(kProcs, 120000));
  finish(kids, now_ms() + 300000);
  unsigned long long compiles = 0, waits = 0;
  for (const Child& k : kids) {
    ASSERT_TRUE(exited_ok(k)) << k.output;
    EXPECT_EQ(number(k.output, "status"), 0u) << k.output;
    EXPECT_EQ(field(k.output, "digest"), ref.digest()) << "identical bytes everywhere";
    EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_OK)) << k.output;
    compiles += number(k.output, "compiles");
    waits += number(k.output, "waits");
  }
  EXPECT_EQ(compiles, 1u) << "exactly one NVRTC compile across all processes";
  std::printf("stampede: %d processes, %llu compile(s), %llu waited\n", kProcs, compiles, waits);
  EXPECT_EQ(count_quarantined(dir.path()), 0);
}

TEST(Stampede, OwnerKilledMidCompileIsTakenOver) {
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK) << ref.message;
  // The owner is stopped before it is killed, so it is certain it had not stored the entry;
  // if it had (it finished between being seen and being stopped) the round is repeated.
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    const std::string db = dir.file("kjit.db");
    Barrier barrier;
    std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, kProcs, barrier);
    ASSERT_TRUE(barrier.release(kProcs, 120000));
    pid_t owner = 0;
    const double deadline = now_ms() + 120000;
    while (now_ms() < deadline && !(owner = claim_owner(db))) usleep(2000);
    ASSERT_NE(owner, 0) << "no process claimed the key";
    auto victim = std::find_if(kids.begin(), kids.end(), [&](const Child& k) { return k.pid == owner; });
    ASSERT_NE(victim, kids.end()) << "claim owner " << owner << " is not a worker";
    ASSERT_EQ(kill(owner, SIGSTOP), 0);
    int st = 0;
    ASSERT_EQ(waitpid(owner, &st, WUNTRACED), owner);
    ASSERT_TRUE(WIFSTOPPED(st));
    const bool stored = Db(db).query("SELECT count(*) FROM entries") != "0\n";
    if (stored) {
      kill(owner, SIGCONT);
      finish(kids, now_ms() + 300000);
      std::printf("owner finished before it was stopped; repeating\n");
      continue;
    }
    ASSERT_EQ(kill(owner, SIGKILL), 0);
    waitpid(owner, &victim->status, 0);
    victim->reaped = true;
    victim->killed = true;
    close(victim->out);
    victim->out = -1;
    const double killed_at = now_ms();
    pid_t next = 0;
    while (now_ms() < killed_at + 120000 && ((next = claim_owner(db)) == owner || next == 0) &&
           Db(db).query("SELECT count(*) FROM entries") == "0\n") {
      usleep(2000);
    }
    const double takeover_ms = now_ms() - killed_at;
    finish(kids, now_ms() + 300000);
    unsigned long long compiles = 0;
    int survivors = 0;
    for (const Child& k : kids) {
      if (k.pid == owner) continue;
      ++survivors;
      ASSERT_TRUE(exited_ok(k)) << k.output;
      EXPECT_EQ(number(k.output, "status"), 0u) << k.output;
      EXPECT_EQ(field(k.output, "digest"), ref.digest());
      compiles += number(k.output, "compiles");
    }
    EXPECT_EQ(survivors, kProcs - 1);
    EXPECT_EQ(compiles, 1u) << "one survivor took the claim over and compiled once";
    std::printf("owner killed mid-compile: claim taken over after %.0f ms, %d survivors, "
                "%llu compile(s)\n", takeover_ms, survivors, compiles);
    return;
  }
  FAIL() << "the owner finished before it could be stopped in 3 rounds";
}

TEST(Stampede, CompileErrorIsDeliveredToEveryWaiter) {
  TempDir dir;
  const Out& ref = reference("broken");
  ASSERT_EQ(ref.status, KJIT_ERROR_COMPILE);
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "broken"}, kProcs, barrier);
  ASSERT_TRUE(barrier.release(kProcs, 120000));
  finish(kids, now_ms() + 300000);
  unsigned long long compiles = 0;
  for (const Child& k : kids) {
    ASSERT_TRUE(exited_ok(k)) << k.output;
    EXPECT_EQ(number(k.output, "status"), unsigned(KJIT_ERROR_COMPILE)) << k.output;
    EXPECT_EQ(number(k.output, "haslog"), 1u) << "every process gets NVRTC's log: " << k.output;
    compiles += number(k.output, "compiles");
  }
  EXPECT_EQ(compiles, 1u) << "the failing compile ran once, not once per process";
  std::printf("compile error: %d processes, %llu compile(s)\n", kProcs, compiles);
}

TEST(Stampede, WaitingForAnotherProcessIsCancellable) {
  TempDir dir;
  const std::string db = dir.file("kjit.db");
  Barrier barrier;
  std::vector<Child> kids = start_workers({"compile", dir.path(), "cub"}, 1, barrier);
  ASSERT_TRUE(barrier.release(1, 120000));
  pid_t owner = 0;
  double deadline = now_ms() + 120000;
  while (now_ms() < deadline && !(owner = claim_owner(db))) usleep(2000);
  ASSERT_EQ(owner, kids[0].pid);
  ASSERT_EQ(kill(owner, SIGSTOP), 0);  // it holds the claim and makes no progress
  kjit_cache* c = open_cache(dir.path());
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(c, 1, &comp), KJIT_OK);
  const Program p = program("cub");
  kjit_options* o = make_options(p);
  kjit_future* f = nullptr;
  ASSERT_EQ(kjit_compile_async(comp, p.source.c_str(), o, &f), KJIT_OK);
  deadline = now_ms() + 120000;
  while (now_ms() < deadline && stats_of(c).waits == 0) usleep(2000);
  EXPECT_EQ(stats_of(c).waits, 1u) << "the compile did not wait for the owner";
  ASSERT_EQ(kjit_future_cancel(f), KJIT_OK);
  kjit_binary* b = nullptr;
  EXPECT_EQ(kjit_future_wait(f, 120000, &b), KJIT_ERROR_CANCELLED) << kjit_last_error();
  EXPECT_EQ(stats_of(c).compiles, 0u);
  kjit_binary_destroy(b);
  kjit_future_destroy(f);
  kill(owner, SIGCONT);
  finish(kids, now_ms() + 300000);
  ASSERT_TRUE(exited_ok(kids[0])) << kids[0].output;
  EXPECT_EQ(number(kids[0].output, "status"), 0u);
  // The cancelled waiter left nothing behind: the next request hits.
  EXPECT_EQ(compile(c, p).tier, KJIT_TIER_DISK);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  kjit_cache_close(c);
}

std::string start_time_of(pid_t pid) {
  const std::string stat = file_bytes("/proc/" + std::to_string(pid) + "/stat");
  size_t pos = stat.rfind(')');
  for (int field = 2; field < 22 && pos != std::string::npos; ++field) pos = stat.find(' ', pos + 1);
  return pos == std::string::npos ? "" : stat.substr(pos + 1, stat.find(' ', pos + 1) - pos - 1);
}

// Compiles `kind` asynchronously, giving up (and failing) after `limit_ms`.
Out compile_within(kjit_cache* c, const std::string& kind, int64_t limit_ms) {
  kjit_compiler* comp = nullptr;
  kjit_compiler_create(c, 1, &comp);
  const Program p = program(kind);
  kjit_options* o = make_options(p);
  kjit_future* f = nullptr;
  kjit_compile_async(comp, p.source.c_str(), o, &f);
  kjit_binary* b = nullptr;
  kjit_status st = kjit_future_wait(f, limit_ms, &b);
  if (st == KJIT_ERROR_TIMEOUT) {
    kjit_future_cancel(f);
    kjit_future_wait(f, -1, &b);
  }
  Out r = read_binary(st, b);
  kjit_binary_destroy(b);
  kjit_future_destroy(f);
  kjit_options_destroy(o);
  kjit_compiler_destroy(comp);
  return r;
}

TEST(Stampede, AbandonedClaimsOfLiveProcessesAreTakenOver) {
  TempDir dir;
  const Out& ref = reference("saxpy");
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  stats_of(c);  // the index is opened when first needed: now, before claims are written into it
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  auto claim = [&](pid_t pid, int64_t age) {
    Db d(dir.file("kjit.db"));
    const std::string owner = std::string(host) + "|" + std::to_string(pid) + "|" +
                              start_time_of(pid) + "|0xabandoned";
    ASSERT_TRUE(d.exec("INSERT OR REPLACE INTO claims(key, owner, started, failure) VALUES('" +
                       ref.key + "', '" + owner + "', CAST(strftime('%s','now') AS INTEGER) - " +
                       std::to_string(age) + ", NULL)"));
  };
  // A live process that stopped renewing its claim (it could not write, or hangs).
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  claim(sleeper, 40);
  Out r = compile_within(c, "saxpy", 60000);
  EXPECT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 1u);
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  // This very process, through a handle that is gone (its release failed): taken over at
  // once, without waiting for the lease.
  ASSERT_EQ(kjit_cache_remove(c, ref.key.c_str()), KJIT_OK);
  claim(getpid(), 0);
  r = compile_within(c, "saxpy", 20000);
  EXPECT_EQ(r.status, KJIT_OK) << r.message;
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 2u);
  kjit_cache_close(c);
}

TEST(Stampede, ConcurrentFirstOpensNeverQuarantineAFreshDatabase) {
  // Every round: 8 processes create and open the same new database at the same moment.
  const int rounds = 6;
  int opened = 0;
  for (int round = 0; round < rounds; ++round) {
    TempDir dir;
    Barrier barrier;
    std::vector<Child> kids = start_workers({"open", dir.path()}, kProcs, barrier);
    ASSERT_TRUE(barrier.release(kProcs, 120000));
    finish(kids, now_ms() + 120000);
    for (const Child& k : kids) {
      ASSERT_TRUE(exited_ok(k)) << k.output;
      EXPECT_EQ(number(k.output, "state"), unsigned(KJIT_DISK_OK)) << k.output;
      EXPECT_EQ(number(k.output, "corrupt"), 0u) << k.output;
      ++opened;
    }
    EXPECT_EQ(count_quarantined(dir.path()), 0) << "a fresh database was moved aside";
    EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
  }
  std::printf("concurrent first opens: %d\n", opened);
}

// ---- 4: bounded size -----------------------------------------------------------------------

TEST(BoundedSize, FillingPastTheLimitKeepsTheNewestUnderTheBound) {
  TempDir dir;
  const uint64_t max = 1 << 20;
  kjit_cache* c = open_cache(dir.path(), max);
  ASSERT_NE(c, nullptr);
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, size_t>> inserted;
  uint64_t total = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t size = 1024 + rng() % (16 * 1024);
    const std::string tag = "fill" + std::to_string(i);
    internal(c).insert(synthetic(tag, size));
    inserted.emplace_back(tag, size);
    total += size;
    ASSERT_LE(stats_of(c).disk_bytes, max) << "after insert " << i;
  }
  const kjit_cache_stats s = stats_of(c);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.max_size_bytes, max);
  // The survivors are exactly the newest inserts: a suffix of the insertion order.
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  std::vector<bool> present;
  uint64_t kept = 0;
  for (const auto& [tag, size] : inserted) {
    const Got g = get_synthetic(c, tag, size);
    ASSERT_TRUE(g == Got::Right || g == Got::Missing) << tag;
    present.push_back(g == Got::Right);
    if (g == Got::Right) kept += size;
  }
  const size_t first = size_t(std::find(present.begin(), present.end(), true) - present.begin());
  ASSERT_LT(first, present.size());
  for (size_t i = first; i < present.size(); ++i) {
    EXPECT_TRUE(present[i]) << "entry " << i << " evicted though older entry " << first << " survived";
  }
  EXPECT_LE(kept, max);
  EXPECT_GE(kept, max / 2) << "eviction goes down to a low-water mark, not to nothing";
  kjit_cache_close(c);
  const uint64_t on_disk = file_size(dir.file("kjit.db")) + file_size(dir.file("kjit.db-wal"));
  std::printf("bounded size: inserted %llu KiB into a %llu KiB cache: %zu of %zu entries kept "
              "(%llu KiB), %llu evicted, files %llu KiB\n",
              (unsigned long long)(total >> 10), (unsigned long long)(max >> 10),
              present.size() - first, present.size(), (unsigned long long)(kept >> 10),
              (unsigned long long)s.evictions, (unsigned long long)(on_disk >> 10));
  // Pages are reused after eviction: the file tracks the bound, not what went through it.
  EXPECT_LT(file_size(dir.file("kjit.db")), 3 * max);
  EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
}

TEST(BoundedSize, RecentlyUsedEntriesSurviveEviction) {
  TempDir dir;
  const uint64_t max = 1 << 20;
  const size_t size = 8 << 10;
  kjit_cache* c = open_cache(dir.path(), max);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 100; ++i) internal(c).insert(synthetic("old" + std::to_string(i), size));
  // Make them two days old, the first inserted the oldest.
  ASSERT_TRUE(kjit::test::Db(dir.path() + "/kjit.db")
                  .exec("UPDATE entries SET last_used = "
                        "CAST(strftime('%s','now') AS INTEGER) - 172800 + rowid"));
  // Their files too: a hit records its use in the payload file's time.
  for (const std::string& f : kjit::test::entry_files(dir.path())) {
    const timespec two_days_ago[2] = {{time(nullptr) - 172800, 0}, {time(nullptr) - 172800, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, f.c_str(), two_days_ago, 0), 0);
  }
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  // Use the 20 oldest: hits record recency (coarsely, in the file's time, which eviction
  // reads), so they are now the most recently used.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(get_synthetic(c, "old" + std::to_string(i), size), Got::Right);
  for (int i = 0; i < 40; ++i) internal(c).insert(synthetic("new" + std::to_string(i), size));
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  int evicted = 0;
  bool evicting = true;
  for (int i = 0; i < 100; ++i) {
    const Got g = get_synthetic(c, "old" + std::to_string(i), size);
    if (i < 20) {
      EXPECT_EQ(g, Got::Right) << "recently used old" << i << " was evicted";
      continue;
    }
    if (g == Got::Missing) {
      ++evicted;
      EXPECT_TRUE(evicting) << "old" << i << " evicted after a less recently used one survived";
    } else {
      EXPECT_EQ(g, Got::Right);
      evicting = false;
    }
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(get_synthetic(c, "new" + std::to_string(i), size), Got::Right) << "new" << i;
  }
  EXPECT_GT(evicted, 0);
  EXPECT_LE(stats_of(c).disk_bytes, max);
  std::printf("recency: 20 used entries kept, %d least recently used evicted\n", evicted);
  kjit_cache_close(c);
}

TEST(BoundedSize, EnvironmentSetsTheBound) {
  TempDir dir;
  setenv("KJIT_CACHE_MAX_SIZE", "300k", 1);
  kjit_cache* c = open_cache(dir.path());
  unsetenv("KJIT_CACHE_MAX_SIZE");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(stats_of(c).max_size_bytes, 300u << 10);
  for (int i = 0; i < 100; ++i) internal(c).insert(synthetic("env" + std::to_string(i), 8 << 10));
  EXPECT_LE(stats_of(c).disk_bytes, 300u << 10);
  EXPECT_GT(stats_of(c).evictions, 0u);
  kjit_cache_close(c);
}

TEST(BoundedSize, EvictionNeverTearsAConcurrentRead) {
  // One handle reads entries from disk (no memory tier) while another inserts, evicts and
  // prunes everything, in a loop: a read sees an entry whole or not at all.
  TempDir dir;
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  o.memory_max_bytes = 1;
  o.max_size_bytes = 256 << 10;
  kjit_cache* reader = nullptr;
  kjit_cache* writer = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &reader), KJIT_OK);
  ASSERT_EQ(kjit_cache_open(&o, &writer), KJIT_OK);
  std::atomic<bool> stop{false};
  std::atomic<int> writer_errors{0};
  std::thread churn([&] {
    for (int round = 0; !stop; ++round) {
      try {
        for (int i = 0; i < 8; ++i) internal(writer).insert(synthetic("churn" + std::to_string(i), 20000 + 1000 * size_t(i)));
      } catch (const std::exception&) {
        ++writer_errors;
      }
      uint64_t removed = 0;
      if (kjit_cache_prune(writer, round % 2 ? 0 : 64 << 10, &removed) != KJIT_OK) ++writer_errors;
    }
  });
  int right = 0, missing = 0, bad = 0;
  const double until = now_ms() + 1500;
  while (now_ms() < until) {
    for (int i = 0; i < 8; ++i) {
      const Got g = get_synthetic(reader, "churn" + std::to_string(i), 20000 + 1000 * size_t(i));
      if (g == Got::Right) {
        ++right;
      } else if (g == Got::Missing) {
        ++missing;
      } else {
        ++bad;
      }
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(bad, 0) << "a read saw a torn, corrupt or wrong entry";
  EXPECT_EQ(writer_errors, 0);
  EXPECT_GT(right, 0);
  EXPECT_EQ(stats_of(reader).corrupt_entries, 0u);
  std::printf("reads during eviction: %d whole, %d absent, %d torn\n", right, missing, bad);
  kjit_cache_close(reader);
  kjit_cache_close(writer);
}

// ---- 5: fork() after opening ---------------------------------------------------------------

bool read_byte(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  char b;
  return poll(&p, 1, timeout_ms) == 1 && read(fd, &b, 1) == 1;
}

TEST(Fork, ChildReopensWithItsOwnLocksAndParentIsUnaffected) {
  TempDir dir;
  const Out& ref = reference("saxpy");
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(compile(c, program("saxpy")).status, KJIT_OK);
  internal(c).insert(synthetic("before-fork", 3000));
  ASSERT_EQ(kjit_cache_clear_memory(c), KJIT_OK);
  ASSERT_EQ(compile(c, program("saxpy")).tier, KJIT_TIER_DISK);  // a pooled connection read
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    kjit_cache_clear_memory(c);
    const Out hit = compile(c, program("saxpy"));  // a hit needs no NVRTC
    if (hit.status != KJIT_OK || hit.tier != KJIT_TIER_DISK || hit.digest() != ref.digest()) code = 10;
    if (get_synthetic(c, "before-fork", 3000) != Got::Right) code = 11;
    try {
      internal(c).insert(synthetic("child-1", 4000));
    } catch (const std::exception&) {
      code = 12;
    }
    if (write(up[1], "r", 1) != 1) code = 13;
    if (!read_byte(down[0], 120000)) code = 14;  // the parent has closed its cache now
    try {
      internal(c).insert(synthetic("child-2", 5000));
    } catch (const std::exception&) {
      code = 15;
    }
    kjit_cache_close(c);
    _exit(code);
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(read_byte(up[0], 120000));
  // The parent keeps working while the child has the database open...
  EXPECT_EQ(get_synthetic(c, "child-1", 4000), Got::Right);
  internal(c).insert(synthetic("parent-1", 2000));
  // ...and closing its last connection must not checkpoint away the WAL the child is still
  // using: that needs the child to hold real locks of its own.
  kjit_cache_close(c);
  EXPECT_TRUE(exists(dir.file("kjit.db-wal"))) << "the WAL was removed under the child";
  ASSERT_EQ(write(down[1], "g", 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child exit " << st;
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(get_synthetic(c, "before-fork", 3000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "parent-1", 2000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "child-1", 4000), Got::Right);
  EXPECT_EQ(get_synthetic(c, "child-2", 5000), Got::Right) << "the child's last write was lost";
  EXPECT_EQ(compile(c, program("saxpy")).tier, KJIT_TIER_DISK);
  kjit_cache_close(c);
  EXPECT_EQ(integrity(dir.file("kjit.db")), "ok\n");
}

TEST(Fork, ChildClaimsUnderItsOwnProcessIdentity) {
  TempDir dir;
  const Out& ref = reference("cub");
  ASSERT_EQ(ref.status, KJIT_OK);
  kjit_cache* c = open_cache(dir.path());
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(compile(c, program("saxpy")).status, KJIT_OK);
  const pid_t pid = fork();
  if (pid == 0) {
    const Out r = compile(c, program("cub"));
    _exit(r.status == KJIT_OK && r.digest() == ref.digest() ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  const std::string db = dir.file("kjit.db");
  pid_t owner = 0;
  const double deadline = now_ms() + 120000;
  while (now_ms() < deadline && !(owner = claim_owner(db)) &&
         Db(db).query("SELECT count(*) FROM entries") == "1\n") {
    usleep(1000);
  }
  if (owner) {
    EXPECT_EQ(owner, pid) << "the child claimed the key under the parent's identity";
  }
  // The parent asks for the key the child is compiling: it waits and hits.
  const Out r = compile(c, program("cub"));
  EXPECT_EQ(r.status, KJIT_OK);
  EXPECT_EQ(r.digest(), ref.digest());
  EXPECT_EQ(stats_of(c).compiles, 1u) << "the parent compiled what its child was compiling";
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  kjit_cache_close(c);
}

// ---- 6: corruption injection ---------------------------------------------------------------

// A populated cache, kept as bytes: two real kernels and synthetic entries of many sizes.
// The payload files of a cache directory (its path below it -> bytes).
std::map<std::string, std::string> payload_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& f : kjit::test::entry_files(dir)) out[f.substr(dir.size() + 1)] = file_bytes(f);
  return out;
}

struct Golden {
  std::string db;
  std::map<std::string, std::string> files;  // the entries' payload files
  std::vector<std::pair<std::string, size_t>> syn;
  std::vector<std::string> real = {"saxpy", "template"};
};

const Golden& golden() {
  static Golden g = [] {
    Golden out;
    TempDir dir;
    kjit_cache* c = open_cache(dir.path());
    for (const auto& kind : out.real) compile(c, program(kind));
    std::mt19937 rng(11);
    for (int i = 0; i < 30; ++i) {
      const size_t size = 200 + rng() % 24000;
      out.syn.emplace_back("gold" + std::to_string(i), size);
      internal(c).insert(synthetic(out.syn.back().first, size));
    }
    kjit_cache_close(c);
    // Everything into kjit.db: the compile worker keeps the database open while it lives,
    // so this close was not the last connection's and did not checkpoint.
    // Without free pages (the store's first transactions leave some), so that every page
    // cut or zeroed below held something.
    Db(dir.file("kjit.db")).query("VACUUM");
    const std::string ckpt = Db(dir.file("kjit.db")).query("PRAGMA wal_checkpoint(TRUNCATE)");
    EXPECT_EQ(ckpt.substr(0, 2), "0|") << ckpt;
    out.db = file_bytes(dir.file("kjit.db"));
    out.files = payload_files(dir.path());
    return out;
  }();
  return g;
}

// Totals over every injection, printed at the end of the run.
struct Tally {
  int injected = 0, detected = 0, moved_aside = 0, lost_only = 0, harmless = 0, wrong = 0;
};
Tally g_tally;

struct Outcome {
  int wrong = 0;      // wrong bytes or a failed compile: must never happen
  int missing = 0;    // entries gone (recompiled or a raw miss): allowed
  int errors = 0;     // unexpected statuses from the raw API
  bool detected = false;
  bool moved_aside = false;
  std::string notes;
};

// Uses every entry of the damaged cache in `dir` the way a program and the tools would,
// comparing with compiles made without a cache, then checks that the cache is sound again.
Outcome exercise(const std::string& dir, const std::vector<std::pair<std::string, size_t>>& syn) {
  Outcome r;
  start_capture();
  kjit_cache* c = open_cache(dir);
  if (!c) {
    r.wrong = 1;
    r.notes = "open failed";
    stop_capture();
    return r;
  }
  for (const auto& kind : golden().real) {
    const Out o = compile(c, program(kind));
    if (o.status != KJIT_OK || o.digest() != reference(kind).digest()) {
      ++r.wrong;
      r.notes += kind + ": status " + std::to_string(o.status) + " " + o.message + "; ";
    }
    if (o.tier == KJIT_TIER_COMPILED) ++r.missing;
  }
  int corrupt = 0;
  for (const auto& [tag, size] : syn) {
    switch (get_synthetic(c, tag, size)) {
      case Got::Right: break;
      case Got::Missing: ++r.missing; break;
      case Got::Corrupt: ++r.missing; ++corrupt; break;
      case Got::Wrong: ++r.wrong; r.notes += tag + " wrong bytes; "; break;
      case Got::Error: ++r.errors; r.notes += tag + ": " + kjit_last_error() + "; "; break;
    }
  }
  uint64_t checked = 0, bad = 0;
  if (kjit_cache_verify(c, &checked, &bad) != KJIT_OK) {
    ++r.errors;
    r.notes += std::string("verify: ") + kjit_last_error() + "; ";
  }
  if (kjit_cache_list(c, [](const kjit_cache_entry_info*, void*) { return 0; }, nullptr) != KJIT_OK) {
    ++r.errors;
    r.notes += std::string("list: ") + kjit_last_error() + "; ";
  }
  const kjit_cache_stats s = stats_of(c);
  kjit_cache_close(c);
  const std::vector<std::string> warnings = stop_capture();
  r.moved_aside = count_quarantined(dir) > 0;
  r.detected = s.corrupt_entries > 0 || bad > 0 || corrupt > 0 || r.moved_aside;
  if (r.detected && warnings.empty()) r.notes += "detected but nothing logged; ";
  // Afterwards: a sound database that keeps what is stored in it (damage found only by
  // the verification above may have cost what the first pass stored).
  const std::string check = integrity(dir + "/kjit.db");
  if (check != "ok\n") {
    ++r.errors;
    r.notes += "integrity after use: " + check;
  }
  for (int pass = 0; pass < 2; ++pass) {
    c = open_cache(dir);
    for (const auto& kind : golden().real) {
      const Out o = compile(c, program(kind));
      if (o.status != KJIT_OK || o.digest() != reference(kind).digest()) ++r.wrong;
      if (pass == 1 && o.tier != KJIT_TIER_DISK) {
        ++r.errors;
        r.notes += kind + " not served from disk after recovery (tier " + std::to_string(o.tier) + "); ";
      }
    }
    if (stats_of(c).disk_state != KJIT_DISK_OK || stats_of(c).corrupt_entries != 0) {
      ++r.errors;
      r.notes += "still not sound after recovery: " + std::string(stats_of(c).message) + "; ";
    }
    kjit_cache_close(c);
  }
  return r;
}

// Installs `files` (name -> bytes) in a fresh directory and exercises it.
// A value of `files` that removes the file instead.
const std::string kDeleted = "<deleted>";

Outcome inject(const std::string& what, const std::map<std::string, std::string>& files,
               const std::vector<std::pair<std::string, size_t>>& syn, bool must_detect) {
  TempDir dir;
  // The golden entries' payload files, then `files` over them.
  for (const auto& [name, bytes] : golden().files) put_bytes(dir.file(name), bytes);
  for (const auto& [name, bytes] : files) {
    if (bytes == kDeleted) {
      ::unlink(dir.file(name).c_str());
    } else {
      put_bytes(dir.file(name), bytes);
    }
  }
  Outcome r = exercise(dir.path(), syn);
  g_tally.injected++;
  g_tally.wrong += r.wrong;
  if (r.detected) {
    g_tally.detected++;
    if (r.moved_aside) g_tally.moved_aside++;
  } else if (r.missing) {
    g_tally.lost_only++;
  } else {
    g_tally.harmless++;
  }
  EXPECT_EQ(r.wrong, 0) << what << ": " << r.notes;
  EXPECT_EQ(r.errors, 0) << what << ": " << r.notes;
  if (must_detect) {
    EXPECT_TRUE(r.detected) << what << ": not detected; " << r.notes;
  }
  return r;
}

TEST(Corruption, RandomByteFlipsInTheDatabase) {
  const Golden& g = golden();
  const unsigned seed = unsigned(std::time(nullptr));
  std::mt19937 rng(seed);
  std::printf("byte flips: seed %u, database %zu bytes\n", seed, g.db.size());
  int detected = 0;
  const int trials = 40;
  for (int t = 0; t < trials; ++t) {
    std::string db = g.db;
    const int flips = 1 + int(rng() % 8);
    std::string where;
    for (int i = 0; i < flips; ++i) {
      const size_t at = rng() % db.size();
      db[at] = char(db[at] ^ char(1 + rng() % 255));
      where += std::to_string(at) + " ";
    }
    const Outcome r = inject("flips at " + where + "(seed " + std::to_string(seed) + ")",
                             {{"kjit.db", db}}, g.syn, false);
    detected += r.detected;
  }
  std::printf("byte flips: %d trials, %d detected, the rest harmless or only lost entries\n",
              trials, detected);
}

TEST(Corruption, TruncatedGarbageAndZeroedPages) {
  const Golden& g = golden();
  const size_t n = g.db.size();
  for (size_t len : {size_t(0), size_t(17), size_t(100), size_t(4096), size_t(8192), n / 3,
                     n / 2, n - 4096, n - 1}) {
    inject("truncated to " + std::to_string(len), {{"kjit.db", g.db.substr(0, len)}}, g.syn,
           len > 0);
  }
  std::mt19937 rng(5);
  std::string garbage(n, '\0');
  for (char& ch : garbage) ch = char(rng());
  inject("garbage", {{"kjit.db", garbage}}, g.syn, true);
  inject("header then garbage", {{"kjit.db", g.db.substr(0, 100) + garbage.substr(100)}}, g.syn, true);
  for (size_t page : {size_t(1), size_t(2), n / 4096 / 2, n / 4096 - 1}) {
    std::string db = g.db;
    std::fill(db.begin() + long(page * 4096), db.begin() + long(page * 4096 + 4096), '\0');
    inject("page " + std::to_string(page) + " zeroed", {{"kjit.db", db}}, g.syn, false);
  }
}

// Applies `sql` to a copy of the golden database with plain SQLite.
std::string edited(const std::string& sql) {
  TempDir dir;
  put_bytes(dir.file("kjit.db"), golden().db);
  {
    Db d(dir.file("kjit.db"));
    sqlite3_create_function(
        d.h, "sha256", 1, SQLITE_UTF8, nullptr,
        [](sqlite3_context* ctx, int, sqlite3_value** v) {
          const auto* p = static_cast<const char*>(sqlite3_value_blob(v[0]));
          const kjit::Digest dg = kjit::sha256(p ? p : "", size_t(sqlite3_value_bytes(v[0])));
          sqlite3_result_blob(ctx, dg.data(), int(dg.size()), SQLITE_TRANSIENT);
        },
        nullptr, nullptr);
    EXPECT_TRUE(d.exec(sql)) << sql << ": " << sqlite3_errmsg(d.h);
    EXPECT_GT(sqlite3_total_changes(d.h), 0) << sql;
  }
  return file_bytes(dir.file("kjit.db"));
}

using kjit::test::entry_file_relative;
using kjit::test::RawEntry;
using kjit::test::to_json_layout;

// The golden payload file of `key`, parsed.
RawEntry golden_raw(const std::string& key) {
  return kjit::test::parse_raw_entry(golden().files.at(entry_file_relative(key)));
}

// Overrides for inject(): `key`'s payload file replaced by `r`.
std::map<std::string, std::string> rewritten(const std::string& key, const RawEntry& r) {
  return {{entry_file_relative(key), kjit::test::raw_entry_bytes(r)}};
}

// Overrides for inject(): `key`'s payload file bytes changed by `edit`.
std::map<std::string, std::string> edited_file(const std::string& key,
                                               const std::function<void(std::string&)>& edit) {
  std::string bytes = golden().files.at(entry_file_relative(key));
  edit(bytes);
  return {{entry_file_relative(key), bytes}};
}

// Overrides for inject(): the payload files of `a` and `b` under each other's name.
std::map<std::string, std::string> swapped_files(const std::string& a, const std::string& b) {
  const auto& f = golden().files;
  return {{entry_file_relative(a), f.at(entry_file_relative(b))},
          {entry_file_relative(b), f.at(entry_file_relative(a))}};
}

TEST(Corruption, DamagedEntriesAreRemovedAndRecompiled) {
  const Golden& g = golden();
  const std::string saxpy = reference("saxpy").key, templ = reference("template").key;
  const std::string gold3 = synthetic_key("gold3"), elsewhere = synthetic_key("elsewhere");
  const size_t meta_end = 176 + golden_raw(saxpy).parts[0].size();
  auto raw = [](const std::string& key, const std::function<void(RawEntry&)>& edit) {
    RawEntry r = golden_raw(key);
    edit(r);
    return rewritten(key, r);
  };
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases = {
      {"cubin bytes zeroed",
       edited_file(saxpy, [&](std::string& b) { std::fill(b.end() - long(golden_raw(saxpy).parts[2].size()), b.end(), '\0'); })},
      {"ptx checksum zeroed", edited_file(templ, [](std::string& b) { std::fill(b.begin() + 128, b.begin() + 144, '\0'); })},
      {"synthetic payload one byte changed", edited_file(gold3, [](std::string& b) { b[b.size() - 10] ^= 1; })},
      {"layout 1 (metadata as JSON, as development builds before 0.2.0 wrote it)",
       raw(saxpy, [](RawEntry& r) { to_json_layout(&r); })},
      {"binary metadata cut short (checksum matching)", raw(saxpy, [](RawEntry& r) { r.parts[0].resize(r.parts[0].size() - 3); })},
      {"binary metadata: a string longer than the rest (checksum matching)",
       raw(templ, [](RawEntry& r) { r.parts[0][8 + 5] = '\x01'; })},
      {"binary metadata with bytes after its last field (checksum matching)", raw(saxpy, [](RawEntry& r) { r.parts[0] += '\0'; })},
      {"metadata checksum mismatch",
       edited_file(saxpy, [&](std::string& b) {
         const size_t at = b.find("sm_90", 176);
         ASSERT_LT(at, meta_end);
         b[at + 4] = '8';
       })},
      {"a part missing (checksums matching)", raw(templ, [](RawEntry& r) { r.parts[2].clear(); })},
      {"a part of another entry", raw(saxpy, [&](RawEntry& r) {
         r.parts[3] = golden_raw(gold3).parts[2];
         r.sum_as[3] = 2;
         r.sum_key = gold3;
       })},
      {"another layout version", edited_file(gold3, [](std::string& b) { b[8] = 3; })},
      {"layout 1 with binary metadata", edited_file(gold3, [](std::string& b) { b[8] = 1; })},
      {"not a payload file", edited_file(templ, [](std::string& b) { b.replace(0, 8, "SQLite f"); })},
      {"file truncated", edited_file(synthetic_key("gold5"), [](std::string& b) { b.resize(b.size() / 2); })},
      {"file cut inside its header", edited_file(synthetic_key("gold6"), [](std::string& b) { b.resize(100); })},
      {"file empty", edited_file(synthetic_key("gold8"), [](std::string& b) { b.clear(); })},
      {"file with bytes appended", edited_file(synthetic_key("gold9"), [](std::string& b) { b += "more"; })},
      // Files as written; only the name they are filed under changed.
      {"two kernels' files swapped", swapped_files(saxpy, templ)},
      {"two synthetic entries' files swapped", swapped_files(gold3, synthetic_key("gold4"))},
      {"a file moved to an unused key",
       {{entry_file_relative(gold3), kDeleted}, {entry_file_relative(elsewhere), g.files.at(entry_file_relative(gold3))}}},
      // The index.
      {"index row moved to an unused key",
       {{"kjit.db", edited("UPDATE entries SET key = '" + elsewhere + "' WHERE key = '" + gold3 + "'")}}},
      {"schema: a column renamed",
       {{"kjit.db", edited("PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = replace(sql, 'compile_ms', "
                           "'compile_mx') WHERE name = 'entries'")}}},
      {"schema: a trigger that still parses but counts wrong",
       {{"kjit.db", edited("PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = replace(sql, 'bytes + new.bytes', "
                           "'bytes - new.bytes') WHERE name = 'entries_count_insert'")}}},
  };
  for (const auto& [what, files] : cases) inject(what, files, g.syn, true);
  // A file that is gone is a miss (a hit reads the file alone); the next store of the key
  // replaces its row, verify drops it. Never wrong, not necessarily seen as damage.
  inject("an entry without its file", {{entry_file_relative(synthetic_key("gold7")), kDeleted}}, g.syn,
         false);
}

// Leaves `dir` holding a database whose newest transactions are only in its -wal, as after
// a crash: a child inserts entries and exits without closing the cache.
void leave_wal(const std::string& dir, const std::string& prefix, int n) {
  const pid_t pid = fork();
  if (pid == 0) {
    kjit_cache* c = open_cache(dir);
    for (int i = 0; i < n; ++i) internal(c).insert(synthetic(prefix + std::to_string(i), 3000 + 100 * size_t(i)));
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
}

TEST(Corruption, DeletedOrMismatchedWalAndShm) {
  const Golden& g = golden();
  std::map<std::string, std::string> ours, foreign;
  std::vector<std::pair<std::string, size_t>> syn = g.syn;
  {
    TempDir a, b;
    put_bytes(a.file("kjit.db"), g.db);
    leave_wal(a.path(), "wal", 12);
    leave_wal(b.path(), "foreign", 12);
    for (const char* f : {"kjit.db", "kjit.db-wal", "kjit.db-shm"}) {
      ours[f] = file_bytes(a.file(f));
      foreign[f] = file_bytes(b.file(f));
    }
    for (const auto& [f, bytes] : payload_files(a.path())) ours[f] = bytes;
    ASSERT_GT(ours["kjit.db-wal"].size(), 0u) << "no WAL was left behind";
  }
  for (int i = 0; i < 12; ++i) syn.emplace_back("wal" + std::to_string(i), 3000 + 100 * size_t(i));
  // The WAL as left behind is replayed: every entry is there.
  const Outcome base = exercise([&] {
    static TempDir d;
    for (const auto& [f, bytes] : golden().files) put_bytes(d.file(f), bytes);
    for (const auto& [f, bytes] : ours) put_bytes(d.file(f), bytes);
    return d.path();
  }(), syn);
  EXPECT_EQ(base.wrong + base.missing + base.errors, 0) << base.notes;
  std::mt19937 rng(3);
  auto without = [&](std::initializer_list<const char*> names) {
    auto m = ours;
    for (const char* n : names) m.erase(n);
    return m;
  };
  inject("-wal deleted", without({"kjit.db-wal"}), syn, false);
  inject("-shm deleted", without({"kjit.db-shm"}), syn, false);
  inject("-wal and -shm deleted", without({"kjit.db-wal", "kjit.db-shm"}), syn, false);
  {
    auto m = ours;
    for (char& ch : m["kjit.db-shm"]) ch = char(rng());
    inject("-shm garbage", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"].resize(m["kjit.db-wal"].size() / 2);
    inject("-wal truncated", m, syn, false);
  }
  {
    auto m = ours;
    std::string& w = m["kjit.db-wal"];
    for (int i = 0; i < 8; ++i) {
      const size_t at = rng() % w.size();
      w[at] = char(w[at] ^ 0x5a);
    }
    inject("-wal bytes flipped", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"] = foreign["kjit.db-wal"];
    inject("-wal of another database", m, syn, false);
  }
  {
    auto m = ours;
    m["kjit.db-wal"] = foreign["kjit.db-wal"];
    m["kjit.db-shm"] = foreign["kjit.db-shm"];
    inject("-wal and -shm of another database", m, syn, false);
  }
}

// Printed when the program ends, for whichever corruption tests ran in it.
class TallyPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_tally.injected == 0) return;
    std::printf("corruption: injected=%d detected=%d (database moved aside: %d) lost-only=%d "
                "harmless=%d wrong-bytes=%d\n",
                g_tally.injected, g_tally.detected, g_tally.moved_aside, g_tally.lost_only,
                g_tally.harmless, g_tally.wrong);
  }
};

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
  std::printf("warnings=%zu state=%d compiles=%llu store_failures=%llu stores=%llu message=[%s] "
              "notes=[%s]\n",
              warnings.size(), s.disk_state, (unsigned long long)s.compiles,
              (unsigned long long)s.store_failures, (unsigned long long)s.stores, s.message,
              notes.c_str());
  for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
  std::fflush(stdout);
}

bool become(uid_t uid, const std::string& dir) {
  if (geteuid() != 0) return true;  // not root: permission bits already apply
  return chown(dir.c_str(), uid, uid) == 0 && setgid(uid) == 0 && setuid(uid) == 0;
}

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
      if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
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
    std::printf("after: verified=%llu bad=%llu\n", (unsigned long long)checked, (unsigned long long)badn);
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
  EXPECT_EQ(number(k.output, "compiles"), 2u) << "what was stored before is still served: " << k.output;
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
    EXPECT_GE(number(k.output, "store_failures"), 1u) << fault << ": the disk never filled: " << k.output;
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

int main(int argc, char** argv) {
  g_self = argv[0];
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) g_self.assign(buf, size_t(n));
  if (argc >= 2 && std::strcmp(argv[1], "--worker") == 0) {
    const std::string mode = argc > 2 ? argv[2] : "";
    if (mode == "compile" && argc == 7) {
      return compile_worker(argv[3], argv[4], std::atoi(argv[5]), std::atoi(argv[6]));
    }
    if (mode == "open" && argc == 6) {
      return open_worker(argv[3], std::atoi(argv[4]), std::atoi(argv[5]));
    }
    if (mode == "fault" && argc == 5) return fault_worker(argv[3], argv[4]);
    std::fprintf(stderr, "unknown worker mode\n");
    return 64;
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new TallyPrinter);
  return RUN_ALL_TESTS();
}
