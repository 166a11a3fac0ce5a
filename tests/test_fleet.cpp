// Fleet-wide single flight against a real redis-server: "nodes" are processes of this
// program, each with its own cache directory, sharing one server. Counts come from each
// node's statistics; results are compared byte for byte. Times are printed, not asserted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "blas/plan.h"
#include "compile/compiler.h"
#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/fleet_claim.h"
#include "store/remote.h"
#include "support/redis_server.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::test::have;
using kjit::test::TempDir;
std::string g_self;

// Kernel k: its own name and constant, tiny to compile.
std::string source_for(int k) {
  return "extern \"C\" __global__ void fleet_" + std::to_string(k) +
         "(int* p) { p[threadIdx.x] = " + std::to_string(9100 + k) + " + threadIdx.x; }\n";
}

kjit::CompileOptions options() {
  kjit::CompileOptions o;
  o.target = "sm_90";
  return o;
}

// ---- the node program (this binary with --node) ----

// Waits for `go` to exist, compiles kernels first..first+count-1, prints its counts.
int node_main(const std::string& dir, const std::string& url, int first, int count,
              const std::string& go) {
  kjit::CacheConfig c;
  c.directory = dir;
  c.remote = kjit::RemoteConfig::from_environment();
  c.remote.url = url;
  double t0 = 0;
  std::string digest_input;
  int errors = 0;
  kjit::CacheStats s;
  kjit::RemoteStats r;
  {
    kjit::Cache cache(c);
    kjit::Compiler comp(&cache, 1);
    comp.set_mode(kjit::CompileMode::InProcess);
    // NVRTC loaded and its version read (the key covers it) before the clock starts: on a
    // real fleet every node does this on its own machine, here 16 share a few cores.
    comp.key(source_for(first), options());
    std::printf("ready\n");
    std::fflush(stdout);
    while (access(go.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    t0 = kjit::monotonic_ms();
    // Says "waiting" once this node waits on another node's claim (when asked to).
    std::atomic<bool> done{std::getenv("FLEET_TEST_SAY_WAITING") == nullptr};
    std::thread watcher([&] {
      while (!done && cache.stats().remote_claim_waits == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!done) {
        std::printf("waiting\n");
        std::fflush(stdout);
      }
    });
    for (int k = first; k < first + count; ++k) {
      const kjit::Outcome o = comp.compile(source_for(k), options());
      if (o.status != KJIT_OK || !o.entry) {
        std::fprintf(stderr, "node %d kernel %d: %d %s\n", getpid(), k, o.status,
                     o.message.c_str());
        ++errors;
        continue;
      }
      digest_input += o.entry->cubin.str() + o.entry->ptx.str();
      if (std::getenv("FLEET_TEST_TRACE")) {
        std::fprintf(stderr, "trace %d k%d tier=%d at %.0f ms\n", getpid(), k, int(o.tier),
                     kjit::monotonic_ms() - t0);
      }
    }
    done = true;
    watcher.join();
    s = cache.stats();
    r = cache.remote()->stats();
  }
  std::printf(
      "compiles=%llu claims=%llu waits=%llu wait_hits=%llu wait_timeouts=%llu remote_hits=%llu "
      "breaker=%d errors=%d elapsed_ms=%.0f digest=%s\n",
      (unsigned long long)s.compiles, (unsigned long long)s.remote_claims,
      (unsigned long long)s.remote_claim_waits, (unsigned long long)s.remote_claim_wait_hits,
      (unsigned long long)s.remote_claim_wait_timeouts, (unsigned long long)s.remote_hits,
      r.breaker_open ? 1 : 0, errors, kjit::monotonic_ms() - t0,
      kjit::to_hex(kjit::sha256(digest_input)).c_str());
  return errors == 0 ? 0 : 1;
}

// Takes the fleet claim of kernel 0 as a node about to compile it would, says so, and
// then never finishes (the test kills it).
int holder_main(const std::string& dir, const std::string& url) {
  kjit::CacheConfig c;
  c.directory = dir;
  c.remote = kjit::RemoteConfig::from_environment();
  c.remote.url = url;
  kjit::Cache cache(c);
  kjit::Compiler comp(&cache, 1);
  const std::string key = comp.key(source_for(0), options());
  kjit::FleetClaims fleet(cache.remote());
  std::optional<kjit::Entry> found;
  std::unique_ptr<kjit::FleetClaim> held;
  fleet.acquire(key, "holder|" + std::to_string(getpid()), {}, &found, &held);
  std::printf("claimed=%d\n", held ? 1 : 0);
  std::fflush(stdout);
  for (;;) pause();
}

// ---- the test side ----

struct Node {
  pid_t pid = -1;
  int fd = -1;
  std::string out;
  int exit_code = -1;
  int signal = 0;
};

Node spawn(const std::vector<std::string>& args) {
  int p[2];
  if (pipe(p) != 0) return {};
  Node n;
  n.pid = fork();
  if (n.pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(g_self.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(g_self.c_str(), argv.data());
    _exit(127);
  }
  close(p[1]);
  n.fd = p[0];
  return n;
}

std::string read_line(Node& n) {
  std::string line;
  char ch;
  while (read(n.fd, &ch, 1) == 1 && ch != '\n') line += ch;
  n.out += line + "\n";
  return line;
}

void finish(Node& n) {
  char buf[4096];
  ssize_t got;
  while ((got = read(n.fd, buf, sizeof buf)) > 0) n.out.append(buf, size_t(got));
  close(n.fd);
  int status = 0;
  waitpid(n.pid, &status, 0);
  n.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  n.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// The value of `name=` in a node's report line (its last line).
std::string text_field(const std::string& out, const char* name) {
  std::string line = " " + out;
  for (char& c : line) c = c == '\n' ? ' ' : c;
  const std::string tag = std::string(" ") + name + "=";
  const size_t pos = line.find(tag);
  if (pos == std::string::npos) return "";
  const size_t start = pos + tag.size();
  return line.substr(start, line.find(' ', start) - start);
}

unsigned long long field(const std::string& out, const char* name) {
  const std::string v = text_field(out, name);
  return v.empty() ? 99999 : std::strtoull(v.c_str(), nullptr, 10);
}

struct Totals {
  unsigned long long compiles = 0, claims = 0, waits = 0, wait_hits = 0, wait_timeouts = 0;
  double max_elapsed_ms = 0;
};

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kjit::remote_tier_built()) GTEST_SKIP() << "remote tier not built (no hiredis)";
    if (!have("redis-server") || !have("redis-cli"))
      GTEST_SKIP() << "redis-server/redis-cli not installed";
    // Short settings for the test; a node copies them from the environment.
    setenv("KJIT_REMOTE_CLAIM_LEASE_MS", "600", 1);
    setenv("KJIT_REMOTE_CLAIM_WAIT_MS", "30000", 1);
    setenv("KJIT_REMOTE_TIMEOUT_MS", "300", 1);
    setenv("KJIT_REMOTE_COOLDOWN_MS", "60000", 1);
    setenv("KJIT_REMOTE_TTL", "3600", 1);
    unsetenv("FLEET_TEST_SAY_WAITING");
  }

  // Starts `n` nodes on kernels [first, first + count), each with its own directory.
  std::vector<Node> start_nodes(int n, const std::string& url, int first, int count) {
    std::vector<Node> nodes;
    for (int i = 0; i < n; ++i) {
      dirs_.push_back(std::make_unique<TempDir>());
      nodes.push_back(spawn({"--node", dirs_.back()->path(), url, std::to_string(first),
                             std::to_string(count), go_.file("go")}));
    }
    for (Node& node : nodes) EXPECT_EQ(read_line(node), "ready");
    return nodes;
  }
  void go() { kjit::test::write_file(go_.file("go"), "go"); }
  // Returns once every node has said that it waits on a claim.
  // (Nodes say it when started with FLEET_TEST_SAY_WAITING set.)
  static void until_waiting(std::vector<Node>& nodes) {
    for (Node& n : nodes) EXPECT_EQ(read_line(n), "waiting");
  }

  Totals finish_all(std::vector<Node>& nodes, bool expect_same_digest = true) {
    Totals t;
    std::string digest;
    for (Node& n : nodes) {
      finish(n);
      EXPECT_EQ(n.exit_code, 0) << n.out;
      t.compiles += field(n.out, "compiles");
      t.claims += field(n.out, "claims");
      t.waits += field(n.out, "waits");
      t.wait_hits += field(n.out, "wait_hits");
      t.wait_timeouts += field(n.out, "wait_timeouts");
      t.max_elapsed_ms = std::max(t.max_elapsed_ms, double(field(n.out, "elapsed_ms")));
      const std::string d = text_field(n.out, "digest");
      EXPECT_EQ(d.size(), 64u) << n.out;
      if (digest.empty()) digest = d;
      if (expect_same_digest) {
        EXPECT_EQ(d, digest) << "byte-identical results on every node";
      }
    }
    return t;
  }

  TempDir redis_dir_, go_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
};

TEST_F(FleetTest, SixteenColdNodesCompileEachKernelOnce) {
  double one_node_ms = 0;
  {
    auto redis = kjit::test::start_redis_socket(redis_dir_.path());
    std::vector<Node> one = start_nodes(1, redis->url(), 0, 4);
    go();
    const Totals t = finish_all(one);
    EXPECT_EQ(t.compiles, 4u);
    one_node_ms = t.max_elapsed_ms;
    unlink(go_.file("go").c_str());
  }
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());  // a fresh, empty server
  std::vector<Node> nodes = start_nodes(16, redis->url(), 0, 4);
  const double t0 = kjit::monotonic_ms();
  go();
  const Totals t = finish_all(nodes);
  const double fleet_ms = kjit::monotonic_ms() - t0;
  EXPECT_EQ(t.compiles, 4u) << "one NVRTC compile per kernel across 16 nodes";
  EXPECT_EQ(t.claims, 4u);
  EXPECT_EQ(t.wait_timeouts, 0u);
  EXPECT_EQ(t.wait_hits, t.waits) << "every wait ended with the entry";
  EXPECT_EQ(redis->cli("--scan --pattern 'kjit:claim:*'"), "") << "every claim released";
  std::printf(
      "[ fleet ] 16 nodes x 4 kernels: %.0f ms wall (slowest node %.0f ms); one node alone: "
      "%.0f ms; ratio %.2f; compiles %llu, waits %llu\n",
      fleet_ms, t.max_elapsed_ms, one_node_ms, t.max_elapsed_ms / one_node_ms, t.compiles, t.waits);
  RecordProperty("fleet_wall_ms", int(fleet_ms));
  RecordProperty("one_node_ms", int(one_node_ms));
}

// A program that reads files is found through its manifest on another node: both travel
// through the fleet tier. The same path with the same bytes there hits; other bytes compile.
TEST_F(FleetTest, ManifestsTravelThroughTheFleetTier) {
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir inc, first, second;
  kjit::test::write_file(inc.file("v.h"), "#define V 8811\n");
  const std::string src = "#include <v.h>\nextern \"C\" __global__ void k(int* p) { *p = V; }\n";
  kjit::CompileOptions o = options();
  o.outputs = KJIT_OUTPUT_PTX;
  o.raw = {"-I" + inc.path()};
  auto config = [&](const std::string& dir) {
    kjit::CacheConfig c;
    c.directory = dir;
    c.remote = kjit::RemoteConfig::from_environment();
    c.remote.url = redis->url();
    return c;
  };
  std::string key;
  {
    kjit::Cache cache(config(first.path()));
    kjit::Compiler comp(&cache, 1);
    comp.set_mode(kjit::CompileMode::InProcess);
    const kjit::Outcome a = comp.compile(src, o);
    ASSERT_EQ(a.status, KJIT_OK) << a.message;
    key = a.entry->key;
    ASSERT_NE(cache.remote(), nullptr);
    cache.remote()->flush();  // the entry and its manifest are written
  }
  kjit::Cache cache(config(second.path()));
  kjit::Compiler comp(&cache, 1);
  comp.set_mode(kjit::CompileMode::InProcess);
  const kjit::Outcome b = comp.compile(src, o);
  ASSERT_EQ(b.status, KJIT_OK) << b.message;
  EXPECT_EQ(b.tier, KJIT_TIER_REMOTE);
  EXPECT_EQ(b.entry->key, key);
  EXPECT_EQ(cache.stats().compiles, 0u);
  kjit::test::write_file(inc.file("v.h"), "#define V 8822\n");
  const kjit::Outcome c = comp.compile(src, o);
  ASSERT_EQ(c.status, KJIT_OK) << c.message;
  EXPECT_EQ(c.tier, KJIT_TIER_COMPILED);
  EXPECT_NE(c.entry->ptx.find("8822"), std::string::npos);
}

TEST_F(FleetTest, OwnerKilledMidCompileIsTakenOverAfterItsLease) {
  setenv("FLEET_TEST_SAY_WAITING", "1", 1);
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir holder_dir;
  Node holder = spawn({"--hold", holder_dir.path(), redis->url()});
  ASSERT_EQ(read_line(holder), "claimed=1");
  std::vector<Node> nodes = start_nodes(3, redis->url(), 0, 1);
  const double t0 = kjit::monotonic_ms();
  go();
  until_waiting(nodes);
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // past a lease: still renewed
  const double killed_at = kjit::monotonic_ms();
  kill(holder.pid, SIGKILL);
  finish(holder);
  EXPECT_EQ(holder.signal, SIGKILL);
  const Totals t = finish_all(nodes);
  EXPECT_EQ(t.compiles, 1u) << "one node took over; the others waited for it";
  EXPECT_EQ(t.claims, 1u);
  EXPECT_EQ(t.waits, 3u) << "every node waited while the owner lived";
  EXPECT_EQ(t.wait_hits, 2u);
  EXPECT_EQ(t.wait_timeouts, 0u) << "taken over well before the deadline";
  std::printf(
      "[ fleet ] owner killed %.0f ms after the nodes started; they finished %.0f ms after "
      "the kill (lease 600 ms)\n",
      killed_at - t0, t0 + t.max_elapsed_ms - killed_at);
}

TEST_F(FleetTest, RedisStoppedWhileNodesWaitTheyCompileThemselves) {
  setenv("FLEET_TEST_SAY_WAITING", "1", 1);
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir holder_dir;
  Node holder = spawn({"--hold", holder_dir.path(), redis->url()});
  ASSERT_EQ(read_line(holder), "claimed=1");
  std::vector<Node> nodes = start_nodes(4, redis->url(), 0, 1);
  go();
  until_waiting(nodes);
  redis->pause();  // SIGSTOP: connections stay open, nothing answers
  const Totals t = finish_all(nodes);
  redis->resume();
  kill(holder.pid, SIGKILL);
  finish(holder);
  EXPECT_EQ(t.waits, 4u);
  EXPECT_EQ(t.compiles, 4u) << "each node compiled itself";
  EXPECT_EQ(t.wait_timeouts, 0u) << "ended by the server's timeout, not the deadline";
  std::printf("[ fleet ] Redis stopped: slowest node finished %.0f ms after start\n",
              t.max_elapsed_ms);
}

TEST_F(FleetTest, RedisKilledWhileNodesWaitTheyCompileAndTheBreakerOpens) {
  setenv("FLEET_TEST_SAY_WAITING", "1", 1);
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir holder_dir;
  Node holder = spawn({"--hold", holder_dir.path(), redis->url()});
  ASSERT_EQ(read_line(holder), "claimed=1");
  std::vector<Node> nodes = start_nodes(4, redis->url(), 0, 2);
  go();
  until_waiting(nodes);
  redis->kill_now();
  const Totals t = finish_all(nodes);
  kill(holder.pid, SIGKILL);
  finish(holder);
  EXPECT_EQ(t.waits, 4u);
  EXPECT_EQ(t.compiles, 8u) << "each node compiled both kernels itself";
  EXPECT_EQ(t.wait_timeouts, 0u);
  for (const Node& n : nodes) EXPECT_EQ(field(n.out, "breaker"), 1u) << n.out;
}

TEST_F(FleetTest, StaleClaimOfADeadOwnerIsNotHonouredPastItsLease) {
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir probe_dir;
  std::string key;
  {
    kjit::CacheConfig c;
    c.directory = probe_dir.path();
    c.memory_only = true;
    kjit::Cache cache(c);
    kjit::Compiler comp(&cache, 1);
    key = comp.key(source_for(0), options());
  }
  // Left by an owner that is gone, without an expiry (as a server restored from a dump, or
  // an operator's copy, would keep it): well formed, then garbage.
  for (const std::string& value :
       {kjit::claim_value(500, 3, "gone-host|4242|1|0x1"), std::string("not a claim")}) {
    redis->cli("FLUSHALL");
    redis->cli("SET kjit:claim:" + key + " '" + value + "'");
    ASSERT_EQ(redis->cli("TTL kjit:claim:" + key), "-1");
    std::vector<Node> nodes = start_nodes(4, redis->url(), 0, 1);
    go();
    const Totals t = finish_all(nodes);
    unlink(go_.file("go").c_str());
    EXPECT_EQ(t.compiles, 1u) << value;
    EXPECT_EQ(t.claims, 1u) << value;
    EXPECT_EQ(t.waits, 4u) << value;
    EXPECT_EQ(t.wait_timeouts, 0u) << value;
    EXPECT_EQ(redis->cli("EXISTS kjit:claim:" + key), "0") << "released by the node that took over";
  }
}

TEST_F(FleetTest, ReadOnlyNodeWaitsOnAClaimButNeverTakesOne) {
  setenv("FLEET_TEST_SAY_WAITING", "1", 1);
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir holder_dir;
  Node holder = spawn({"--hold", holder_dir.path(), redis->url()});
  ASSERT_EQ(read_line(holder), "claimed=1");
  setenv("KJIT_REMOTE_MODE", "ro", 1);
  std::vector<Node> nodes = start_nodes(2, redis->url(), 0, 2);
  unsetenv("KJIT_REMOTE_MODE");
  go();
  until_waiting(nodes);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const Node& n : nodes) EXPECT_EQ(waitpid(n.pid, nullptr, WNOHANG), 0) << "still waiting";
  kill(holder.pid, SIGKILL);
  finish(holder);
  const Totals t = finish_all(nodes);
  EXPECT_EQ(t.claims, 0u);
  EXPECT_EQ(t.waits, 2u);
  EXPECT_EQ(t.compiles, 4u);
  EXPECT_EQ(redis->cli("--scan --pattern 'kjit:claim:*'"), "") << "no claim from a read-only node";
}

// The counters reach kjit_cache_stats (the struct `kjit cache stats` prints), per handle
// and in the database's totals.
TEST_F(FleetTest, ClaimsAreCountedInThePublicStatistics) {
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  TempDir dir;
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = dir.path().c_str();
  const std::string url = redis->url();
  o.remote_url = url.c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK);
  kjit_compiler* comp = nullptr;
  ASSERT_EQ(kjit_compiler_create(cache, 1, &comp), KJIT_OK);
  kjit_options* opts = nullptr;
  kjit_options_create(&opts);
  kjit_options_set_target(opts, "sm_90");
  kjit_binary* b = nullptr;
  ASSERT_EQ(kjit_compile(comp, source_for(7).c_str(), opts, &b), KJIT_OK);
  kjit_binary_destroy(b);
  kjit_cache_stats s = KJIT_CACHE_STATS_INIT;
  ASSERT_EQ(kjit_cache_stats_get(cache, &s), KJIT_OK);
  EXPECT_EQ(s.remote_claims, 1u);
  EXPECT_EQ(s.total_remote_claims, 1u);
  EXPECT_EQ(s.remote_claim_waits, 0u);
  EXPECT_EQ(s.remote_claim_wait_timeouts, 0u);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(comp);
  kjit_cache_close(cache);
  EXPECT_EQ(redis->cli("--scan --pattern 'kjit:claim:*'"), "") << "released";
}

// GEMM plans through the fleet tier, as far as a machine without a GPU goes: a plan that
// node A persists reaches node B (its own directory) when B's scope is A's, is not on
// disk until B keeps it, and never decodes under another scope, even when misfiled under
// the other scope's key. (cublasLtMatmulAlgoCheck, which B runs before keeping it, needs
// a GPU: tests/gemm_gpu/.)
TEST_F(FleetTest, GemmPlansAreSharedOnlyWithinTheirScope) {
  using kjit::blas::DeviceInfo;
  auto redis = kjit::test::start_redis_socket(redis_dir_.path());
  DeviceInfo dev;
  dev.cc_major = 9;
  dev.sm_count = 132;
  dev.name = "NVIDIA H100 80GB HBM3";
  dev.driver_version = 13000;
  dev.lt_version = 130100;
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.m = 64;
  d.n = 48;
  d.k = 32;
  d.a_type = KJIT_GEMM_BF16;
  const auto addr = [](uintptr_t v) { return reinterpret_cast<const void*>(v); };
  const kjit::blas::Problem p =
      kjit::blas::prepare(&d, addr(0x7f0000000000), addr(0x7f0001000000), addr(0x7f0002000000),
                          addr(0x7f0003000000), nullptr);
  const kjit::blas::PlanKey key = kjit::blas::make_key(p, dev, 1 << 20);
  kjit::blas::PersistedPlan plan;
  for (size_t i = 0; i < plan.algo.size(); ++i) plan.algo[i] = uint8_t(i * 5 + 1);
  plan.tuned = true;
  plan.tuned_us = 42.5;
  const std::string vals = kjit::blas::validators(dev);
  const std::string pkey = kjit::blas::persist_key(key, vals);
  const std::string ns = kjit::blas::kPlanNamespace;

  TempDir a_dir, b_dir, c_dir;
  kjit::CacheConfig ca;
  ca.directory = a_dir.path();
  ca.remote.url = redis->url();
  kjit::Cache a(ca);
  a.put_shared_value(ns, pkey, kjit::blas::encode_plan(key, vals, plan));

  kjit::CacheConfig cb = ca;
  cb.directory = b_dir.path();
  cb.remote.read_only = true;  // reading nodes need no write access
  kjit::Cache b(cb);
  bool from_remote = false;
  std::optional<std::string> got = b.get_shared_value(ns, pkey, &from_remote);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(from_remote);
  std::string why;
  const auto rec = kjit::blas::decode_plan(*got, key, vals, &why);
  ASSERT_TRUE(rec.has_value()) << why;
  EXPECT_EQ(rec->algo, plan.algo);
  EXPECT_TRUE(rec->tuned);
  EXPECT_FALSE(b.facts().get_value(ns, pkey).has_value()) << "kept only once verified";
  b.facts().put_value(ns, pkey, *got);  // what Gemm does after cublasLtMatmulAlgoCheck
  got = b.get_shared_value(ns, pkey, &from_remote);
  EXPECT_FALSE(from_remote) << "from its own disk now";

  // Other scopes: another SM count (part of the plan key), another device, driver or
  // cuBLASLt (the validators). Their keys differ; a value misfiled under one never decodes.
  std::vector<std::pair<kjit::blas::PlanKey, DeviceInfo>> others;
  DeviceInfo o = dev;
  o.sm_count = 114;
  others.emplace_back(kjit::blas::make_key(p, o, 1 << 20), o);
  o = dev;
  o.name = "NVIDIA H200";
  others.emplace_back(key, o);
  o = dev;
  o.driver_version = 13010;
  others.emplace_back(key, o);
  o = dev;
  o.lt_version = 130200;
  others.emplace_back(key, o);
  kjit::CacheConfig cc = cb;
  cc.directory = c_dir.path();
  kjit::Cache c(cc);
  for (const auto& [other_key, other_dev] : others) {
    const std::string other_vals = kjit::blas::validators(other_dev);
    const std::string other_pkey = kjit::blas::persist_key(other_key, other_vals);
    EXPECT_NE(other_pkey, pkey);
    EXPECT_FALSE(c.get_shared_value(ns, other_pkey, &from_remote).has_value());
    redis->cli("COPY kjit:value:" + ns + ":" + pkey + " kjit:value:" + ns + ":" + other_pkey);
    got = c.get_shared_value(ns, other_pkey, &from_remote);
    ASSERT_TRUE(got.has_value()) << "misfiled copy present";
    EXPECT_FALSE(kjit::blas::decode_plan(*got, other_key, other_vals, &why).has_value())
        << other_vals;
  }
}

TEST(FleetClaimValue, LeaseIsReadFromWellFormedValuesOnly) {
  EXPECT_EQ(kjit::parse_claim_lease(kjit::claim_value(1234, 5, "h|1|2|0x3"), 99), 1234);
  EXPECT_EQ(kjit::parse_claim_lease("kjit-claim1 x 1 o", 99), 99);
  EXPECT_EQ(kjit::parse_claim_lease("kjit-claim1 -5 1 o", 99), 99);
  EXPECT_EQ(kjit::parse_claim_lease("", 99), 99);
  EXPECT_EQ(kjit::parse_claim_lease(kjit::kClaimReleased, 99), 99);
}

}  // namespace

int main(int argc, char** argv) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  g_self = n > 0 ? std::string(buf, size_t(n)) : argv[0];
  if (argc == 7 && std::strcmp(argv[1], "--node") == 0) {
    return node_main(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]), argv[6]);
  }
  if (argc == 4 && std::strcmp(argv[1], "--hold") == 0) return holder_main(argv[2], argv[3]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
