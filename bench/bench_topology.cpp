// Fleet tier topologies: remote hit latency (RemoteTier::get, verified entry in hand) for a
// 4 KB and a 1.5 MB entry against one redis-server, through Sentinel (master + replica +
// one Sentinel) and through a Redis Cluster of three masters, all on loopback TCP and all
// started here. Rounds are interleaved (each round visits every topology and size), so
// the host's load falls on all columns alike. Prints one table: the median and p90 of
// warm hits (pooled connection) and of the first hit of a new tier (connect, and the
// Sentinel question or the slot map).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/remote.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace {

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p) pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

int free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

bool port_free(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  const bool ok = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

// A port for a cluster node: its cluster bus listens on port + 10000, which must be free
// (and exist) too.
int cluster_port() {
  for (int i = 0; i < 1000; ++i) {
    const int p = free_port();
    if (p < 55000 && port_free(p + 10000)) return p;
    const int q = 20000 + int((unsigned(getpid()) * 7919u + unsigned(i) * 104729u) % 30000u);
    if (port_free(q) && port_free(q + 10000)) return q;
  }
  return free_port();
}

std::string cli(int port, const std::string& args) {
  return shell("redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + args + " 2>/dev/null");
}

std::vector<pid_t> g_children;
std::string g_tmp;

void stop_servers() {
  for (pid_t p : g_children) kill(p, SIGKILL);
  for (pid_t p : g_children) waitpid(p, nullptr, 0);
  g_children.clear();
  if (!g_tmp.empty()) shell("rm -rf '" + g_tmp + "'");
}

int start(const std::string& program, std::vector<std::string> args, int port) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    _exit(127);
  }
  g_children.push_back(pid);
  for (int i = 0; i < 500 && cli(port, "PING") != "PONG"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return port;
}

int redis(const std::string& dir, std::vector<std::string> extra = {}, bool cluster = false) {
  mkdir(dir.c_str(), 0700);
  const int port = cluster ? cluster_port() : free_port();
  std::vector<std::string> args{"--port",    std::to_string(port), "--bind", "127.0.0.1", "--save",
                                "",          "--appendonly",       "no",     "--dir",     dir,
                                "--logfile", dir + "/redis.log"};
  args.insert(args.end(), extra.begin(), extra.end());
  return start("redis-server", args, port);
}

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

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  char tmpl[] = "/tmp/kjit-bench-topology-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string tmp = tmpl;
  g_tmp = tmp;
  std::atexit(stop_servers);

  const int single = redis(tmp + "/single");
  const int master = redis(tmp + "/master");
  redis(tmp + "/replica", {"--replicaof", "127.0.0.1", std::to_string(master)});
  const int sp = free_port();
  const std::string conf = tmp + "/sentinel.conf";
  {
    FILE* f = std::fopen(conf.c_str(), "w");
    std::fprintf(f, "port %d\nbind 127.0.0.1\nsentinel monitor kjit 127.0.0.1 %d 1\n", sp, master);
    std::fclose(f);
  }
  start("redis-sentinel", {conf, "--dir", tmp, "--logfile", tmp + "/sentinel.log"}, sp);
  std::string hosts, cluster_url = "redis+cluster://";
  std::vector<int> cluster_ports;
  for (int i = 0; i < 3; ++i) {
    const std::string d = tmp + "/c" + std::to_string(i);
    const int p =
        redis(d, {"--cluster-enabled", "yes", "--cluster-config-file", d + "/nodes.conf"}, true);
    hosts += " 127.0.0.1:" + std::to_string(p);
    cluster_ports.push_back(p);
    if (i) cluster_url += ",";
    cluster_url += "127.0.0.1:" + std::to_string(p);
  }
  shell("redis-cli --cluster create" + hosts + " --cluster-yes >/dev/null 2>&1");
  for (int i = 0; i < 1000; ++i) {  // every node agrees that the cluster is up
    bool ok = true;
    for (int p : cluster_ports)
      ok = ok && cli(p, "CLUSTER INFO").find("cluster_state:ok") != std::string::npos;
    if (ok) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  struct Topo {
    const char* name;
    std::string url;
  } topos[] = {{"single server", "redis://127.0.0.1:" + std::to_string(single)},
               {"Sentinel", "redis+sentinel://127.0.0.1:" + std::to_string(sp) + "/kjit"},
               {"Cluster (3 masters)", cluster_url}};
  struct Size {
    const char* name;
    size_t bytes;
  } sizes[] = {{"4 KB", 4096}, {"1.5 MB", 1536 * 1024}};

  // Entries: a few per size (so the cluster's reads land on several masters).
  constexpr int kPerSize = 6;
  std::vector<std::vector<kjit::Entry>> entries(2);
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < kPerSize; ++i) entries[s].push_back(entry(sizes[s].bytes, s * 100 + i));
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

  std::vector<double> warm[3][2], cold[3][2];
  for (int r = 0; r < rounds; ++r) {
    for (int t = 0; t < 3; ++t) {
      for (int s = 0; s < 2; ++s) {
        const kjit::Entry& e = entries[s][size_t(r % kPerSize)];
        double t0 = kjit::monotonic_ms();
        const auto got = tiers[size_t(t)]->get(e.key);
        warm[t][s].push_back(kjit::monotonic_ms() - t0);
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
  tiers.clear();
  return 0;
}
