// Fleet tier topologies: remote hit latency (RemoteTier::get, verified entry in hand) for a
// 4 KB and a 1.5 MB entry against one redis-server, through Sentinel (master + replica +
// one Sentinel) and through a Redis Cluster of three masters, all on loopback TCP and all
// started here. Rounds are interleaved (each round visits every topology and size), so
// the host's load falls on all columns alike. Prints one table: the median and p90 of
// warm hits (pooled connection) and of the first hit of a new tier (connect, and the
// Sentinel question or the slot map), then what each tier met (redirections, failovers).
// Usage: bench_topology [rounds=200]; BENCH_PER_SIZE=n entries of each size (6);
// BENCH_ONE_MASTER=1 takes only entries that the cluster's first master holds.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/redis_server.h"
#include "store/remote.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

using kjit::test::RedisCluster;
using kjit::test::RedisProcess;
using kjit::test::RedisSentinelGroup;

kjit::Entry entry(size_t cubin_bytes, int seed) {
  kjit::Entry e;
  e.key = kjit::to_hex(kjit::sha256("bench topology " + std::to_string(seed)));
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
  e.kernels = {"bench"};
  return e;
}

// Minor page faults of this process so far.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  char tmpl[] = "/tmp/kjit-bench-topology-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  struct RemoveTmp {
    std::string dir;
    ~RemoveTmp() { kjit::test::shell("rm -rf '" + dir + "'"); }
  } tmp_dir{tmpl};  // declared first: removed after the servers are gone
  const std::string tmp = tmpl;

  auto single = kjit::test::start_redis(tmp + "/single", kjit::test::free_port());
  RedisSentinelGroup sentinel(tmp, 1);
  RedisCluster::Options co;
  co.node_timeout_ms = 15000;  // redis.conf's default: no failover is wanted here
  RedisCluster cluster(tmp + "/cluster", co);
  if (!sentinel.ok() || !cluster.ok()) {
    std::fprintf(stderr, "the Sentinel group or the cluster did not come up\n");
    return 1;
  }

  struct Topo {
    const char* name;
    std::string url;
  } topos[] = {{"single server", single->url()},
               {"Sentinel", sentinel.url},
               {"Cluster (3 masters)", cluster.url()}};
  struct Size {
    const char* name;
    size_t bytes;
  } sizes[] = {{"4 KB", 4096}, {"1.5 MB", 1536 * 1024}};

  // Entries: a few per size (so the cluster's reads land on several masters).
  const int kPerSize = std::getenv("BENCH_PER_SIZE") ? std::atoi(std::getenv("BENCH_PER_SIZE")) : 6;
  std::vector<std::vector<kjit::Entry>> entries(2);
  // BENCH_ONE_MASTER=1: only entries whose slot is the cluster's first master's (a control:
  // the cluster's reads then meet one server, as the single server's do).
  const bool one_master = std::getenv("BENCH_ONE_MASTER") != nullptr;
  for (int s = 0; s < 2; ++s)
    for (int seed = s * 100; int(entries[s].size()) < kPerSize; ++seed) {
      kjit::Entry e = entry(sizes[s].bytes, seed);
      if (!one_master || cluster.owner(kjit::cluster_slot(e.key)) == 0)
        entries[s].push_back(std::move(e));
    }
  std::vector<std::unique_ptr<kjit::RemoteTier>> tiers;
  for (const Topo& t : topos) {
    kjit::RemoteConfig c;
    c.url = t.url;
    c.op_timeout_ms = 2000;
    c.connect_timeout_ms = 1000;
    c.cooldown_ms = 50;
    tiers.push_back(std::make_unique<kjit::RemoteTier>(c));
    for (auto& v : entries)
      for (auto& e : v)
        for (int attempt = 0; !tiers.back()->put_now(e); ++attempt) {
          if (attempt < 50) {  // a cluster still settling, a Sentinel still connecting
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            continue;
          }
          std::fprintf(stderr, "%s: write failed\n", t.name);
          return 1;
        }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  std::vector<double> warm[3][2], cold[3][2], faults[3][2];
  // The cluster's warm hits by the master that answered (as created: cluster.owner()).
  std::map<int, std::vector<double>> by_master[2];
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < 3; ++t) {
      for (int s = 0; s < 2; ++s) {
        const kjit::Entry& e = entries[s][size_t(r % kPerSize)];
        const long faults0 = minor_faults();
        double t0 = kjit::monotonic_ms();
        const auto got = tiers[size_t(t)]->get(e.key);
        warm[t][s].push_back(kjit::monotonic_ms() - t0);
        faults[t][s].push_back(double(minor_faults() - faults0));
        if (t == 2)
          by_master[s][cluster.owner(kjit::cluster_slot(e.key))].push_back(warm[t][s].back());
        if (!got || got->cubin.size() != e.cubin.size()) {
          std::fprintf(stderr, "%s: miss\n", topos[t].name);
          return 1;
        }
        if (r % 10 == 0) {  // a new tier: connection and topology discovery included
          kjit::RemoteConfig c = tiers[size_t(t)]->config();
          t0 = kjit::monotonic_ms();
          kjit::RemoteTier fresh(c);
          const auto first = fresh.get(e.key);
          cold[t][s].push_back(kjit::monotonic_ms() - t0);
          if (!first) return 1;
        }
      }
    }
  }
  std::printf(
      "| topology | entry | warm hit p10 (ms) | median (ms) | p90 (ms) | median vs single | p10 "
      "vs single | first hit of a new tier, median (ms) |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int s = 0; s < 2; ++s) {
    for (int t = 0; t < 3; ++t) {
      std::printf("| %s | %s | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.3f |\n", topos[t].name,
                  sizes[s].name, pct(warm[t][s], 0.1), pct(warm[t][s], 0.5), pct(warm[t][s], 0.9),
                  pct(warm[t][s], 0.5) / pct(warm[0][s], 0.5),
                  pct(warm[t][s], 0.1) / pct(warm[0][s], 0.1), pct(cold[t][s], 0.5));
    }
  }
  std::printf("(%d interleaved rounds; entries of %d per size)\n", rounds, kPerSize);
  for (int s = 0; s < 2; ++s) {
    std::printf("%s, page faults of the bench process per warm hit (median / p90):", sizes[s].name);
    for (int t = 0; t < 3; ++t) {
      std::printf(" %s %.0f / %.0f;", topos[t].name, pct(faults[t][s], 0.5),
                  pct(faults[t][s], 0.9));
    }
    std::printf("\n");
  }
  for (int s = 0; s < 2; ++s) {
    std::printf("Cluster, %s, warm hit median by master:", sizes[s].name);
    for (auto& [master, t] : by_master[s]) {
      std::printf(" master %d %.3f ms (%zu hits);", master, pct(t, 0.5), t.size());
    }
    std::printf("\n");
  }
  // What each warm tier met: a redirection or a slot map reload would be an extra round
  // trip on the hit path.
  for (int t = 0; t < 3; ++t) {
    const kjit::RemoteStats st = tiers[size_t(t)]->stats();
    std::printf("%s: hits %llu, misses %llu, errors %llu, redirections %llu, failovers %llu\n",
                topos[t].name, (unsigned long long)st.hits, (unsigned long long)st.misses,
                (unsigned long long)st.errors, (unsigned long long)st.redirections,
                (unsigned long long)st.failovers);
  }
  tiers.clear();
  return 0;
}
