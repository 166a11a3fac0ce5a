// The compile worker against compiling in the caller's process and against raw NVRTC. Every
// measured compile runs in a fresh process (this program, run again with --child), as a
// program that starts, compiles and exits would. Prints one table.
//
//   bench_worker [--reps N]   (repetitions of the saxpy and hit rows; default 5)
//
// Rows:
//   1. saxpy, cold: raw NVRTC; kjit in-process; kjit through a running worker; the start
//      of a worker (a compile that had to start one, minus a compile through a running one).
//   2. 8 CUB BlockReduce variants (block sizes and types): each compiled by a new client
//      process after another process warmed the worker with one CUB kernel; against raw
//      NVRTC and kjit in-process, each in a new process too.
//   3. the hit path: a disk hit of saxpy in a new process, worker mode and in-process mode;
//      the worker's compile count is checked to be unchanged by hits.
// The time is that of the compile call inside the child (process start and library load
// excluded, the same for every column).
#include <nvrtc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kjit/kjit.h"

namespace {

using kjit_bench::median;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

const char* const kSaxpy =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

std::string cub_variant(int i) {
  static const char* const types[] = {"float", "double", "int", "unsigned int"};
  static const int sizes[] = {128, 256};
  const std::string t = types[i % 4];
  const std::string n = std::to_string(sizes[(i / 4) % 2]);
  return "#include <cub/block/block_reduce.cuh>\n"
         "extern \"C\" __global__ void k(const " +
         t + "* in, " + t +
         "* out) {\n"
         "  using R = cub::BlockReduce<" +
         t + ", " + n +
         ">;\n"
         "  __shared__ typename R::TempStorage s;\n"
         "  " +
         t +
         " v = R(s).Sum(in[threadIdx.x]);\n"
         "  if (threadIdx.x == 0) *out = v;\n"
         "}\n";
}

// ---- the child: one compile, its time on stdout ---------------------------------------------

std::vector<std::string> toolkit_includes() {
  std::vector<std::string> out;
  const std::string path = kjit_toolkit_include_path();
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    out.push_back("-I" + path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

int child(const std::string& mode, const std::string& dir, const std::string& src) {
  if (mode == "raw") {
    const std::vector<std::string> includes = toolkit_includes();
    std::vector<const char*> opts{"-arch=sm_90", "--frandom-seed=kjit"};
    for (const auto& i : includes) opts.push_back(i.c_str());
    const double t0 = now_ms();
    nvrtcProgram p;
    nvrtcCreateProgram(&p, src.c_str(), "kernel.cu", 0, nullptr, nullptr);
    const nvrtcResult r = nvrtcCompileProgram(p, int(opts.size()), opts.data());
    size_t n = 0;
    nvrtcGetCUBINSize(p, &n);
    std::string cubin(n, '\0');
    nvrtcGetCUBIN(p, cubin.data());
    nvrtcDestroyProgram(&p);
    const double ms = now_ms() - t0;
    if (r != NVRTC_SUCCESS) return 1;
    std::printf("%f %d\n", ms, 0);
    return 0;
  }
  kjit_cache_options co;
  kjit_cache_options_init(&co);
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  if (kjit_cache_open(&co, &cache) != KJIT_OK ||
      kjit_compiler_create(cache, 1, &compiler) != KJIT_OK) {
    return 1;
  }
  kjit_compiler_set_compile_mode(
      compiler, mode == "worker" ? KJIT_COMPILE_MODE_WORKER : KJIT_COMPILE_MODE_INPROCESS);
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_90");
  kjit_binary* b = nullptr;
  const double t0 = now_ms();
  const kjit_status st = kjit_compile(compiler, src.c_str(), o, &b);
  const double ms = now_ms() - t0;
  if (st != KJIT_OK) {
    std::fprintf(stderr, "child: %s\n", kjit_last_error());
    return 1;
  }
  std::printf("%f %d\n", ms, kjit_binary_tier(b));
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  return 0;
}

// ---- the parent ----------------------------------------------------------------------------

struct Run {
  double ms = 0;
  int tier = -1;
};

// Runs this program as a child for one compile.
Run spawn(const std::string& mode, const std::string& dir, const std::string& src) {
  int out[2];
  if (pipe(out) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl("/proc/self/exe", "bench_worker", "--child", mode.c_str(), dir.c_str(), src.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Run r;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(text.c_str(), "%lf %d", &r.ms, &r.tier) != 2) {
    std::fprintf(stderr, "bench_worker: a %s child failed\n", mode.c_str());
    std::exit(1);
  }
  return r;
}

std::string fresh_dir(const char* tag) {
  char tmpl[] = "/tmp/kjit-bench-worker-XXXXXX";
  return std::string(mkdtemp(tmpl)) + "/" + tag;
}

kjit_worker_info worker_info(const std::string& dir) {
  kjit_cache_options co;
  kjit_cache_options_init(&co);
  co.directory = dir.c_str();
  kjit_cache* c = nullptr;
  kjit_worker_info w;
  std::memset(&w, 0, sizeof w);
  w.struct_size = sizeof w;
  if (kjit_cache_open(&co, &c) == KJIT_OK) kjit_worker_info_get(c, &w);
  kjit_cache_close(c);
  return w;
}

void stop_worker(const std::string& dir) {
  const kjit_worker_info w = worker_info(dir);
  if (!w.running) return;
  kill(pid_t(w.pid), SIGKILL);
  for (int i = 0; i < 200 && worker_info(dir).running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void row(const char* what, double a, double b, double c, const char* note) {
  std::printf("| %-44s | %9.1f | %9.1f | %9.1f | %s |\n", what, a, b, c, note);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--child") == 0) return child(argv[2], argv[3], argv[4]);
  int reps = 5;
  if (argc == 3 && std::strcmp(argv[1], "--reps") == 0) reps = std::max(1, std::atoi(argv[2]));

  // 1. saxpy, cold (a new cache directory for every compile, so nothing hits; the worker
  //    rows share one directory whose entries are removed by using a new variant each time).
  std::vector<double> raw, inproc, worker, started;
  const std::string wdir = fresh_dir("worker");
  for (int i = 0; i < reps; ++i) {
    const std::string src = std::string(kSaxpy) + "// " + std::to_string(i) + "\n";
    raw.push_back(spawn("raw", "", src).ms);
    inproc.push_back(spawn("inprocess", fresh_dir("inproc"), src).ms);
    stop_worker(wdir);
    started.push_back(spawn("worker", wdir, src + "// start\n").ms);
    worker.push_back(spawn("worker", wdir, src + "// warm\n").ms);
  }
  std::printf("| %-44s | %9s | %9s | %9s | %s |\n", "compile (ms, median)", "raw NVRTC", "in-proc",
              "worker", "note");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(), "---");
  char note[160];
  std::snprintf(note, sizeof note, "worker start (exec, NVRTC load, probe) adds %.1f ms once",
                median(started) - median(worker));
  row("saxpy, cold, new process", median(raw), median(inproc), median(worker), note);

  // 2. CUB: warm the worker with one kernel, then 8 variants, each from a new client.
  const std::string cdir = fresh_dir("cub");
  const double warmup = spawn("worker", cdir, cub_variant(0) + "// warm-up\n").ms;
  double sum_raw = 0, sum_in = 0, sum_w = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string src = cub_variant(i);
    const double r = spawn("raw", "", src).ms;
    const double p = spawn("inprocess", fresh_dir("cub-inproc"), src).ms;
    const double w = spawn("worker", cdir, src).ms;
    sum_raw += r;
    sum_in += p;
    sum_w += w;
    char what[64];
    std::snprintf(what, sizeof what, "CUB BlockReduce variant %d, new process", i);
    row(what, r, p, w, i == 0 ? "worker warmed by another process first" : "");
  }
  std::snprintf(note, sizeof note, "warm-up compile that created the worker's PCH: %.0f ms",
                warmup);
  row("CUB, 8 variants, total", sum_raw, sum_in, sum_w, note);
  const kjit_worker_info cw = worker_info(cdir);

  // 3. Hits: the worker is not contacted.
  const kjit_worker_info before = worker_info(wdir);
  std::vector<double> hit_w, hit_in;
  const std::string hit_src = std::string(kSaxpy) + "// hit\n";
  spawn("worker", wdir, hit_src);
  const kjit_worker_info mid = worker_info(wdir);
  for (int i = 0; i < reps; ++i) {
    const Run a = spawn("worker", wdir, hit_src);
    const Run b = spawn("inprocess", wdir, hit_src);
    if (a.tier != KJIT_TIER_DISK || b.tier != KJIT_TIER_DISK) {
      std::fprintf(stderr, "bench_worker: expected disk hits\n");
      return 1;
    }
    hit_w.push_back(a.ms);
    hit_in.push_back(b.ms);
  }
  const kjit_worker_info after = worker_info(wdir);
  std::snprintf(note, sizeof note, "worker compiles: %llu before the hits, %llu after %d hits",
                static_cast<unsigned long long>(mid.compiles),
                static_cast<unsigned long long>(after.compiles), 2 * reps);
  row("saxpy, disk hit, new process", 0, median(hit_in), median(hit_w), note);
  std::printf(
      "\nworker for the CUB rows: %llu compiles, %llu PCH created, %llu used; "
      "saxpy worker: pid %lld%s\n",
      static_cast<unsigned long long>(cw.compiles), static_cast<unsigned long long>(cw.pch_created),
      static_cast<unsigned long long>(cw.pch_used), static_cast<long long>(after.pid),
      before.pid == after.pid ? "" : " (restarted)");
  stop_worker(wdir);
  stop_worker(cdir);
  return after.compiles == mid.compiles ? 0 : 1;
}
