// The fleet tier beyond one server, against real processes on loopback (127.0.0.1): a
// master, a replica and three Sentinels with the master killed mid-stampede; a Redis
// Cluster of three masters resharded (ASK, MOVED) during lookups, then a master killed;
// heavy entries (1.5 MB round trip, a 200 MB hostile value refused). "Nodes" are
// processes of this program. Counts are printed for the record and asserted.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "kjit/kjit.h"
#include "store/cache.h"
#include "store/remote.h"
#include "support/redis_server.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::test::cli;
using kjit::test::free_port;
using kjit::test::have;
using kjit::test::RedisCluster;
using kjit::test::RedisProcess;
using kjit::test::start_redis;
using kjit::test::TempDir;
using kjit::test::until;
std::string g_self;

// Kernel k: its own name and constant, tiny to compile.
std::string source_for(int k) {
  return "extern \"C\" __global__ void fleet_ha_" + std::to_string(k) +
         "(int* p) { p[threadIdx.x] = " + std::to_string(7300 + k) + " + threadIdx.x; }\n";
}

kjit::CompileOptions options() {
  kjit::CompileOptions o;
  o.target = "sm_90";
  return o;
}

std::string digest(const kjit::Entry& e) {
  return kjit::to_hex(kjit::sha256(e.cubin.str() + e.ptx.str())).substr(0, 16);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t start = 0;
  while (start < s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(std::atoi(s.substr(start, comma - start).c_str()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// ---- the node program (this binary with --node) ----

// Waits for `go`, compiles the kernels listed, prints its counts and each kernel's digest.
int node_main(const std::string& dir, const std::string& url, const std::string& kernels,
              const std::string& go) {
  kjit::CacheConfig c;
  c.directory = dir;
  c.remote = kjit::RemoteConfig::from_environment();
  c.remote.url = url;
  std::string digests;
  int errors = 0;
  kjit::CacheStats s;
  kjit::RemoteStats r;
  double t0 = 0;
  {
    kjit::Cache cache(c);
    kjit::Compiler comp(&cache, 1);
    comp.set_mode(kjit::CompileMode::InProcess);
    comp.key(source_for(0), options());
    std::printf("ready\n");
    std::fflush(stdout);
    while (access(go.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    t0 = kjit::monotonic_ms();
    for (int k : parse_list(kernels)) {
      const kjit::Outcome o = comp.compile(source_for(k), options());
      if (o.status != KJIT_OK || !o.entry) {
        std::fprintf(stderr, "node %d kernel %d: %d %s\n", getpid(), k, o.status,
                     o.message.c_str());
        ++errors;
        continue;
      }
      digests += " d" + std::to_string(k) + "=" + digest(*o.entry);
    }
    s = cache.stats();
    r = cache.remote()->stats();
  }
  std::printf(
      "compiles=%llu claims=%llu waits=%llu wait_timeouts=%llu remote_hits=%llu "
      "failovers=%llu redirections=%llu errors=%d elapsed_ms=%.0f node=%s%s\n",
      (unsigned long long)s.compiles, (unsigned long long)s.remote_claims,
      (unsigned long long)s.remote_claim_waits, (unsigned long long)s.remote_claim_wait_timeouts,
      (unsigned long long)s.remote_hits, (unsigned long long)r.failovers,
      (unsigned long long)r.redirections, errors, kjit::monotonic_ms() - t0,
      r.last_node.empty() ? "-" : r.last_node.c_str(), digests.c_str());
  return errors == 0 ? 0 : 1;
}

// ---- the test side ----

struct Node {
  pid_t pid = -1;
  int fd = -1;
  std::string out;
  int exit_code = -1;
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
    std::vector<char*> argv{const_cast<char*>(g_self.c_str())};
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
}

std::string text_field(const std::string& out, const std::string& name) {
  std::string line = " " + out;
  for (char& c : line) c = c == '\n' ? ' ' : c;
  const std::string tag = " " + name + "=";
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
  unsigned long long compiles = 0, claims = 0, waits = 0, wait_timeouts = 0, remote_hits = 0,
                     failovers = 0, redirections = 0, wrong = 0;
  double max_elapsed_ms = 0;
};

class FleetHaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kjit::remote_tier_built()) GTEST_SKIP() << "remote tier not built (no hiredis)";
    if (!have("redis-server") || !have("redis-cli"))
      GTEST_SKIP() << "redis-server/redis-cli not installed";
    setenv("KJIT_REMOTE_CLAIM_LEASE_MS", "4000", 1);
    setenv("KJIT_REMOTE_CLAIM_WAIT_MS", "30000", 1);
    setenv("KJIT_REMOTE_TIMEOUT_MS", "300", 1);
    setenv("KJIT_REMOTE_CONNECT_TIMEOUT_MS", "100", 1);
    setenv("KJIT_REMOTE_COOLDOWN_MS", "500", 1);
    setenv("KJIT_REMOTE_TTL", "3600", 1);
  }

  // The digest of kernel k compiled here without any remote tier: the right kernel.
  std::string reference(int k) {
    auto it = reference_.find(k);
    if (it != reference_.end()) return it->second;
    if (!ref_cache_) {
      kjit::CacheConfig c;
      c.directory = ref_dir_.path();
      ref_cache_ = std::make_unique<kjit::Cache>(c);
    }
    kjit::Compiler comp(ref_cache_.get(), 1);
    comp.set_mode(kjit::CompileMode::InProcess);
    const kjit::Outcome o = comp.compile(source_for(k), options());
    EXPECT_EQ(o.status, KJIT_OK);
    return reference_[k] = o.entry ? digest(*o.entry) : "none";
  }
  std::string key_of(int k) {
    if (!ref_cache_) reference(k);
    kjit::Compiler comp(ref_cache_.get(), 1);
    return comp.key(source_for(k), options());
  }

  std::vector<Node> start_nodes(int n, const std::string& url, const std::vector<int>& kernels) {
    std::string list;
    for (int k : kernels) list += (list.empty() ? "" : ",") + std::to_string(k);
    std::vector<Node> nodes;
    for (int i = 0; i < n; ++i) {
      dirs_.push_back(std::make_unique<TempDir>());
      nodes.push_back(spawn({"--node", dirs_.back()->path(), url, list, go_.file("go")}));
    }
    for (Node& node : nodes) EXPECT_EQ(read_line(node), "ready");
    return nodes;
  }
  void go() { kjit::test::write_file(go_.file("go"), "go"); }
  void reset_go() { unlink(go_.file("go").c_str()); }

  Totals finish_all(std::vector<Node>& nodes, const std::vector<int>& kernels) {
    Totals t;
    for (Node& n : nodes) {
      finish(n);
      EXPECT_EQ(n.exit_code, 0) << n.out;
      t.compiles += field(n.out, "compiles");
      t.claims += field(n.out, "claims");
      t.waits += field(n.out, "waits");
      t.wait_timeouts += field(n.out, "wait_timeouts");
      t.remote_hits += field(n.out, "remote_hits");
      t.failovers += field(n.out, "failovers");
      t.redirections += field(n.out, "redirections");
      t.max_elapsed_ms = std::max(t.max_elapsed_ms, double(field(n.out, "elapsed_ms")));
      for (int k : kernels) {
        if (text_field(n.out, "d" + std::to_string(k)) != reference(k)) t.wrong++;
      }
    }
    return t;
  }

  static void print(const char* what, const Totals& t) {
    std::printf(
        "[ fleet-ha ] %s: compiles=%llu claims=%llu remote_hits=%llu waits=%llu wait_timeouts=%llu "
        "wrong=%llu failovers_seen=%llu redirections=%llu slowest_node_ms=%.0f\n",
        what, t.compiles, t.claims, t.remote_hits, t.waits, t.wait_timeouts, t.wrong, t.failovers,
        t.redirections, t.max_elapsed_ms);
  }

  // The failover runs (below), one test each; the soak test repeats them.
  void sentinel_failover();
  void cluster_failover();

  TempDir go_, ref_dir_;
  std::unique_ptr<kjit::Cache> ref_cache_;
  std::map<int, std::string> reference_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
};

// ---- Sentinel ----

void FleetHaTest::sentinel_failover() {
  if (!have("redis-sentinel")) GTEST_SKIP() << "redis-sentinel not installed";
  TempDir dir;
  kjit::test::RedisSentinelGroup group(dir.path(), 3);
  ASSERT_TRUE(group.ok()) << "Sentinels did not settle";
  const std::string& url = group.url;
  RedisProcess* master = group.master.get();
  RedisProcess* replica = group.replica.get();
  const int mp = master->port();

  const std::vector<int> kernels{0, 1, 2};
  for (int k : kernels) reference(k);
  std::vector<Node> nodes = start_nodes(4, url, kernels);
  go();
  // Mid-stampede: once the first entry is in the master, kill it (compiles in flight).
  ASSERT_TRUE(until([&] { return cli(mp, "--scan --pattern 'kjit:[0-9a-f]*'") != ""; }, 20000));
  master->kill_now();
  const double killed = kjit::monotonic_ms();
  Totals t = finish_all(nodes, kernels);
  print("sentinel failover stampede (4 nodes, 3 kernels)", t);
  std::printf("nodes done %.0f ms after the kill\n", kjit::monotonic_ms() - killed);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(t.wait_timeouts, 0u) << "no node waited to the deadline";
  // A claim lost with the old master costs at most one extra compile of its kernel.
  EXPECT_LE(t.compiles, 2 * kernels.size());
  EXPECT_GE(t.compiles, kernels.size());
  EXPECT_LE(t.max_elapsed_ms, 25000);

  // The Sentinels promoted the replica; a fresh node finds every kernel there.
  ASSERT_TRUE(until([&] { return group.master_addr() == replica->addr(); }, 10000));
  reset_go();
  std::vector<Node> late = start_nodes(1, url, kernels);
  go();
  Totals after = finish_all(late, kernels);
  print("after the failover (1 fresh node)", after);
  EXPECT_EQ(after.wrong, 0u);
  EXPECT_EQ(after.remote_hits + after.compiles, kernels.size());
  EXPECT_GE(after.remote_hits, 1u) << "the new master serves the fleet";
  EXPECT_EQ(text_field(late[0].out, "node"), replica->addr());
}

TEST_F(FleetHaTest, SentinelMasterKilledMidStampedeEveryNodeEndsWithTheRightKernel) {
  sentinel_failover();
}

TEST_F(FleetHaTest, SentinelNeverWritesToAReplica) {
  if (!have("redis-sentinel")) GTEST_SKIP() << "redis-sentinel not installed";
  TempDir m_dir, r_dir, s_dir;
  auto master = start_redis(m_dir.path(), free_port());
  auto replica = start_redis(r_dir.path(), free_port(),
                             {"--replicaof", "127.0.0.1", std::to_string(master->port())});
  // A lone Sentinel that names the replica as the master (a stale or wrong view).
  auto sentinel = kjit::test::start_sentinel(s_dir.path(), "s", replica->port(), 1);
  const int sp = sentinel->port();
  kjit::RemoteConfig c;
  c.url = "redis+sentinel://127.0.0.1:" + std::to_string(sp) + "/kjit";
  c.op_timeout_ms = 300;
  kjit::RemoteTier tier(c);
  EXPECT_FALSE(tier.command({"SET", "kjit:probe", "x"})) << "refused: the node is not a master";
  EXPECT_EQ(cli(replica->port(), "EXISTS kjit:probe"), "0");
  EXPECT_GE(tier.stats().errors, 1u);
}

// ---- Cluster ----

TEST_F(FleetHaTest, ClusterSpreadsKeysFollowsAReshardingAndDegradesOnlyADeadMastersSlots) {
  TempDir dir;
  RedisCluster cluster(dir.path(), {});
  ASSERT_TRUE(cluster.ok()) << "cluster did not form";
  // Two kernels per master, chosen by their keys' slots.
  std::vector<int> kernels;
  std::map<int, std::vector<int>> by_owner;
  for (int k = 0; kernels.size() < 6 && k < 200; ++k) {
    const int o = cluster.owner(kjit::cluster_slot(key_of(k)));
    if (by_owner[o].size() < 2) {
      by_owner[o].push_back(k);
      kernels.push_back(k);
    }
  }
  ASSERT_EQ(kernels.size(), 6u);
  for (int k : kernels) reference(k);

  // A stampede of three nodes: one compile per kernel, entries on all three masters.
  std::vector<Node> nodes = start_nodes(3, cluster.url(), kernels);
  go();
  Totals t = finish_all(nodes, kernels);
  print("cluster stampede (3 nodes, 6 kernels)", t);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(t.compiles, kernels.size());
  for (auto& s : cluster.servers) {
    EXPECT_EQ(cli(s->port(), "--scan --pattern 'kjit:{*'").size(), 2u * (6 + 64 + 1) + 1)
        << "two entries on " << s->addr();
  }

  // Resharding during lookups: kernel A's slot moves from its master X to Y.
  const int a = by_owner[0][0];
  const std::string a_key = key_of(a);
  const int slot = kjit::cluster_slot(a_key);
  RedisProcess& x = *cluster.servers[0];
  RedisProcess& y = *cluster.servers[1];
  kjit::RemoteConfig rc;
  rc.url = cluster.url();
  rc.op_timeout_ms = 500;
  kjit::RemoteTier tier(rc);
  std::vector<std::string> keys;
  for (int k : kernels) keys.push_back(key_of(k));
  std::atomic<bool> stop{false};
  std::atomic<int> lookups{0}, hits{0}, wrong{0};
  std::thread reader([&] {
    while (!stop) {
      for (size_t i = 0; i < keys.size(); ++i) {
        const auto e = tier.get(keys[i]);
        lookups++;
        if (e) {
          hits++;
          if (digest(*e) != reference_.at(kernels[i])) wrong++;
        }
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string s = std::to_string(slot);
  EXPECT_EQ(cli(y.port(), "CLUSTER SETSLOT " + s + " IMPORTING " + cluster.ids[0]), "OK");
  EXPECT_EQ(cli(x.port(), "CLUSTER SETSLOT " + s + " MIGRATING " + cluster.ids[1]), "OK");
  EXPECT_EQ(cli(x.port(), "MIGRATE 127.0.0.1 " + std::to_string(y.port()) +
                              " '' 0 5000 KEYS 'kjit:{" + a_key + "}'"),
            "OK");
  // Nodes look every kernel up while the slot is half moved: kernel A through -ASK.
  reset_go();
  std::vector<Node> readers = start_nodes(2, cluster.url(), kernels);
  go();
  Totals during = finish_all(readers, kernels);
  print("cluster resharding, slot of an entry migrating (2 nodes x 6 kernels)", during);
  EXPECT_EQ(during.wrong, 0u);
  EXPECT_EQ(during.compiles, 0u);
  EXPECT_EQ(during.remote_hits, 2 * kernels.size());
  EXPECT_GE(during.redirections, 2u) << "each node followed an ASK";
  const uint64_t redirections_ask = tier.stats().redirections;
  for (int i : {1, 0, 2})  // the importing node first, as redis-cli does
    cli(cluster.servers[i]->port(), "CLUSTER SETSLOT " + s + " NODE " + cluster.ids[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // and -MOVED, once
  stop = true;
  reader.join();
  const kjit::RemoteStats rs = tier.stats();
  std::printf(
      "[ fleet-ha ] resharding of slot %d during lookups: lookups=%d hits=%d wrong=%d "
      "redirections=%llu "
      "(ask phase %llu) slot map changes=%llu\n",
      slot, lookups.load(), hits.load(), wrong.load(), (unsigned long long)rs.redirections,
      (unsigned long long)redirections_ask, (unsigned long long)rs.failovers);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(hits.load(), lookups.load()) << "every lookup hit through the resharding";
  EXPECT_GE(redirections_ask, 1u) << "ASK followed";
  EXPECT_GE(rs.redirections, redirections_ask + 1) << "MOVED followed";
  EXPECT_EQ(cli(y.port(), "EXISTS 'kjit:{" + a_key + "}'"), "1");

  // A stampede on a kernel whose (empty) slot is being moved: its claim (a script on two
  // keys) meets TRYAGAIN until the move ends, and is retried, not given up: one compile.
  int n = 0;
  for (int k = 200; k < 400 && !n; ++k) {
    if (cluster.owner(kjit::cluster_slot(key_of(k))) != 2) n = k;  // master 2 dies below
  }
  ASSERT_NE(n, 0);
  reference(n);
  const int n_slot = kjit::cluster_slot(key_of(n));
  const int from = cluster.owner(n_slot), to = 1 - from;
  const std::string ns = std::to_string(n_slot);
  EXPECT_EQ(cluster.servers[size_t(to)]->cli("CLUSTER SETSLOT " + ns + " IMPORTING " +
                                             cluster.ids[size_t(from)]),
            "OK");
  EXPECT_EQ(cluster.servers[size_t(from)]->cli("CLUSTER SETSLOT " + ns + " MIGRATING " +
                                               cluster.ids[size_t(to)]),
            "OK");
  reset_go();
  std::vector<Node> stampede = start_nodes(3, cluster.url(), {n});
  go();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // they meet TRYAGAIN
  for (int i : {to, from, 2})
    cluster.servers[size_t(i)]->cli("CLUSTER SETSLOT " + ns + " NODE " + cluster.ids[size_t(to)]);
  Totals moved = finish_all(stampede, {n});
  print("cluster resharding, slot of a new kernel migrating (3 nodes x 1 kernel)", moved);
  EXPECT_EQ(moved.wrong, 0u);
  EXPECT_EQ(moved.wait_timeouts, 0u);
  EXPECT_EQ(moved.compiles, 1u) << "single flight kept through the move";
  EXPECT_EQ(moved.remote_hits, 2u);
  EXPECT_EQ(cluster.servers[size_t(to)]->cli("EXISTS 'kjit:{" + key_of(n) + "}'"), "1");

  // Master 2 killed: a fresh node compiles its two kernels itself, hits the other four.
  cluster.servers[2]->kill_now();
  reset_go();
  std::vector<Node> late = start_nodes(1, cluster.url(), kernels);
  go();
  Totals after = finish_all(late, kernels);
  print("cluster, master 2 killed (1 fresh node)", after);
  EXPECT_EQ(after.wrong, 0u);
  EXPECT_EQ(after.compiles, 2u) << "only the dead master's keys degrade to local";
  EXPECT_EQ(after.remote_hits, 4u);
}

// Three masters, each with a replica. W (one kernel per master) is in the fleet first. A
// stampede of four nodes on S (two kernels per master, a kernel of master X first); X is
// killed as soon as it holds a claim. Before the cluster's failover, lookups of W hit on
// the live masters and miss (degrade to local) for X's key. The claim lost with X costs
// at most one extra compile per kernel of X, no node waits to its deadline, nothing wrong
// is served; after the failover a fresh node hits every kernel, X's through its promoted
// replica.
void FleetHaTest::cluster_failover() {
  TempDir dir;
  RedisCluster::Options co;
  co.replicas = 1;
  RedisCluster cluster(dir.path(), co);
  ASSERT_TRUE(cluster.ok()) << "cluster did not form";
  const int xi = 2;  // the master to kill (not a seed of the URL)
  const int ri = cluster.replica_of(xi);
  ASSERT_GE(ri, 0) << "no replica of master " << xi;
  RedisProcess& x = *cluster.servers[size_t(xi)];
  RedisProcess& promoted = *cluster.servers[size_t(ri)];

  std::map<int, std::vector<int>> by_owner;  // per master: 1 kernel of W, then 2 of S
  for (int k = 100; k < 400; ++k) {
    auto& v = by_owner[cluster.owner(kjit::cluster_slot(key_of(k)))];
    if (v.size() < 3) v.push_back(k);
    if (by_owner.size() == 3 && by_owner[0].size() == 3 && by_owner[1].size() == 3 &&
        by_owner[2].size() == 3)
      break;
  }
  std::vector<int> w, s;
  for (int m : {0, 1, 2}) {
    ASSERT_EQ(by_owner[m].size(), 3u);
    w.push_back(by_owner[m][0]);
  }
  // X's kernels first and last: the kill lands on the first; the last is looked up last.
  s = {by_owner[xi][1], by_owner[0][1], by_owner[1][1],
       by_owner[0][2],  by_owner[1][2], by_owner[xi][2]};
  for (int k : w) reference(k);
  for (int k : s) reference(k);

  std::vector<Node> first = start_nodes(1, cluster.url(), w);
  go();
  Totals t0 = finish_all(first, w);
  EXPECT_EQ(t0.compiles, 3u);
  EXPECT_EQ(x.cli("WAIT 1 3000"), "1") << "W's entry on X reached its replica";
  // CLUSTER SLOTS lists a replica once it has replicated data (its offset, spread by the
  // cluster bus): now every master's.
  std::string info;
  EXPECT_TRUE(until(
      [&] {
        kjit::RemoteConfig rc;
        rc.url = cluster.url();
        kjit::RemoteTier probe(rc);
        info = probe.describe(true);
        return info.find("\"nodes\":3,\"replicas\":3,") != std::string::npos;
      },
      5000))
      << info;
  reset_go();

  std::vector<Node> nodes = start_nodes(4, cluster.url(), s);
  go();
  ASSERT_TRUE(until([&] { return x.cli("--scan --pattern 'kjit:claim:*'") != ""; }, 20000));
  x.kill_now();
  // Before the failover (detection alone takes the 1 s node timeout): W's keys on the
  // live masters hit, X's misses at once.
  kjit::RemoteConfig rc;
  rc.url = cluster.url();
  rc.op_timeout_ms = 300;
  kjit::RemoteTier tier(rc);
  int hits_before = 0;
  bool x_key_hit = true;
  const double lookups_t0 = kjit::monotonic_ms();
  for (int k : w) {
    const auto e = tier.get(key_of(k));
    if (e) {
      EXPECT_EQ(digest(*e), reference(k));
    }
    hits_before += e ? 1 : 0;
    if (k == w[size_t(xi)]) x_key_hit = bool(e);
  }
  const double lookups_ms = kjit::monotonic_ms() - lookups_t0;
  const bool still_replica = promoted.cli("ROLE").rfind("slave", 0) == 0;
  std::printf(
      "[ fleet-ha ] cluster, master killed, before the failover: W lookups hit=%d of 3 (dead "
      "master's key hit=%d) in %.0f ms, replica not yet promoted=%d\n",
      hits_before, x_key_hit ? 1 : 0, lookups_ms, still_replica ? 1 : 0);
  EXPECT_TRUE(still_replica) << "the lookups ran before the failover";
  EXPECT_EQ(hits_before, 2) << "the live masters' keys hit";
  EXPECT_FALSE(x_key_hit) << "the dead master's key degrades to local";

  Totals t = finish_all(nodes, s);
  print("cluster with replicas, master killed at its first claim (4 nodes x 6 kernels)", t);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(t.wait_timeouts, 0u) << "no node waited to its deadline";
  EXPECT_GE(t.compiles, s.size());
  EXPECT_LE(t.compiles, s.size() + 2) << "at most one extra compile per kernel of the dead master";
  EXPECT_LE(t.max_elapsed_ms, 20000);

  ASSERT_TRUE(until([&] { return promoted.cli("ROLE").rfind("master", 0) == 0; }, 15000))
      << "the replica was not promoted";
  reset_go();
  std::vector<int> all = w;
  all.insert(all.end(), s.begin(), s.end());
  std::vector<Node> late = start_nodes(1, cluster.url(), all);
  go();
  Totals after = finish_all(late, all);
  print("cluster after the failover (1 fresh node x 9 kernels)", after);
  EXPECT_EQ(after.wrong, 0u);
  EXPECT_EQ(after.compiles, 0u) << "every kernel in the fleet, X's on its promoted replica";
  EXPECT_EQ(after.remote_hits, all.size());
  EXPECT_EQ(text_field(late[0].out, "node"), promoted.addr()) << "X's last kernel answered there";
}

TEST_F(FleetHaTest, ClusterReplicaPromotedAfterAMasterKilledMidStampede) {
  cluster_failover();
}

// Soak (KJIT_SOAK_TESTS set in the environment, as -DKJIT_SOAK_TESTS=ON's registration
// does): both failover runs, KJIT_FLEET_SOAK_ROUNDS times (5) each, fresh servers each time.
TEST_F(FleetHaTest, SoakFailoversRepeated) {
  if (!std::getenv("KJIT_SOAK_TESTS")) GTEST_SKIP() << "a soak: set KJIT_SOAK_TESTS=1";
  const char* n = std::getenv("KJIT_FLEET_SOAK_ROUNDS");
  const int rounds = n && std::atoi(n) > 0 ? std::atoi(n) : 5;
  for (int i = 0; i < rounds && !HasFatalFailure(); ++i) {
    std::printf("[ fleet-ha ] soak round %d of %d\n", i + 1, rounds);
    reset_go();
    sentinel_failover();
    reset_go();
    cluster_failover();
  }
}

// ---- what the statistics say ----

// kjit_cache_remote_info (what `kjit cache stats` prints): the topology, the node in use,
// redirections; "none" without a remote.
TEST_F(FleetHaTest, RemoteInfoNamesTheTopologyAndTheNodeInUse) {
  TempDir d, a_dir, b_dir;
  RedisCluster cluster(d.path(), {});
  ASSERT_TRUE(cluster.ok());
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.directory = a_dir.path().c_str();
  const std::string url = cluster.url();
  o.remote_url = url.c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &cache), KJIT_OK);
  const char* info = nullptr;
  ASSERT_EQ(kjit_cache_remote_info(cache, 0, &info), KJIT_OK);
  EXPECT_NE(std::string(info).find("\"topology\":\"cluster\",\"node\":\"\""), std::string::npos)
      << info;
  ASSERT_EQ(kjit_cache_remote_info(cache, 1, &info), KJIT_OK);
  const std::string probed = info;
  bool names_a_master = false;
  for (auto& s : cluster.servers)
    names_a_master |= probed.find("\"node\":\"" + s->addr() + "\"") != std::string::npos;
  EXPECT_TRUE(names_a_master) << probed;
  EXPECT_NE(probed.find("\"nodes\":3,\"replicas\":0,"), std::string::npos) << probed;
  EXPECT_EQ(kjit_cache_remote_info(cache, 1, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_cache_remote_info(nullptr, 1, &info), KJIT_ERROR_INVALID_HANDLE);
  kjit_cache_close(cache);

  kjit_cache_options plain = KJIT_CACHE_OPTIONS_INIT;
  plain.directory = b_dir.path().c_str();
  plain.remote_url = "";
  unsetenv("KJIT_REMOTE");
  ASSERT_EQ(kjit_cache_open(&plain, &cache), KJIT_OK);
  ASSERT_EQ(kjit_cache_remote_info(cache, 1, &info), KJIT_OK);
  EXPECT_STREQ(info, "{\"topology\":\"none\"}");
  kjit_cache_close(cache);
}

// ---- heavy entries ----

kjit::Entry heavy_entry(size_t cubin_bytes, int seed) {
  kjit::Entry e;
  e.key = kjit::to_hex(kjit::sha256("heavy " + std::to_string(seed)));
  e.target = "sm_90";
  std::string bytes(cubin_bytes, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(seed + 1);
  for (char& c : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = char(x);
  }
  e.cubin = bytes;
  e.ptx = "// ptx";
  e.kernels = {"heavy"};
  return e;
}

long max_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A CUTLASS-sized entry (1.5 MB CUBIN) travels as one value through every topology; a
// reader whose limit is lower refuses it (counted), and stays correct.
TEST_F(FleetHaTest, HeavyEntryRoundTripsOnOneServerThroughSentinelAndInACluster) {
  if (!have("redis-sentinel")) GTEST_SKIP() << "redis-sentinel not installed";
  TempDir d;
  auto server = start_redis(d.path() + "/single", free_port());
  kjit::test::RedisSentinelGroup sentinel(d.path() + "/sentinel", 1);
  RedisCluster cluster(d.path() + "/cluster", {});
  ASSERT_TRUE(cluster.ok());
  int seed = 1;
  for (const std::string& url : {server->url(), sentinel.url, cluster.url()}) {
    kjit::RemoteConfig c;
    c.url = url;
    kjit::RemoteTier writer(c), reader(c);
    const kjit::Entry e = heavy_entry(1536 * 1024, seed++);
    ASSERT_TRUE(writer.put_now(e)) << url;
    const auto got = reader.get(e.key);
    ASSERT_TRUE(got) << url;
    EXPECT_EQ(got->cubin.str(), e.cubin.str()) << url;
    EXPECT_EQ(reader.stats().oversize, 0u) << url;
    c.max_entry_bytes = 1 << 20;
    kjit::RemoteTier small(c);
    EXPECT_FALSE(small.get(e.key)) << url << ": over this reader's limit";
    EXPECT_EQ(small.stats().oversize, 1u) << url;
    EXPECT_EQ(small.stats().hits, 0u) << url;
  }
}

TEST_F(FleetHaTest, HostileHugeValueIsRefusedWithoutReadingIt) {
  TempDir d, node_dir;
  auto server = start_redis(d.path(), free_port());
  const std::string url = "redis://" + server->addr();
  const std::string key = key_of(40);
  // 200 MB under the kernel's entry key, made inside the server (SETRANGE zero-fills).
  EXPECT_EQ(cli(server->port(), "SETRANGE 'kjit:" + key + "' 209715199 x"), "209715200");
  const long rss_before = max_rss_kb();
  kjit::CacheConfig c;
  c.directory = node_dir.path();
  c.remote = kjit::RemoteConfig::from_environment();
  c.remote.url = url;
  c.remote.op_timeout_ms = 20000;  // the bound is the size limit, not a timeout
  kjit::Cache cache(c);
  kjit::Compiler comp(&cache, 1);
  comp.set_mode(kjit::CompileMode::InProcess);
  const kjit::Outcome o = comp.compile(source_for(40), options());
  ASSERT_EQ(o.status, KJIT_OK) << "a hostile value never fails a compile";
  EXPECT_EQ(digest(*o.entry), reference(40));
  EXPECT_EQ(o.tier, KJIT_TIER_COMPILED);
  EXPECT_GE(cache.remote()->stats().oversize, 1u);
  // And under a shared value's name (a GEMM plan): refused as well.
  EXPECT_EQ(cli(server->port(), "SETRANGE kjit:value:gemm-plan:hostile 209715199 x"), "209715200");
  bool from_remote = true;
  EXPECT_FALSE(cache.get_shared_value("gemm-plan", "hostile", &from_remote));
  EXPECT_FALSE(from_remote);
  const kjit::RemoteStats rs = cache.remote()->stats();
  EXPECT_GE(rs.oversize, 2u);
  const long grown_mb = (max_rss_kb() - rss_before) / 1024;
  std::printf(
      "[ fleet-ha ] two 200 MB values (an entry, a shared value) refused; peak RSS grew %ld MB "
      "(limit %lld bytes)\n",
      grown_mb, (long long)c.remote.max_entry_bytes);
  EXPECT_LT(grown_mb, 100) << "the value was not read whole";
}

TEST_F(FleetHaTest, EntryOverTheLimitStaysLocalAndIsCounted) {
  TempDir d, a_dir;
  auto server = start_redis(d.path(), free_port());
  kjit::CacheConfig c;
  c.directory = a_dir.path();
  c.remote = kjit::RemoteConfig::from_environment();
  c.remote.url = "redis://" + server->addr();
  c.remote.max_entry_bytes = 1000;  // smaller than any compiled entry
  kjit::Cache cache(c);
  kjit::Compiler comp(&cache, 1);
  comp.set_mode(kjit::CompileMode::InProcess);
  const kjit::Outcome o = comp.compile(source_for(41), options());
  ASSERT_EQ(o.status, KJIT_OK);
  cache.remote()->flush();
  EXPECT_GE(cache.remote()->stats().oversize, 1u);
  EXPECT_EQ(cli(server->port(), "EXISTS 'kjit:" + o.entry->key + "'"), "0");
  kjit::RemoteTier big(kjit::RemoteConfig{c.remote});
  EXPECT_FALSE(big.put_now(heavy_entry(2000, 3))) << "over the limit";
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 6 && std::string(argv[1]) == "--node") {
    return node_main(argv[2], argv[3], argv[4], argv[5]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
