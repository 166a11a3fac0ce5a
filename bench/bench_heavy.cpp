// First compiles of a heavy real kernel: CUTLASS 4.7's own NVRTC unit test (a CuTe/CUTLASS
// SM90 TMA warp-specialized GEMM kernel behind a tensor contraction,
// test/unit/nvrtc/thread/nvrtc_contraction.cu), compiled by raw NVRTC and by kjit, every
// compile in a fresh process (this program run again in a child mode). Prints one table.
//
//   bench_heavy --cutlass DIR [--quick] [--rows LIST] [--rounds N] [--together]
//
//   DIR    holds CUTLASS's include/ (CUTLASS and CuTe) and test/unit/nvrtc/: the project's
//          test data, `tar -xzf shared/testdata/cutlass-4.7.tgz -C DIR`.
//   --quick   rows 1-3 only (a smoke test).
//   --rows    comma-separated row numbers out of 1-6 and 8 (default all); row 3 runs row 2
//             first (it reuses its cache); row 7 is the PCH and worker columns of the others.
//   --rounds  row 6 N times (default 1), raw NVRTC first in odd rounds and kjit first in
//             even ones, so that the host's drift during the run falls on both; prints each
//             round's kjit / raw ratio and their median.
//   --together  row 6's raw NVRTC and kjit children at the same time (two of the host's
//             cores) instead of one after the other: on a host whose speed drifts by a
//             quarter within minutes, the only way both see the same host.
//
// On a GPU host, from the bundle made by tools/make_bundle.sh (bench_heavy is one of its
// bin/bench_* programs; no GPU is used, only NVRTC and the toolkit's headers), with TGZ the
// project's shared/testdata/cutlass-4.7.tgz:
//
//   mkdir -p /tmp/cutlass && tar -xzf TGZ -C /tmp/cutlass
//   export KJIT_WORKER=$PWD/bundle/libexec/kjit/kjit-worker
//   export LD_LIBRARY_PATH=$PWD/bundle/lib:$PWD/bundle/bin:/usr/local/cuda/lib64
//   bundle/bin/bench_heavy --cutlass /tmp/cutlass > heavy.md 2> heavy.err
//
// All rows run about 20 compiles of the kernel (tens of seconds each on a fast core, up to 8
// at once); where one command may run only 10 minutes, run `--rows 1,2,3` and
// `--rows 4,5,6,8` as two commands. Progress, with each row's times, goes to stderr as it
// goes; the table comes at the end.
//
// The program (the test's source, with the test's options, for sm_90a):
//   #include "kernel/thread/contraction.hpp"
//   using Operator = nvrtc::thread::ContractionKernel<bf16, bf16, bf16, tile, cluster,
//                                                     true, true, RM, RN, RK, RL>::Kernel;
//   extern "C" __global__ void global_entry(__grid_constant__ Operator::Params const params)
//   { extern __shared__ char smem[]; Operator op; op(params, smem); }
// compiled with -std=c++17 -default-device -w -I DIR/include -I DIR/test/unit/nvrtc. Variant
// 0 is the test's kernel (ranks 10,10,10,10); the others change the ranks, so each is a new
// program over the same headers.
//
// Rows (wall = fork of the child to its exit; compile = the compile calls inside it):
//   1. raw NVRTC (nvrtcCreateProgram + nvrtcCompileProgram to CUBIN), fresh process, given
//      the toolkit's include directories explicitly (kjit_toolkit_include_path()).
//   2. kjit_compile, default settings (compile mode auto: through the compile worker when it
//      starts), fresh process, fresh cache.
//   3. the same program again in a new process: 3a with nothing changed (the control), 3b
//      after an output file was written into the children's working directory: tier, time.
//   4. 4 variants from 4 processes at once: raw NVRTC; kjit default mode (one fresh cache
//      shared by the 4); kjit with KJIT_COMPILE_MODE=inprocess (another fresh shared cache).
//   5. 8 processes compiling the same kernel at once through kjit (fresh shared cache): wall
//      and the number of NVRTC compiles over all processes (kjit_cache_stats totals).
//   6. a variant compiled right after another in the same process: kjit (default mode,
//      fresh cache) against raw NVRTC.
//   8. all 8 variants from 8 processes at once: raw NVRTC; kjit default mode (fresh cache).
//   7. (columns) PCH created/used/failed over all processes of each kjit row's cache, and
//      the compile worker's resident memory after the row when one served it.
#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// ---- the program --------------------------------------------------------------------------

struct Ranks {
  int m, n, k, l;
};
// Variant 0 is the unit test's kernel.
const Ranks kVariants[] = {{10, 10, 10, 10}, {11, 10, 10, 10}, {10, 11, 10, 10}, {10, 10, 11, 10},
                           {10, 10, 10, 11}, {11, 11, 10, 10}, {12, 10, 10, 10}, {10, 12, 10, 10}};
constexpr int kVariantCount = int(sizeof kVariants / sizeof kVariants[0]);

std::string program(int variant) {
  const Ranks& r = kVariants[variant];
  return "#include \"kernel/thread/contraction.hpp\"\n"
         "using Operator = nvrtc::thread::ContractionKernel<"
         "cutlass::bfloat16_t, cutlass::bfloat16_t, cutlass::bfloat16_t, "
         "cute::Shape<cute::Shape<cute::_8, cute::_8>, cute::Shape<cute::_16, cute::_8>, "
         "cute::Shape<cute::_8, cute::_8>>, cute::Shape<cute::_1, cute::_2, cute::_1>, "
         "true, true, " +
         std::to_string(r.m) + ", " + std::to_string(r.n) + ", " + std::to_string(r.k) + ", " +
         std::to_string(r.l) +
         ">::Kernel;\n"
         "extern \"C\" __global__ void global_entry("
         "__grid_constant__ Operator::Params const params) {\n"
         "  extern __shared__ char smem[];\n"
         "  Operator op;\n"
         "  op(params, smem);\n"
         "}\n";
}

const char* const kTarget = "sm_90a";
const char* const kTestOptions[] = {"-std=c++17", "-default-device", "-w"};

std::vector<std::string> cutlass_includes(const std::string& dir) {
  return {dir + "/include", dir + "/test/unit/nvrtc"};
}

std::vector<std::string> toolkit_includes() {
  std::vector<std::string> out;
  const std::string path = kjit_toolkit_include_path();
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    out.push_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::atoi(s.substr(pos, end - pos).c_str()));
    pos = end + 1;
  }
  return out;
}

// ---- the child: compiles the listed variants in order, one line each:
//      "C <seconds> <tier> <NVRTC seconds>" (kjit_binary_compile_ms for kjit) -----------------

int child_raw(const std::string& cutlass, const std::vector<int>& variants) {
  std::vector<std::string> args(std::begin(kTestOptions), std::end(kTestOptions));
  args.push_back(std::string("-arch=") + kTarget);
  args.push_back("--frandom-seed=kjit");  // kjit's deterministic seed
  for (const auto& i : cutlass_includes(cutlass)) args.push_back("-I" + i);
  for (const auto& i : toolkit_includes()) args.push_back("-I" + i);
  std::vector<const char*> opts;
  for (const auto& a : args) opts.push_back(a.c_str());
  for (int v : variants) {
    const std::string src = program(v);
    const double t0 = now_s();
    nvrtcProgram p;
    nvrtcCreateProgram(&p, src.c_str(), "kernel.cu", 0, nullptr, nullptr);
    const nvrtcResult r = nvrtcCompileProgram(p, int(opts.size()), opts.data());
    size_t n = 0;
    nvrtcGetCUBINSize(p, &n);
    std::string cubin(n, '\0');
    nvrtcGetCUBIN(p, cubin.data());
    const double s = now_s() - t0;
    if (r != NVRTC_SUCCESS || n == 0) {
      size_t log_size = 0;
      nvrtcGetProgramLogSize(p, &log_size);
      std::string log(log_size, '\0');
      nvrtcGetProgramLog(p, log.data());
      std::fprintf(stderr, "bench_heavy: raw NVRTC failed on variant %d: %s\n%.4000s\n", v,
                   nvrtcGetErrorString(r), log.c_str());
      return 1;
    }
    nvrtcDestroyProgram(&p);
    std::printf("C %f %d %f\n", s, KJIT_TIER_COMPILED, s);
    std::fflush(stdout);
  }
  return 0;
}

// kjit's own lines of a compile's log (why a result was not stored, a PCH that failed...).
void print_kjit_notes(int variant, const kjit_binary* b) {
  const std::string log = kjit_binary_log(b) ? kjit_binary_log(b) : "";
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    if (log.compare(pos, 5, "kjit:") == 0) {
      std::fprintf(stderr, "  variant %d: %.*s\n", variant, int(end - pos), log.c_str() + pos);
    }
    pos = end + 1;
  }
}

int child_kjit(const std::string& cutlass, const std::string& cache_dir,
               const std::vector<int>& variants) {
  kjit_cache_options co;
  kjit_cache_options_init(&co);
  co.directory = cache_dir.c_str();
  kjit_cache* cache = nullptr;
  kjit_compiler* compiler = nullptr;
  if (kjit_cache_open(&co, &cache) != KJIT_OK ||
      kjit_compiler_create(cache, 0, &compiler) != KJIT_OK) {
    std::fprintf(stderr, "bench_heavy: kjit: %s\n", kjit_last_error());
    return 1;
  }
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_set_target(o, kTarget);
  for (const char* opt : kTestOptions) kjit_options_add(o, opt);
  for (const auto& i : cutlass_includes(cutlass)) kjit_options_add_include_path(o, i.c_str());
  int rc = 0;
  for (int v : variants) {
    const std::string src = program(v);
    kjit_binary* b = nullptr;
    const double t0 = now_s();
    const kjit_status st = kjit_compile(compiler, src.c_str(), o, &b);
    const double s = now_s() - t0;
    if (st != KJIT_OK) {
      std::fprintf(stderr, "bench_heavy: kjit_compile failed on variant %d: %s\n%.4000s\n", v,
                   kjit_last_error(), b ? kjit_binary_log(b) : "");
      kjit_binary_destroy(b);
      rc = 1;
      break;
    }
    std::printf("C %f %d %f\n", s, kjit_binary_tier(b), kjit_binary_compile_ms(b) / 1000.0);
    print_kjit_notes(v, b);
    std::fflush(stdout);
    kjit_binary_destroy(b);
  }
  kjit_options_destroy(o);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);  // adds this process's counts to the database's totals
  return rc;
}

int child_main(int argc, char** argv) {
  // --child MODE CUTLASS CACHE WORKDIR VARIANTS
  if (argc != 7) return 2;
  const std::string mode = argv[2];
  if (chdir(argv[5]) != 0) {
    std::perror("bench_heavy: chdir");
    return 1;
  }
  const std::vector<int> variants = parse_list(argv[6]);
  if (mode == "raw") return child_raw(argv[3], variants);
  return child_kjit(argv[3], argv[4], variants);
}

// ---- the parent -----------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int fd = -1;
  double start = 0;
  double wall = 0;                               // seconds, fork to exit
  std::vector<std::pair<double, int>> compiles;  // seconds, tier
  std::vector<double> nvrtc;                     // NVRTC's own seconds of each
};

std::string g_cutlass;
std::string g_workdir;

// mode: "raw", "kjit" (default compile mode) or "inprocess" (KJIT_COMPILE_MODE=inprocess).
Child start_child(const std::string& mode, const std::string& cache_dir,
                  const std::vector<int>& variants) {
  std::string list;
  for (int v : variants) list += (list.empty() ? "" : ",") + std::to_string(v);
  int out[2];
  if (pipe(out) != 0) std::exit(1);
  std::fflush(stdout);
  std::fflush(stderr);
  Child c;
  c.start = now_s();
  c.pid = fork();
  if (c.pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    if (mode == "inprocess") {
      setenv("KJIT_COMPILE_MODE", "inprocess", 1);
    } else {
      unsetenv("KJIT_COMPILE_MODE");  // the default
    }
    // argv[0] without a directory: the library finds its worker from /proc/self/exe.
    execl("/proc/self/exe", "bench_heavy", "--child", mode == "raw" ? "raw" : "kjit",
          g_cutlass.c_str(), cache_dir.c_str(), g_workdir.c_str(), list.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  c.fd = out[0];
  return c;
}

// Reads the children's output until each one closes it, waits for each as it ends (so that
// each wall time is its own even when several run at once), and parses their lines.
void finish_children(const std::vector<Child*>& cs, const char* what) {
  std::vector<std::string> text(cs.size());
  size_t open = cs.size();
  while (open > 0) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < cs.size(); ++i) {
      if (cs[i]->fd < 0) continue;
      fds.push_back(pollfd{cs[i]->fd, POLLIN, 0});
      which.push_back(i);
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) std::exit(1);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *cs[which[k]];
      char buf[256];
      const ssize_t n = read(c.fd, buf, sizeof buf);
      if (n > 0) {
        text[which[k]].append(buf, size_t(n));
        continue;
      }
      close(c.fd);  // the child's end closed: it has exited (or is exiting)
      c.fd = -1;
      --open;
      int status = 0;
      waitpid(c.pid, &status, 0);
      c.wall = now_s() - c.start;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "bench_heavy: the %s child failed (status %d)\n", what, status);
        std::exit(1);
      }
    }
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    const std::string& t = text[i];
    size_t pos = 0;
    while (pos < t.size()) {
      size_t end = t.find('\n', pos);
      if (end == std::string::npos) end = t.size();
      double s = 0;
      int tier = -1;
      double nvrtc = 0;
      if (std::sscanf(t.c_str() + pos, "C %lf %d %lf", &s, &tier, &nvrtc) == 3) {
        cs[i]->compiles.emplace_back(s, tier);
        cs[i]->nvrtc.push_back(nvrtc);
      }
      pos = end + 1;
    }
  }
}

void finish_child(Child& c, const char* what) {
  finish_children({&c}, what);
}

Child run_child(const std::string& mode, const std::string& cache_dir,
                const std::vector<int>& variants) {
  Child c = start_child(mode, cache_dir, variants);
  finish_child(c, mode.c_str());
  return c;
}

// Starts one child per entry at once; returns the wall time of the whole set.
double run_set(const std::string& mode, const std::string& cache_dir,
               const std::vector<int>& variants, std::vector<Child>* out) {
  const double t0 = now_s();
  std::vector<Child> children;
  for (int v : variants) children.push_back(start_child(mode, cache_dir, {v}));
  std::vector<Child*> all;
  for (Child& c : children) all.push_back(&c);
  finish_children(all, mode.c_str());
  const double wall = now_s() - t0;
  if (out) *out = children;
  return wall;
}

std::string g_tmp_root;

std::string fresh_cache(const char* tag) {
  const std::string dir = g_tmp_root + "/cache-" + tag;
  mkdir(dir.c_str(), 0700);
  return dir;
}

const char* tier_name(int tier) {
  switch (tier) {
    case KJIT_TIER_COMPILED:
      return "compiled";
    case KJIT_TIER_MEMORY:
      return "memory hit";
    case KJIT_TIER_DISK:
      return "disk hit";
    case KJIT_TIER_REMOTE:
      return "remote hit";
    default:
      return "?";
  }
}

// What a kjit row's cache says once its processes are gone, and the worker that served it.
struct After {
  kjit_cache_stats stats;
  kjit_worker_info worker;
};

After after_row(const std::string& cache_dir) {
  After a;
  std::memset(&a, 0, sizeof a);
  a.stats.struct_size = sizeof a.stats;
  a.worker.struct_size = sizeof a.worker;
  kjit_cache_options co;
  kjit_cache_options_init(&co);
  co.directory = cache_dir.c_str();
  kjit_cache* c = nullptr;
  if (kjit_cache_open(&co, &c) == KJIT_OK) {
    kjit_cache_stats_get(c, &a.stats);
    kjit_worker_info_get(c, &a.worker);
  }
  kjit_cache_close(c);
  return a;
}

void stop_worker(const std::string& cache_dir, const After& a) {
  if (!a.worker.running || a.worker.pid <= 0) return;
  kill(pid_t(a.worker.pid), SIGTERM);
  for (int i = 0; i < 400; ++i) {
    if (!after_row(cache_dir).worker.running) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid_t(a.worker.pid), SIGKILL);
}

// ---- the table ------------------------------------------------------------------------------

struct Row {
  std::string row, what, wall, compile, result, pch, worker;
};
std::vector<Row> g_rows;

// Seconds with `digits` decimals.
std::string fmt(int digits, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pch_text(const After& a) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%llu / %llu / %llu",
                static_cast<unsigned long long>(a.stats.total_pch_created),
                static_cast<unsigned long long>(a.stats.total_pch_used),
                static_cast<unsigned long long>(a.stats.total_pch_failed));
  return buf;
}

std::string worker_text(const After& a) {
  if (!a.worker.running) return "none (in-process)";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.0f MiB; %llu compiles, PCH %llu/%llu",
                double(a.worker.rss_bytes) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(a.worker.compiles),
                static_cast<unsigned long long>(a.worker.pch_created),
                static_cast<unsigned long long>(a.worker.pch_used));
  return buf;
}

// Compiles whose result the cache did not keep (NVRTC read a file the key does not cover).
std::string not_stored_text(const After& a) {
  if (a.stats.total_not_stored == 0) return "";
  return "; not stored: " + std::to_string(a.stats.total_not_stored);
}

// The tier of a child's i-th compile, with NVRTC's own time when it compiled.
std::string tier_text(const Child& c, size_t i) {
  std::string out = tier_name(c.compiles.at(i).second);
  if (c.compiles.at(i).second == KJIT_TIER_COMPILED) {
    out += " (NVRTC " + fmt(1, c.nvrtc.at(i)) + " s)";
  }
  return out;
}

std::string tiers_text(const std::vector<Child>& children) {
  int compiled = 0, hits = 0;
  for (const Child& c : children) {
    for (const auto& p : c.compiles) (p.second == KJIT_TIER_COMPILED ? compiled : hits)++;
  }
  return std::to_string(compiled) + " compiled, " + std::to_string(hits) + " hits";
}

double max_compile(const std::vector<Child>& children) {
  double m = 0;
  for (const Child& c : children) {
    for (const auto& p : c.compiles) m = std::max(m, p.first);
  }
  return m;
}

void progress(const char* row, const std::string& what, double s) {
  std::fprintf(stderr, "%s: %s, %.3f s\n", row, what.c_str(), s);
  std::fflush(stderr);
}

// ---- the rows -------------------------------------------------------------------------------

void rows_1_to_3(const std::set<int>& rows) {
  if (rows.count(1)) {
    std::fprintf(stderr, "row 1: raw NVRTC, variant 0, fresh process...\n");
    const Child c = run_child("raw", "", {0});
    progress("row 1", "done", c.wall);
    g_rows.push_back({"1", "raw NVRTC, fresh process", fmt(1, c.wall),
                      fmt(1, c.compiles.at(0).first), "compiled", "-", "-"});
  }
  if (!rows.count(2) && !rows.count(3)) return;
  const std::string dir = fresh_cache("first");
  std::fprintf(stderr, "row 2: kjit default mode, variant 0, fresh process, fresh cache...\n");
  const Child c2 = run_child("kjit", dir, {0});
  progress("row 2", tier_name(c2.compiles.at(0).second), c2.wall);
  const After a2 = after_row(dir);
  g_rows.push_back({"2", "kjit first compile, fresh process, fresh cache, default mode (auto)",
                    fmt(1, c2.wall), fmt(1, c2.compiles.at(0).first),
                    tier_text(c2, 0) + not_stored_text(a2), pch_text(a2), worker_text(a2)});
  if (rows.count(3)) {
    // The control: a new process, nothing changed.
    std::fprintf(stderr, "row 3a: kjit again, new process, nothing changed...\n");
    const Child c3a = run_child("kjit", dir, {0});
    progress("row 3a", tier_name(c3a.compiles.at(0).second), c3a.wall);
    const After a3a = after_row(dir);
    g_rows.push_back({"3a", "kjit same program, new process, nothing changed", fmt(3, c3a.wall),
                      fmt(3, c3a.compiles.at(0).first), tier_text(c3a, 0) + not_stored_text(a3a),
                      pch_text(a3a), worker_text(a3a)});
    const std::string out = g_workdir + "/heavy_output.txt";
    if (FILE* f = std::fopen(out.c_str(), "w")) {
      std::fprintf(f, "first compile %.3f s\n", c2.compiles.at(0).first);
      std::fclose(f);
    }
    std::fprintf(stderr, "row 3b: kjit again, new process, after writing %s...\n", out.c_str());
    const Child c3 = run_child("kjit", dir, {0});
    progress("row 3b", tier_name(c3.compiles.at(0).second), c3.wall);
    const After a3 = after_row(dir);
    g_rows.push_back({"3b", "kjit same program, new process, after an output file in its cwd",
                      fmt(3, c3.wall), fmt(3, c3.compiles.at(0).first),
                      tier_text(c3, 0) + not_stored_text(a3), pch_text(a3), worker_text(a3)});
    stop_worker(dir, a3);
  } else {
    stop_worker(dir, a2);
  }
}

// `n` variants from as many processes at once: raw NVRTC, kjit in its default mode and (with
// `inprocess`) kjit with KJIT_COMPILE_MODE=inprocess, each kjit set on one fresh cache.
void row_variants(const char* row, int n, bool inprocess) {
  std::vector<int> variants;
  for (int v = 0; v < n; ++v) variants.push_back(n == 4 ? v + 1 : v);
  const std::string label =
      std::to_string(n) + " variants, " + std::to_string(n) + " processes at once: ";
  std::fprintf(stderr, "row %s: %d variants, %d raw NVRTC processes at once...\n", row, n, n);
  std::vector<Child> raw;
  const double raw_wall = run_set("raw", "", variants, &raw);
  progress((std::string("row ") + row).c_str(), "raw", raw_wall);
  g_rows.push_back({row, label + "raw NVRTC", fmt(1, raw_wall),
                    fmt(1, max_compile(raw)) + " (slowest)", std::to_string(n) + " compiled", "-",
                    "-"});
  std::vector<const char*> modes{"kjit"};
  if (inprocess) modes.push_back("inprocess");
  for (const char* mode : modes) {
    const std::string dir = fresh_cache((std::string(row) + "-" + mode).c_str());
    std::fprintf(stderr, "row %s: %d variants, %d kjit processes (%s) at once, shared cache...\n",
                 row, n, n, mode);
    std::vector<Child> kj;
    const double wall = run_set(mode, dir, variants, &kj);
    progress((std::string("row ") + row).c_str(), mode, wall);
    const After a = after_row(dir);
    g_rows.push_back({row,
                      label + (mode == std::string("kjit") ? "kjit default mode, shared cache"
                                                           : "kjit KJIT_COMPILE_MODE=inprocess"),
                      fmt(1, wall), fmt(1, max_compile(kj)) + " (slowest)",
                      tiers_text(kj) + not_stored_text(a), pch_text(a), worker_text(a)});
    stop_worker(dir, a);
  }
}

void row_4() {
  row_variants("4", 4, true);
}

// Row 8: all 8 variants at once.
void row_8() {
  row_variants("8", 8, false);
}

void row_5() {
  const std::string dir = fresh_cache("eight");
  std::fprintf(stderr, "row 5: 8 kjit processes on the same kernel at once...\n");
  std::vector<Child> kj;
  const double wall = run_set("kjit", dir, std::vector<int>(8, 5), &kj);
  progress("row 5", "kjit", wall);
  const After a = after_row(dir);
  g_rows.push_back({"5", "8 processes, same kernel at once: kjit default mode, shared cache",
                    fmt(1, wall), fmt(1, max_compile(kj)) + " (slowest)",
                    tiers_text(kj) + "; NVRTC compiles in total: " +
                        std::to_string(a.stats.total_compiles) + not_stored_text(a),
                    pch_text(a), worker_text(a)});
  stop_worker(dir, a);
}

// Row 6's label for round `r` of `rounds`.
std::string row_6_label(int r, int rounds) {
  return rounds == 1 ? std::string("6") : "6 (round " + std::to_string(r + 1) + ")";
}

// Each round's kjit / raw ratio of row 6 (sum of the two compile calls), for the summary.
std::vector<double> g_row6_ratios;
bool g_together = false;  // --together: row 6's raw and kjit children run at the same time

double compile_sum(const Child& c) {
  return c.compiles.at(0).first + c.compiles.at(1).first;
}

void record_6_raw(const Child& raw, const std::string& label) {
  progress(("row " + label).c_str(), "raw", raw.wall);
  g_rows.push_back({label, "variant, then another in the same process: raw NVRTC", fmt(1, raw.wall),
                    fmt(1, raw.compiles.at(0).first) + " then " + fmt(1, raw.compiles.at(1).first),
                    "2 compiled", "-", "-"});
}

void record_6_kjit(const Child& kj, const std::string& dir, const std::string& label) {
  progress(("row " + label).c_str(), "kjit", kj.wall);
  const After a = after_row(dir);
  g_rows.push_back({label, "variant, then another in the same process: kjit default mode",
                    fmt(1, kj.wall),
                    fmt(1, kj.compiles.at(0).first) + " then " + fmt(1, kj.compiles.at(1).first),
                    tier_text(kj, 0) + ", " + tier_text(kj, 1) + not_stored_text(a), pch_text(a),
                    worker_text(a)});
  stop_worker(dir, a);
}

// Row 6, `rounds` times. One after the other, raw goes first in odd rounds and kjit in even
// ones; with --together both children run at the same time (on two of the host's cores), so
// that a drift of the host's speed during the run falls on both alike.
void row_6(int rounds) {
  const std::vector<int> variants{6, 7};
  for (int r = 0; r < rounds; ++r) {
    const std::string label = row_6_label(r, rounds);
    const std::string dir = fresh_cache(("pair-" + std::to_string(r)).c_str());  // its own
    const bool raw_first = r % 2 == 0;
    std::fprintf(stderr, "row %s: two variants one after another, raw NVRTC and kjit%s...\n",
                 label.c_str(), g_together ? ", at the same time" : "");
    Child raw, kj;
    if (g_together) {
      raw = start_child("raw", "", variants);
      kj = start_child("kjit", dir, variants);
      finish_children({&raw, &kj}, "row 6");
    } else {
      if (raw_first) raw = run_child("raw", "", variants);
      kj = run_child("kjit", dir, variants);
      if (!raw_first) raw = run_child("raw", "", variants);
    }
    record_6_raw(raw, label);
    record_6_kjit(kj, dir, label);
    g_row6_ratios.push_back(compile_sum(kj) / compile_sum(raw));
  }
}

// One line on row 6's rounds: each round's kjit / raw ratio and their median.
void print_row_6_summary() {
  if (g_row6_ratios.size() < 2) return;
  std::vector<double> r = g_row6_ratios;
  std::string each;
  for (double x : r) each += (each.empty() ? "" : ", ") + fmt(2, x) + "x";
  std::sort(r.begin(), r.end());
  const size_t n = r.size();
  const double median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
  std::printf(
      "\nrow 6, kjit / raw (sum of the two compile calls) over %zu rounds%s: %s; median %sx\n", n,
      g_together ? " run side by side" : "", each.c_str(), fmt(2, median).c_str());
}

void print_table() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf(
      "bench_heavy: CUTLASS 4.7 nvrtc_contraction (SM90 TMA warp-specialized GEMM, bf16), "
      "target %s; NVRTC %d.%d; %u cores; toolkit include path %s\n\n",
      kTarget, major, minor, std::thread::hardware_concurrency(), kjit_toolkit_include_path());
  std::printf(
      "| row | measurement | wall (s) | compile call (s) | result | PCH created / used / "
      "failed | compile worker after the row |\n");
  std::printf("| --- | --- | ---: | ---: | --- | --- | --- |\n");
  for (const Row& r : g_rows) {
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.row.c_str(), r.what.c_str(),
                r.wall.c_str(), r.compile.c_str(), r.result.c_str(), r.pch.c_str(),
                r.worker.c_str());
  }
  std::printf(
      "\nwall: fork of the child process to its exit; compile call: nvrtcCreateProgram to "
      "the CUBIN, or kjit_compile, inside it. Every kjit row uses a fresh cache directory "
      "(rows 3a and 3b reuse row 2's); PCH counts are totals over all processes of that cache.\n");
  print_row_6_summary();
}

void usage() {
  std::fprintf(
      stderr,
      "usage: bench_heavy --cutlass DIR [--quick] [--rows LIST] [--rounds N] [--together]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  std::set<int> rows{1, 2, 3, 4, 5, 6, 8};
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cutlass") == 0 && i + 1 < argc) {
      g_cutlass = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      rows = {1, 2, 3};
    } else if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
      rows.clear();
      for (int r : parse_list(argv[++i])) rows.insert(r);
    } else if (std::strcmp(argv[i], "--together") == 0) {
      g_together = true;
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
      if (rounds < 1 || rounds > 20) usage();
    } else {
      usage();
    }
  }
  if (g_cutlass.empty()) usage();
  char resolved[4096];
  if (!realpath(g_cutlass.c_str(), resolved)) {
    std::fprintf(stderr, "bench_heavy: --cutlass %s: %s\n", g_cutlass.c_str(),
                 std::strerror(errno));
    return 2;
  }
  g_cutlass = resolved;
  const std::string header = g_cutlass + "/test/unit/nvrtc/kernel/thread/contraction.hpp";
  if (access(header.c_str(), R_OK) != 0 || access((g_cutlass + "/include/cute").c_str(), R_OK)) {
    std::fprintf(stderr, "bench_heavy: %s lacks include/cute or %s\n", g_cutlass.c_str(),
                 header.c_str());
    return 2;
  }
  char tmpl[] = "/tmp/kjit-bench-heavy-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  g_tmp_root = tmpl;
  g_workdir = g_tmp_root + "/work";  // every child's working directory
  mkdir(g_workdir.c_str(), 0700);
  static_assert(kVariantCount == 8, "rows use variants 0-7");

  const double t0 = now_s();
  rows_1_to_3(rows);
  if (rows.count(4)) row_4();
  if (rows.count(5)) row_5();
  if (rows.count(6)) row_6(rounds);
  if (rows.count(8)) row_8();
  std::fprintf(stderr, "bench_heavy: all rows in %.0f s\n", now_s() - t0);
  print_table();
  const std::string rm = "rm -rf '" + g_tmp_root + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "bench_heavy: could not remove temp\n");
  return 0;
}
