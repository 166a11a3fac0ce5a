// Real Redis processes for the fleet tier's tests and benchmarks: a redis-server (on a unix
// socket, a loopback port or both), Sentinels, and a Redis Cluster of masters and replicas,
// started as children and killed when their object goes. Header-only and free of GoogleTest,
// so that bench/ programs include it too (#include "../tests/support/redis_server.h").
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kjit::test {

// Runs `cmd` through the shell; its standard output without trailing newlines.
inline std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p) pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// True when `tool` is on the PATH.
inline bool have(const char* tool) {
  return !shell(std::string("command -v ") + tool).empty();
}

// Calls `ok` every 10 ms until it returns true or `ms` have passed; its last answer.
inline bool until(const std::function<bool()>& ok, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ok();
}

// A loopback TCP port that was free a moment ago.
inline int free_port() {
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

inline bool port_free(int port) {
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
inline int cluster_port() {
  for (int i = 0; i < 1000; ++i) {
    const int p = free_port();
    if (p < 55000 && port_free(p + 10000)) return p;
    const int q = 20000 + int((unsigned(getpid()) * 7919u + unsigned(i) * 104729u) % 30000u);
    if (port_free(q) && port_free(q + 10000)) return q;
  }
  return free_port();
}

// redis-cli against a loopback port.
inline std::string cli(int port, const std::string& args) {
  return shell("redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + args + " 2>/dev/null");
}

// A redis-server or redis-sentinel child, answering PING on a loopback port or a unix
// socket once the constructor returns (or after 5 s: then the test fails on its own).
class RedisProcess {
 public:
  RedisProcess(std::string program, std::vector<std::string> args, int port,
               std::string socket = "")
      : program_(std::move(program)), args_(std::move(args)), port_(port), socket_(socket) {
    start();
  }
  ~RedisProcess() { kill_now(); }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // SIGKILL (a stopped process is continued first), reaped; its socket file removed.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (!socket_.empty()) unlink(socket_.c_str());
  }
  void pause() { kill(pid_, SIGSTOP); }  // connections stay open, nothing answers
  void resume() { kill(pid_, SIGCONT); }
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  const std::string& socket() const { return socket_; }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  // unix:///socket when it has one, else redis://127.0.0.1:port.
  std::string url() const { return socket_.empty() ? "redis://" + addr() : "unix://" + socket_; }
  std::string cli(const std::string& args) const {
    const std::string where =
        socket_.empty() ? "-h 127.0.0.1 -p " + std::to_string(port_) : "-s '" + socket_ + "'";
    return shell("redis-cli " + where + " " + args + " 2>/dev/null");
  }

 private:
  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv{program_.data()};
      for (std::string& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(program_.c_str(), argv.data());
      _exit(127);
    }
    until([&] { return cli("PING") == "PONG"; }, 5000);
  }

  std::string program_;
  std::vector<std::string> args_;
  int port_;
  std::string socket_;
  pid_t pid_ = -1;
};

// A redis-server without persistence, logging warnings to dir/redis.log. `port` 0 with
// `unix_socket`: the socket dir/redis.sock only; a port: loopback TCP (and the socket too
// when asked).
inline std::unique_ptr<RedisProcess> start_redis(const std::string& dir, int port,
                                                 std::vector<std::string> extra = {},
                                                 bool unix_socket = false) {
  mkdir(dir.c_str(), 0700);
  std::vector<std::string> args{"--port",       std::to_string(port),
                                "--bind",       "127.0.0.1",
                                "--save",       "",
                                "--appendonly", "no",
                                "--dir",        dir,
                                "--loglevel",   "warning",
                                "--logfile",    dir + "/redis.log"};
  std::string socket;
  if (unix_socket) {
    socket = dir + "/redis.sock";
    args.insert(args.end(), {"--unixsocket", socket, "--unixsocketperm", "700"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<RedisProcess>("redis-server", std::move(args), port, socket);
}

// A redis-server on the unix socket dir/redis.sock (and on loopback `port` when non-zero).
inline std::unique_ptr<RedisProcess> start_redis_socket(const std::string& dir, int port = 0) {
  return start_redis(dir, port, {}, true);
}

// A redis-sentinel on a free loopback port monitoring `master_port` as master "kjit" with
// `quorum`, its configuration and log in `dir` (`extra`: more configuration lines).
inline std::unique_ptr<RedisProcess> start_sentinel(const std::string& dir, const std::string& name,
                                                    int master_port, int quorum,
                                                    const std::string& extra = "") {
  const int port = free_port();
  const std::string conf = dir + "/" + name + ".conf";
  if (FILE* f = std::fopen(conf.c_str(), "w")) {
    std::fprintf(f, "port %d\nbind 127.0.0.1\nsentinel monitor kjit 127.0.0.1 %d %d\n%s", port,
                 master_port, quorum, extra.c_str());
    std::fclose(f);
  }
  return std::make_unique<RedisProcess>(
      "redis-sentinel",
      std::vector<std::string>{conf, "--dir", dir, "--logfile", dir + "/" + name + ".log"}, port);
}

// A master, its replica and `count` Sentinels monitoring it as "kjit" (quorum: a
// majority), in dir/master, dir/replica and dir. ok() once every Sentinel knows the
// replica and the other Sentinels (they announce themselves every 2 s).
class RedisSentinelGroup {
 public:
  RedisSentinelGroup(const std::string& dir, int count, int down_after_ms = 400) {
    mkdir(dir.c_str(), 0700);
    master = start_redis(dir + "/master", free_port());
    replica = start_redis(dir + "/replica", free_port(),
                          {"--replicaof", "127.0.0.1", std::to_string(master->port())});
    url = "redis+sentinel://";
    for (int i = 0; i < count; ++i) {
      sentinels.push_back(
          start_sentinel(dir, "sentinel" + std::to_string(i), master->port(), count / 2 + 1,
                         "sentinel down-after-milliseconds kjit " + std::to_string(down_after_ms) +
                             "\nsentinel failover-timeout kjit 3000\n"));
      url += (i ? "," : "") + sentinels.back()->addr();
    }
    url += "/kjit";
    const std::string others = std::to_string(count - 1);
    ok_ = until(
        [&] {
          for (auto& s : sentinels) {
            if (s->cli("SENTINEL master kjit | grep -A1 -x num-other-sentinels | tail -1") !=
                others)
              return false;
            if (s->cli("SENTINEL master kjit | grep -A1 -x num-slaves | tail -1") != "1")
              return false;
          }
          return true;
        },
        15000);
  }
  bool ok() const { return ok_; }
  // The master's address as the first Sentinel gives it ("127.0.0.1:port").
  std::string master_addr() const {
    std::string r = sentinels[0]->cli("SENTINEL get-master-addr-by-name kjit");
    const size_t nl = r.find('\n');
    return nl == std::string::npos ? "" : r.substr(0, nl) + ":" + r.substr(nl + 1);
  }

  std::unique_ptr<RedisProcess> master, replica;
  std::vector<std::unique_ptr<RedisProcess>> sentinels;
  std::string url;

 private:
  bool ok_ = false;
};

// A Redis Cluster on loopback: `masters` masters (slots split evenly by redis-cli) and
// `replicas` replicas of each, in dir/n<i>. ok() once every node agrees that the cluster
// is up and knows every replica, and every replica is in sync with its master.
class RedisCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas = 0;            // per master
    int node_timeout_ms = 1000;  // cluster-node-timeout: failure detection, failover
    bool require_full_coverage = false;
  };
  RedisCluster(const std::string& dir, Options o) : options_(o) {
    mkdir(dir.c_str(), 0700);
    const int total = o.masters * (1 + o.replicas);
    for (int i = 0; i < total; ++i) {
      const std::string d = dir + "/n" + std::to_string(i);
      servers.push_back(
          start_redis(d, cluster_port(),
                      {"--cluster-enabled", "yes", "--cluster-config-file", d + "/nodes.conf",
                       "--cluster-node-timeout", std::to_string(o.node_timeout_ms),
                       "--cluster-require-full-coverage", o.require_full_coverage ? "yes" : "no"}));
    }
    std::string hosts;
    for (auto& s : servers) hosts += " " + s->addr();
    shell("redis-cli --cluster create" + hosts + " --cluster-replicas " +
          std::to_string(o.replicas) + " --cluster-yes >/dev/null 2>&1");
    ok_ = until(
        [&] {
          for (auto& s : servers) {
            if (s->cli("CLUSTER INFO").find("cluster_state:ok") == std::string::npos) return false;
            const std::string role = s->cli("ROLE");
            if (role.rfind("slave", 0) == 0 && role.find("connected") == std::string::npos)
              return false;
            // Every node knows every replica (roles spread by gossip): CLUSTER SLOTS,
            // asked of any node, lists them.
            if (o.replicas > 0 &&
                s->cli("CLUSTER NODES | grep -c slave") != std::to_string(o.masters * o.replicas))
              return false;
          }
          return true;
        },
        30000);
    for (auto& s : servers) ids.push_back(s->cli("CLUSTER MYID"));
  }
  bool ok() const { return ok_; }
  // redis+cluster:// with the first two nodes as seeds.
  std::string url() const {
    return "redis+cluster://" + servers[0]->addr() + "," + servers[1]->addr();
  }
  // The index of the master that owns `slot` as created (redis-cli --cluster create gives
  // the first `masters` nodes equal ranges in order).
  int owner(int slot) const {
    const int m = options_.masters;
    for (int i = 0; i < m; ++i) {
      const long hi = (i + 1 == m) ? 16383 : std::lround(16384.0 / m * (i + 1) - 1);
      if (slot <= hi) return i;
    }
    return m - 1;
  }
  // The index of the node replicating master `m` (the first found), or -1.
  int replica_of(int m) const {
    for (size_t i = 0; i < servers.size(); ++i) {
      if (!servers[i]->running()) continue;
      const std::string role = servers[i]->cli("ROLE");
      if (role.rfind("slave", 0) == 0 &&
          role.find("\n" + std::to_string(servers[m]->port()) + "\n") != std::string::npos)
        return int(i);
    }
    return -1;
  }

  std::vector<std::unique_ptr<RedisProcess>> servers;
  std::vector<std::string> ids;

 private:
  Options options_;
  bool ok_ = false;
};

}  // namespace kjit::test
