// Hit-path benchmark (CPU only): (1) a fresh process's cost to reach a disk hit, phase by
// phase (open the cache, create the compiler, the hit, close), with 100 and with 100,000
// entries of realistic size in the database, the two databases' children interleaved;
// also after a process that exited without closing (its write-ahead log left behind);
// (2) in-process hits: small source, 64 KB source, sources with 2 and 8 user headers from
// an -I directory, each checked to see a header edit (same size, same second) at once;
// (0) first, the cost of loading the shared library itself in a fresh process (dlopen of
// libkjit.so.0 with its dependencies, RTLD_NOW), and whether that maps libnvrtc.
// Beside (1), interleaved with it, two floors in a fresh process, nothing checked: the entry's
// payload file alone (open, read, close: the least a hit from a file can cost), and SQLite
// alone (open the index, read the entry's row: what any cache that reads SQLite before its
// first hit pays, which kjit's hit no longer does).
//
//   bench_hit [--quick] [--entries N] [--in-process]
//
// The GPU side of the first completed launch (module load, handle) is bench_launch's.
#include <dlfcn.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "kjit/kjit.h"
#include "store/disk_store.h"
#include "util/fs.h"

namespace {

using kjit_bench::kCub;
using kjit_bench::kSaxpy;
using kjit_bench::median;
using kjit_bench::now_us;

std::string g_self;

void check(kjit_status s, const char* what) {
  if (s != KJIT_OK) {
    std::fprintf(stderr, "bench_hit: %s: %s\n", what, kjit_last_error());
    std::exit(1);
  }
}

kjit_cache* open_cache(const std::string& dir) {
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* c = nullptr;
  check(kjit_cache_open(&co, &c), "kjit_cache_open");
  return c;
}

kjit_options* options_for(int which, const std::string& include_dir = "") {
  kjit_options* o = nullptr;
  check(kjit_options_create(&o), "options");
  check(kjit_options_set_target(o, "sm_90"), "target");
  if (!include_dir.empty()) check(kjit_options_add(o, ("-I" + include_dir).c_str()), "-I");
  (void)which;
  return o;
}

// Synthetic entries of a realistic size (PTX 6 KB, CUBIN 10 KB, like a small fused kernel).
void fill(const std::string& dir, int n) {
  kjit::make_directories(dir, 0700);
  kjit::IndexDb index(dir, false, true);
  kjit::DiskStore store(index);
  std::mt19937_64 rng(n);
  std::string ptx(6000, 'p'), cubin(10000, 'c');
  for (int i = 0; i < n; ++i) {
    kjit::Entry e;
    char key[65];
    std::snprintf(key, sizeof key, "%016llx%016llx%016llx%016llx",
                  static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()));
    e.key = key;
    e.target = "sm_90";
    ptx[i % ptx.size()] = char('a' + i % 26);
    e.ptx = ptx;
    e.cubin = cubin;
    e.kernels = {"k" + std::to_string(i)};
    e.options = {"-arch=sm_90"};
    e.toolchain = "bench";
    e.program_name = "fill.cu";
    e.created = e.last_used = 1700000000 + i;
    store.put(e, 0);
  }
}

// Child: loads `lib` and prints the microseconds dlopen() took and whether libnvrtc was
// mapped by it.
int load_child(const char* lib) {
  // The installed name (found through $LD_LIBRARY_PATH, as in the GPU bundle), else the
  // build tree's file.
  const bool own = std::strcmp(lib, "libkjit.so.0") == 0;
  const char* file = own && !std::getenv("LD_LIBRARY_PATH") ? KJIT_BENCH_LIBKJIT : lib;
  const double t0 = now_us();
  void* h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!h && own) h = dlopen(KJIT_BENCH_LIBKJIT, RTLD_NOW | RTLD_LOCAL);
  const double t1 = now_us();
  if (!h) {
    std::fprintf(stderr, "bench_hit: %s\n", dlerror());
    return 1;
  }
  void* nvrtc = dlopen(KJIT_BENCH_NVRTC_SONAME, RTLD_LAZY | RTLD_NOLOAD);
  std::printf("%.1f nvrtc=%d\n", t1 - t0, nvrtc ? 1 : 0);
  return 0;
}

// Page faults of this process so far (minor: pages already in memory, mapped on first touch).
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Child: a fresh process reaching one disk hit. Prints "total open=.. compiler=.. hit=..
// close=.." in microseconds (the total up to the hit, without closing); exits 2 if the compile was
// not a disk hit. With `leave`, the process exits without closing the cache (as a killed process,
// or one that never calls kjit_cache_close, does).
int child(const std::string& dir, int which, bool leave) {
  const double t0 = now_us();
  kjit_cache* cache = open_cache(dir);
  const double t1 = now_us();
  kjit_compiler* c = nullptr;
  check(kjit_compiler_create(cache, 1, &c), "compiler");
  kjit_options* o = options_for(which);
  const long faults0 = minor_faults();
  const double t2 = now_us();
  kjit_binary* b = nullptr;
  check(kjit_compile(c, which == 0 ? kSaxpy : kCub, o, &b), "compile");
  const double t3 = now_us();
  const long faults = minor_faults() - faults0;
  const int tier = kjit_binary_tier(b);
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  if (leave) {
    std::fflush(stdout);
    _exit(tier == KJIT_TIER_DISK ? 0 : 2);
  }
  kjit_cache_close(cache);
  const double t4 = now_us();
  // The total is the way to the hit; closing is shown apart.
  std::printf("%.1f open=%.1f compiler=%.1f hit=%.1f close=%.1f faults=%ld\n", t3 - t0, t1 - t0,
              t2 - t1, t3 - t2, t4 - t3, faults);
  return tier == KJIT_TIER_DISK ? 0 : 2;
}

// Child: SQLite alone, as kjit uses it (read-write, WAL, no mutexes), opening `db` and
// reading the index row of `key`. Prints "total open=.. read=.. close=.." in microseconds.
int sqlite_child(const std::string& db, const std::string& key) {
  const double t0 = now_us();
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    return 1;
  }
  sqlite3_busy_timeout(h, 30000);
  const double t1 = now_us();
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(h, "SELECT target, kernels, bytes FROM entries WHERE key = ?1", -1, &s,
                         nullptr) != SQLITE_OK) {
    return 1;
  }
  sqlite3_bind_text(s, 1, key.c_str(), -1, SQLITE_STATIC);
  int64_t bytes = 0;
  while (sqlite3_step(s) == SQLITE_ROW) bytes += sqlite3_column_int64(s, 2);
  sqlite3_finalize(s);
  const double t2 = now_us();
  sqlite3_close(h);
  const double t3 = now_us();
  std::printf("%.1f open=%.1f read=%.1f close=%.1f\n", t2 - t0, t1 - t0, t2 - t1, t3 - t2);
  return bytes > 0 ? 0 : 2;
}

// Child: the payload file alone: open, fstat, read it whole, close. Prints "total open=..
// read=.. close=.." in microseconds.
int file_child(const std::string& path) {
  const double t0 = now_us();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  const double t1 = now_us();
  struct stat st;
  if (::fstat(fd, &st) != 0) return 1;
  std::string bytes(size_t(st.st_size), '\0');
  const ssize_t n = ::read(fd, bytes.data(), bytes.size());
  const double t2 = now_us();
  ::close(fd);
  const double t3 = now_us();
  std::printf("%.1f open=%.1f read=%.1f close=%.1f\n", t2 - t0, t1 - t0, t2 - t1, t3 - t2);
  return n == st.st_size && n > 0 ? 0 : 2;
}

struct Run {
  double total = 0;
  std::map<std::string, double> phases;
};

Run spawn(const std::string& args) {
  FILE* p = popen((g_self + " " + args).c_str(), "r");
  Run r;
  char buf[512] = {};
  if (p && std::fgets(buf, sizeof buf, p)) {
    char* rest = nullptr;
    r.total = std::strtod(buf, &rest);
    char name[64];
    double v;
    int used = 0;
    while (rest && std::sscanf(rest, " %63[a-z]=%lf%n", name, &v, &used) == 2) {
      r.phases[name] = v;
      rest += used;
    }
  }
  const int st = p ? pclose(p) : -1;
  if (st != 0) {
    std::fprintf(stderr, "bench_hit: child '%s' failed (not a disk hit?)\n", args.c_str());
    std::exit(1);
  }
  return r;
}

std::string medians(const std::vector<Run>& runs) {
  std::map<std::string, std::vector<double>> all;
  for (const Run& r : runs) {
    for (const auto& [k, v] : r.phases) all[k].push_back(v);
  }
  std::string out;
  char buf[64];
  for (const char* k : {"open", "compiler", "hit", "read", "close", "faults"}) {
    if (all[k].empty()) continue;
    std::snprintf(buf, sizeof buf, "%s%s %.0f", out.empty() ? "" : ", ", k, median(all[k]));
    out += buf;
  }
  return out;
}

double total(const std::vector<Run>& runs) {
  std::vector<double> t;
  for (const Run& r : runs) t.push_back(r.total);
  return median(t);
}

void write(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::exit(1);
  std::fclose(f);
}

// Median in-process hit time over `n` calls, after one compile.
// Median time of n memory hits of `src` (through kjit_compile), or of `obj` when given
// (a source object of the same text, through kjit_compile_source).
double hit_us(kjit_compiler* c, const std::string& src, kjit_options* o, int n,
              const kjit_source* obj = nullptr) {
  auto compile = [&](kjit_binary** b) {
    return obj ? kjit_compile_source(c, obj, o, b) : kjit_compile(c, src.c_str(), o, b);
  };
  kjit_binary* b = nullptr;
  check(compile(&b), "compile");
  kjit_binary_destroy(b);
  std::vector<double> t;
  t.reserve(size_t(n));
  for (int i = 0; i < n; ++i) {
    const double t0 = now_us();
    check(compile(&b), "hit");
    t.push_back(now_us() - t0);
    if (kjit_binary_tier(b) != KJIT_TIER_MEMORY) {
      std::fprintf(stderr, "bench_hit: expected a memory hit\n");
      std::exit(1);
    }
    kjit_binary_destroy(b);
  }
  return median(t);
}

// The text's and its source object's hits in alternating rounds: {text, object} medians.
std::pair<double, double> hit_text_and_object_us(kjit_compiler* c, const std::string& src,
                                                 kjit_options* o, int n) {
  kjit_source* obj = nullptr;
  check(kjit_source_create(src.data(), src.size(), &obj), "source object");
  std::vector<double> text, object;
  for (int round = 0; round < 6; ++round) {
    text.push_back(hit_us(c, src, o, n / 6));
    object.push_back(hit_us(c, src, o, n / 6, obj));
  }
  kjit_source_destroy(obj);
  return {median(text), median(object)};
}

std::string ptx_of(kjit_compiler* c, const std::string& src, kjit_options* o) {
  kjit_binary* b = nullptr;
  check(kjit_compile(c, src.c_str(), o, &b), "compile");
  size_t n = 0;
  const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
  std::string out(static_cast<const char*>(p), n);
  kjit_binary_destroy(b);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  g_self = len > 0 ? std::string(exe, size_t(len)) : argv[0];
  if (argc >= 5 && std::strcmp(argv[1], "--child") == 0) {
    return child(argv[2], std::atoi(argv[3]), std::strcmp(argv[4], "leave") == 0);
  }
  if (argc >= 3 && std::strcmp(argv[1], "--load-child") == 0) return load_child(argv[2]);
  if (argc >= 4 && std::strcmp(argv[1], "--sqlite-child") == 0) {
    return sqlite_child(argv[2], argv[3]);
  }
  if (argc >= 3 && std::strcmp(argv[1], "--file-child") == 0) return file_child(argv[2]);
  if (argc >= 4 && std::strcmp(argv[1], "--fill") == 0) {
    fill(argv[2], std::atoi(argv[3]));
    return 0;
  }
  bool quick = false;
  bool in_process_only = false;
  int big = 100000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--in-process") == 0) in_process_only = true;
    if (std::strcmp(argv[i], "--entries") == 0 && i + 1 < argc) big = std::atoi(argv[++i]);
  }
  const char* tmp_env = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp_env && *tmp_env ? tmp_env : "/tmp") + "/kjit-bench-hit-XXXXXX";
  if (!mkdtemp(tmpl.data())) return 1;
  const std::string root = tmpl;
  const int reps = quick ? 7 : 31;

  std::printf("| measure | kernel | kjit | note |\n| --- | --- | ---: | --- |\n");

  // (0) loading the library, and NVRTC alone for scale (medians of fresh processes).
  if (!in_process_only) {
    for (const char* lib : {"libkjit.so.0", KJIT_BENCH_NVRTC_SONAME}) {
      std::vector<Run> runs;
      for (int r = 0; r < reps; ++r) runs.push_back(spawn(std::string("--load-child ") + lib));
      std::printf("| fresh process: dlopen(%s), RTLD_NOW (us) | - | %.0f | %s |\n", lib,
                  total(runs),
                  std::string(lib) == KJIT_BENCH_NVRTC_SONAME ? "for scale"
                  : runs[0].phases["nvrtc"] != 0.0            ? "maps libnvrtc"
                                                              : "libnvrtc not mapped");
    }
  }

  // (1) fresh process, disk hit.
  if (!in_process_only) {
    const int sizes[] = {100, big};
    std::string dirs[2], keys[2];
    for (int i = 0; i < 2; ++i) {
      dirs[i] = root + "/db" + std::to_string(sizes[i]);
      const double t0 = now_us();
      fill(dirs[i], sizes[i]);
      std::fprintf(stderr, "bench_hit: filled %d entries in %.1f s\n", sizes[i],
                   (now_us() - t0) / 1e6);
      kjit_cache* cache = open_cache(dirs[i]);
      kjit_compiler* c = nullptr;
      check(kjit_compiler_create(cache, 1, &c), "compiler");
      // In this process: no compile worker (which keeps the database open) for these rows.
      check(kjit_compiler_set_compile_mode(c, KJIT_COMPILE_MODE_INPROCESS), "compile mode");
      for (int which = 0; which < 2; ++which) {
        kjit_options* o = options_for(which);
        kjit_binary* b = nullptr;
        check(kjit_compile(c, which == 0 ? kSaxpy : kCub, o, &b), "warm compile");
        keys[which] = kjit_binary_key(b);
        kjit_binary_destroy(b);
        kjit_options_destroy(o);
      }
      kjit_compiler_destroy(c);
      kjit_cache_close(cache);
    }
    for (int which = 0; which < 2; ++which) {
      const char* name = which == 0 ? "saxpy" : "CUB BlockReduce";
      std::vector<Run> runs[2], left, raw, file;
      const std::string db0 = dirs[0] + "/" + kjit::IndexDb::kFileName;
      for (int r = 0; r < reps; ++r) {
        for (int i = 0; i < 2; ++i) {
          runs[i].push_back(spawn("--child " + dirs[i] + " " + std::to_string(which) + " close"));
        }
        raw.push_back(spawn("--sqlite-child " + db0 + " " + keys[which]));
        file.push_back(spawn("--file-child " + dirs[0] + "/entries/" + keys[which].substr(0, 2) +
                             "/" + keys[which]));
        // A process that leaves without closing, then a measured fresh one.
        spawn("--child " + dirs[0] + " " + std::to_string(which) + " leave");
        left.push_back(spawn("--child " + dirs[0] + " " + std::to_string(which) + " close"));
      }
      for (int i = 0; i < 2; ++i) {
        std::printf("| fresh process to a disk hit, %d entries (us) | %s | %.0f | %s |\n", sizes[i],
                    name, total(runs[i]), medians(runs[i]).c_str());
      }
      std::printf("| ratio %d / %d entries | %s | %.2fx | target <= 1.1x |\n", sizes[1], sizes[0],
                  name, total(runs[1]) / total(runs[0]));
      std::printf(
          "| fresh process, the payload file alone: open, read, close, %d entries (us) | %s | "
          "%.0f | %s; no kjit, nothing checked |\n",
          sizes[0], name, total(file), medians(file).c_str());
      std::printf(
          "| kjit - the payload file alone, %d entries (us) | %s | %.0f | target <= 250 |\n",
          sizes[0], name, total(runs[0]) - total(file));
      std::printf(
          "| fresh process, SQLite alone: open the index, read the entry's row, %d entries (us) | "
          "%s | %.0f | %s; no kjit (a hit no longer reads it) |\n",
          sizes[0], name, total(raw), medians(raw).c_str());
      std::printf("| fresh process after one that did not close (us) | %s | %.0f | %s |\n", name,
                  total(left), medians(left).c_str());
    }

    // (1b) the same while a compile worker lives: it keeps the database open, so a new
    // process is not its first connection (and a closing one not its last).
    {
      kjit_cache* cache = open_cache(dirs[0]);
      kjit_compiler* c = nullptr;
      check(kjit_compiler_create(cache, 1, &c), "compiler");
      check(kjit_compiler_set_compile_mode(c, KJIT_COMPILE_MODE_WORKER), "compile mode");
      kjit_options* o = options_for(0);
      kjit_binary* b = nullptr;
      const std::string src = std::string(kSaxpy) + "// started the worker\n";
      check(kjit_compile(c, src.c_str(), o, &b), "compile through the worker");
      kjit_binary_destroy(b);
      kjit_options_destroy(o);
      kjit_compiler_destroy(c);
      kjit_cache_close(cache);
      usleep(1500 * 1000);  // the worker opens the database within a second of its creation
      for (int which = 0; which < 2; ++which) {
        std::vector<Run> runs;
        for (int r = 0; r < reps; ++r) {
          runs.push_back(spawn("--child " + dirs[0] + " " + std::to_string(which) + " close"));
        }
        std::printf(
            "| fresh process to a disk hit, %d entries, a compile worker alive (us) | %s | "
            "%.0f | %s |\n",
            sizes[0], which == 0 ? "saxpy" : "CUB BlockReduce", total(runs), medians(runs).c_str());
      }
    }
  }

  // (2) in-process hits.
  kjit_cache* cache = open_cache(root + "/inproc");
  kjit_compiler* c = nullptr;
  check(kjit_compiler_create(cache, 1, &c), "compiler");
  const int n = quick ? 2000 : 20000;
  {
    kjit_options* o = options_for(0);
    std::printf(
        "| in-process hit, %zu B source, no includes (us) | saxpy | %.2f | target <= 1 us |\n",
        std::strlen(kSaxpy), hit_us(c, kSaxpy, o, n));
    std::string big_src = kSaxpy;
    for (int i = 0; big_src.size() < 65536 - 64; ++i) {
      big_src += "// padding line " + std::to_string(i) + " of a large generated kernel\n";
    }
    const auto [big_text, big_object] = hit_text_and_object_us(c, big_src, o, n / 5);
    std::printf(
        "| in-process hit, %zu B source, no includes (us) | saxpy + comments | %.2f | "
        "target <= 1 us |\n",
        big_src.size(), big_text);
    std::printf(
        "| the same, a source object (kjit_compile_source; rounds alternated with the "
        "row above) (us) | saxpy + comments | %.2f | target <= 1 us |\n",
        big_object);
    // Its floor through this API: the caller's bytes, whose length is not given, may have
    // changed since the last call, so every one is read: strlen alone, and memcmp against
    // a copy (what recognising the source by its bytes costs at least).
    const std::string copy = big_src;
    std::vector<double> len_us, cmp_us;
    volatile size_t sink = 0;
    for (int i = 0; i < n / 10; ++i) {
      const double t0 = now_us();
      sink = sink + std::strlen(big_src.c_str());
      const double t1 = now_us();
      sink = sink + size_t(std::memcmp(big_src.data(), copy.data(), copy.size()) == 0);
      cmp_us.push_back(now_us() - t1);
      len_us.push_back(t1 - t0);
    }
    std::printf(
        "| the same source read alone: strlen / memcmp against a copy (us) | saxpy + comments | "
        "%.2f / %.2f | floor of any per-call check of its bytes |\n",
        median(len_us), median(cmp_us));
    kjit_options_destroy(o);
  }
  const std::string inc = root + "/include";
  kjit::make_directories(inc, 0700);
  // Quoted includes of a source without a directory are looked for in the working
  // directory first. A program's working directory is seldom written to while it runs;
  // one being written to (as /tmp often is) costs one stat() per header and probe.
  const std::string work = root + "/work";
  kjit::make_directories(work, 0700);
  if (chdir(work.c_str()) != 0) return 1;
  for (int headers : {2, 8}) {
    std::string src;
    for (int h = 0; h < headers; ++h) {
      const std::string name = "h" + std::to_string(headers) + "_" + std::to_string(h) + ".h";
      write(inc + "/" + name,
            "#pragma once\n#define V" + std::to_string(h) + " " + std::to_string(h) + "\n");
      src += "#include \"" + name + "\"\n";
    }
    src += kSaxpy;
    // Headers last changed before the racy window (kRacySeconds), as most are.
    sleep(3);
    kjit_options* o = options_for(0, inc);
    const auto [us, object_us] = hit_text_and_object_us(c, src, o, n);
    std::printf(
        "| in-process hit, %d user headers via -I (us) | saxpy | %.2f | target <= %.1f us |\n",
        headers, us, 1.0 + 0.5 * headers);
    std::printf(
        "| the same, a source object (rounds alternated with the row above) (us) | saxpy | "
        "%.2f | target <= %.1f us |\n",
        object_us, 1.0 + 0.5 * headers);
    // The stat() calls such a hit makes (the working directory, whose listing vouches for
    // the headers' absence there, and each header in the -I directory), alone.
    {
      std::vector<std::string> paths = {"."};
      for (int h = 0; h < headers; ++h) {
        paths.push_back(inc + "/h" + std::to_string(headers) + "_" + std::to_string(h) + ".h");
      }
      std::vector<double> t;
      struct stat st;
      for (int i = 0; i < n; ++i) {
        const double t0 = now_us();
        for (const std::string& p : paths) {
          if (stat(p.c_str(), &st) != 0) return 1;
        }
        t.push_back(now_us() - t0);
      }
      std::printf(
          "| the same hit's %zu stat() calls alone (us) | saxpy | %.2f | floor while every "
          "header is checked on every hit |\n",
          paths.size(), median(t));
    }
    // An edit of the same size within the same second is seen at once.
    const std::string first = inc + "/h" + std::to_string(headers) + "_0.h";
    const std::string before = ptx_of(c, src, o);
    write(first, "#pragma once\n__device__ int edited_" + std::to_string(headers) + " = 7;\n");
    const std::string after = ptx_of(c, src, o);
    write(first, "#pragma once\n__device__ int edited_" + std::to_string(headers) + " = 8;\n");
    const std::string again = ptx_of(c, src, o);
    if (before == after || after == again) {
      std::fprintf(stderr, "bench_hit: a header edit was not seen\n");
      return 1;
    }
    kjit_options_destroy(o);
  }
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
  std::system(("rm -rf '" + root + "'").c_str());
  return 0;
}
