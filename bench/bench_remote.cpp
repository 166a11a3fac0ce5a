// Fleet tier benchmark: time to a ready compiled kernel on a second node, from Redis vs a
// local SQLite hit vs a cold compile, for saxpy and a CUB BlockReduce kernel. Starts its
// own redis-server on a unix socket. Prints one table.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "compile/compiler.h"
#include "store/cache.h"
#include "util/fs.h"

namespace {

using kjit_bench::kCub;
using kjit_bench::kSaxpy;
using kjit_bench::median;

std::string temp_dir() {
  char tmpl[] = "/tmp/kjit-bench-remote-XXXXXX";
  if (!mkdtemp(tmpl)) std::exit(1);
  return tmpl;
}

// Time to a ready result on a fresh node (new cache handle, new directory unless `dir`).
double ready_ms(const std::string& dir, const std::string& url, const char* src,
                const kjit::CompileOptions& o, kjit_tier* tier) {
  const double t0 = kjit::monotonic_ms();
  kjit::CacheConfig cfg;
  cfg.directory = dir;
  cfg.remote.url = url;
  kjit::Cache cache(cfg);
  kjit::Compiler c(&cache, 1);
  kjit::Outcome out = c.compile(src, o);
  const double dt = kjit::monotonic_ms() - t0;
  if (out.status != KJIT_OK) {
    std::fprintf(stderr, "compile failed: %s\n", out.message.c_str());
    std::exit(1);
  }
  *tier = out.tier;
  if (cache.remote()) cache.remote()->flush();
  return dt;
}

}  // namespace

int main() {
  const std::string tmp = temp_dir();
  const std::string sock = tmp + "/redis.sock";
  const pid_t redis = fork();
  if (redis == 0) {
    execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", sock.c_str(), "--save",
           "", "--appendonly", "no", "--logfile", (tmp + "/redis.log").c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 200 && !kjit::is_regular_file(sock) && access(sock.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string url = "unix://" + sock;
  std::printf(
      "| kernel | cold compile (ms) | local SQLite hit, new handle (ms) | from Redis on node B "
      "(ms) |\n");
  std::printf("| --- | --- | --- | --- |\n");
  struct K {
    const char* name;
    const char* src;
    bool cub;
  } kernels[] = {{"saxpy", kSaxpy, false}, {"CUB BlockReduce", kCub, true}};
  for (const K& k : kernels) {
    kjit::CompileOptions o;
    o.target = "sm_90";
    if (k.cub) o.raw.push_back(std::string("-I") + KJIT_CUDA_INCLUDE_DIR + "/cccl");
    kjit_tier tier;
    const std::string node_a = temp_dir();
    {
      kjit::CacheConfig cfg;
      cfg.directory = node_a;
      kjit::Cache init(cfg);
    }
    const double cold = ready_ms(node_a, url, k.src, o, &tier);  // compiles, publishes
    std::vector<double> local, remote;
    for (int r = 0; r < 9; ++r) {
      local.push_back(ready_ms(node_a, "", k.src, o, &tier));
      if (tier != KJIT_TIER_DISK) std::fprintf(stderr, "expected a disk hit\n");
      const std::string node_b = temp_dir();
      {  // node B's database exists already (a node that has run before, not this kernel)
        kjit::CacheConfig cfg;
        cfg.directory = node_b;
        kjit::Cache init(cfg);
      }
      remote.push_back(ready_ms(node_b, url, k.src, o, &tier));
      if (tier != KJIT_TIER_REMOTE) std::fprintf(stderr, "expected a remote hit\n");
      std::system(("rm -rf " + node_b).c_str());
    }
    std::printf("| %s | %.1f | %.2f | %.2f |\n", k.name, cold, median(local), median(remote));
    std::system(("rm -rf " + node_a).c_str());
  }
  kill(redis, SIGKILL);
  waitpid(redis, nullptr, 0);
  std::system(("rm -rf " + tmp).c_str());
  return 0;
}
