// kjit warm: compile the kernels a manifest lists into the cache, in parallel, with a
// progress bar on a terminal and plain lines otherwise.
#include <cjson/cJSON.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "cli.h"
#include "manifest.h"

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit warm MANIFEST.json [-j N] [-a TARGET] [--dry-run] [--no-progress]\n"
    "                 [--json] [-q] [--cache-dir DIR]\n"
    "       kjit warm --grouped G,K,N,ROWS[,b=kn|nk][,epi=PIECES][,dtype=bf16|fp8]\n"
    "                 [,scale=none|rowwise|block128][,portable] ... -a TARGET\n"
    "                 [MANIFEST.json] [-j N] [--json] [-q] [--cache-dir DIR]\n"
    "\n"
    "Compile every kernel a manifest lists, for each of its targets, into the cache, N at\n"
    "a time. On a terminal a progress bar shows the count, rate, ETA and the kernel being\n"
    "compiled; otherwise one line is printed per kernel, with NVRTC's compile time and,\n"
    "apart, the time spent waiting for another process compiling the same kernel (JSON:\n"
    "compile_ms, wait_ms and the wall time elapsed_ms). A failing kernel is reported and\n"
    "the others go on; the summary lists every failure with its log.\n"
    "\n"
    "Options:\n"
    "  -j, --jobs N       compile N kernels at once (default: number of CPU cores)\n"
    "  -a, --arch TARGET  compile every kernel for TARGET only (e.g. auto on a GPU host),\n"
    "                     instead of the targets the manifest names\n"
    "      --dry-run      print each kernel's cache key and whether it is cached, and\n"
    "                     compile nothing (a cache that does not exist is not created);\n"
    "                     the key of a kernel that reads files (#include) comes from\n"
    "                     what NVRTC read for it, which its first compile into this\n"
    "                     cache records: until then (or after one of those files\n"
    "                     changed) it is 'unknown'\n"
    "      --no-progress  plain lines even on a terminal\n"
    "      --json         print the results as JSON on stdout\n"
    "  -q, --quiet        print only failures and the summary\n"
    "      --cache-dir DIR\n"
    "                     warm the cache in DIR\n"
    "      --grouped SPEC compile the grouped-GEMM kernel (grouped_gemm.h) that a handle on\n"
    "                     a device of --arch picks for this shape, so that the service\n"
    "                     that runs it loads it from the cache (repeatable; needs --arch:\n"
    "                     sm_90a for H100/H200, sm_80, sm_89, ... for the portable kernel;\n"
    "                     no GPU needed). SPEC: groups, K, N and total rows, then optional\n"
    "                     b=kn (B is (G, K, N), the default) or b=nk (G, N, K), epi= with\n"
    "                     pieces joined by '+' (beta, bias, and one of relu, gelu, silu;\n"
    "                     alpha is always there), dtype=bf16 (the default) or dtype=fp8\n"
    "                     (e4m3 A and B, bf16 D) with scale=none, rowwise or block128\n"
    "                     (the scales of kjit_grouped_gemm_run_scaled), and 'portable'\n"
    "                     (the portable kernel).\n"
    "                     E.g. --grouped 8,4096,28672,8192,b=nk,epi=bias+silu\n"
    "                          --grouped 8,4096,28672,8192,b=nk,dtype=fp8,scale=rowwise\n"
    "\n"
    "Manifest (JSON). warm works in the manifest's directory: files and include paths\n"
    "are used as written there, and a file's program name is its path as written (the\n"
    "program name is part of the key), so keys do not depend on where warm starts.\n"
    "  {\n"
    "    \"version\": 1,\n"
    "    \"defaults\": { \"targets\": [\"sm_80\", \"sm_90\"], \"options\": [\"-std=c++17\"] },\n"
    "    \"kernels\": [\n"
    "      { \"name\": \"saxpy\", \"file\": \"kernels/saxpy.cu\" },\n"
    "      { \"name\": \"scale\", \"source\": \"template<class T> __global__ void ...\",\n"
    "        \"name_expressions\": [\"scale<float>\"], \"targets\": [\"sm_90\"] }\n"
    "    ]\n"
    "  }\n"
    "Fields of a kernel (and of \"defaults\", which every kernel extends): name, file or\n"
    "source, program_name, targets (or target), options, defines, include_paths,\n"
    "headers, name_expressions, outputs. See examples/README.md for the full format.\n"
    "The manifest and every source file it names must be regular files of at most 64 MiB\n"
    "(a source that is not fails that kernel). Sources and headers must be UTF-8 text: a\n"
    "NUL byte in one (\\u0000 in JSON) fails that kernel like invalid UTF-8; a NUL\n"
    "anywhere else makes the manifest malformed. An unknown field is an error that names\n"
    "the closest known field.\n"
    "\n"
    "Exit status: 0 every kernel compiled or was cached; 1 one or more kernels failed;\n"
    "2 usage; 3 the manifest cannot be read or is malformed, or the disk cache is\n"
    "disabled or unusable.\n";

// A grouped-GEMM configuration to warm (--grouped).
struct GroupedSpec {
  kjit_grouped_gemm_desc desc = KJIT_GROUPED_GEMM_DESC_INIT;
  kjit_grouped_gemm_options options = KJIT_GROUPED_GEMM_OPTIONS_INIT;
  int with_bias = 0;
};

struct Job {
  const KernelSpec* spec = nullptr;
  const GroupedSpec* grouped = nullptr;  // a --grouped job (spec then only names it)
  std::string target;
  std::string label;  // "name (target)"
  // Results.
  kjit_status status = KJIT_OK;
  int tier = -1;
  std::string key, message, log;
  // Wall time from start to result; NVRTC's time for the entry; time spent waiting for
  // another process's compile of the same key (see the main loop).
  double elapsed_ms = 0, compile_ms = 0, wait_ms = 0;
  bool done = false;

  // Takes the log, and for a success the tier, key and compile time, from `b` (may be NULL).
  void take_binary(const kjit_binary* b) {
    if (!b) return;
    const char* text = kjit_binary_log(b);
    log = text ? log_for_cli(text) : "";
    if (status != KJIT_OK) return;
    tier = kjit_binary_tier(b);
    key = kjit_binary_key(b);
    compile_ms = kjit_binary_compile_ms(b);
  }
};

// Builds the options of one job. Returns false with `why` for an option the library refuses.
bool build_options(const Job& job, OptionsHolder& o, std::string* why) {
  const KernelSpec& k = *job.spec;
  auto ok = [&](kjit_status st, const std::string& what) {
    if (st == KJIT_OK) return true;
    *why = what + ": " + error_text(st) + " [" + status_name(st) + "]";
    return false;
  };
  if (!ok(kjit_options_create(&o.p), "cannot create options")) return false;
  if (!k.program_name.empty() && !ok(kjit_options_set_name(o.p, k.program_name.c_str()),
                                     "bad program_name '" + k.program_name + "'")) {
    return false;
  }
  if (!ok(kjit_options_set_target(o.p, job.target.c_str()), "bad target '" + job.target + "'")) {
    return false;
  }
  unsigned outputs = 0;
  for (const auto& out : k.outputs) {
    outputs |= out == "ptx"     ? KJIT_OUTPUT_PTX
               : out == "cubin" ? KJIT_OUTPUT_CUBIN
                                : KJIT_OUTPUT_LTOIR;
  }
  if (outputs && !ok(kjit_options_set_outputs(o.p, outputs), "bad outputs")) return false;
  for (const auto& dir : k.include_paths) {
    if (!ok(kjit_options_add_include_path(o.p, dir.c_str()), "bad include path '" + dir + "'"))
      return false;
  }
  for (const auto& [name, value] : k.defines) {
    if (!ok(kjit_options_add_define(o.p, name.c_str(), value == kNoValue ? nullptr : value.c_str()),
            "bad define '" + name + "'")) {
      return false;
    }
  }
  for (const auto& [name, contents] : k.headers) {
    if (!ok(kjit_options_add_header(o.p, name.c_str(), contents.c_str()),
            "bad header '" + name + "'")) {
      return false;
    }
  }
  for (const auto& e : k.name_expressions) {
    if (!ok(kjit_options_add_name_expression(o.p, e.c_str()), "bad name expression '" + e + "'")) {
      return false;
    }
  }
  for (const auto& opt : k.options) {
    if (!ok(kjit_options_add(o.p, opt.c_str()), "bad option '" + opt + "'")) return false;
  }
  return true;
}

int terminal_width() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

std::string eta_text(double seconds) {
  if (seconds < 0 || seconds > 360000) return "--:--";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

class Progress {
 public:
  Progress(bool bar, size_t total) : bar_(bar), total_(total), start_(now_ms()) {}

  void draw(size_t done, const std::vector<const Job*>& running, bool force) {
    if (!bar_) return;
    const double t = now_ms();
    if (!force && t - last_draw_ < 100) return;
    last_draw_ = t;
    const double secs = (t - start_) / 1000.0;
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : -1;
    char head[128];
    std::snprintf(head, sizeof head, "%zu/%zu %5.1f/s ETA %s", done, total_, rate,
                  done == total_ ? "0:00" : eta_text(eta).c_str());
    std::string current;
    if (!running.empty()) {
      current = running.front()->label;
      if (running.size() > 1) current += " (+" + std::to_string(running.size() - 1) + " more)";
    }
    const int width = terminal_width();
    const int bar_width = std::max(10, std::min(30, width / 4));
    const int filled =
        total_ ? static_cast<int>(static_cast<double>(bar_width) * static_cast<double>(done) /
                                  static_cast<double>(total_))
               : bar_width;
    std::string line = "[" + std::string(static_cast<size_t>(filled), '#') +
                       std::string(static_cast<size_t>(bar_width - filled), '.') + "] " + head;
    if (!current.empty()) line += "  " + current;
    if (line.size() > static_cast<size_t>(width - 1)) line.resize(static_cast<size_t>(width - 1));
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  // Clears the bar so that a normal line can be printed.
  void clear() {
    if (bar_ && drawn_) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
      drawn_ = false;
    }
  }

 private:
  bool bar_;
  size_t total_;
  double start_;
  double last_draw_ = 0;
  bool drawn_ = false;
};

std::string indent_log(const std::string& log, size_t max_lines) {
  std::string out;
  size_t lines = 0, start = 0;
  while (start < log.size()) {
    size_t nl = log.find('\n', start);
    if (nl == std::string::npos) nl = log.size();
    if (lines == max_lines) {
      out +=
          "      ... (" +
          std::to_string(
              std::count(log.begin() + static_cast<std::ptrdiff_t>(start), log.end(), '\n') + 1) +
          " more lines; --json has the full log)\n";
      break;
    }
    const std::string text = log.substr(start, nl - start);
    out += text.find_first_not_of(" \t\r") == std::string::npos ? "\n" : "      " + text + "\n";
    ++lines;
    start = nl + 1;
  }
  return out;
}

// The command line of `kjit warm`.
struct WarmArgs {
  std::string manifest;  // "" when only --grouped jobs are given
  std::vector<std::string> grouped;
  unsigned jobs = 1;
  std::string arch;  // --arch, "" when not given
  bool dry_run = false;
  bool progress = true;  // a progress bar on a terminal (not --no-progress)
};

WarmArgs make_warm_args(const Parsed& p) {
  const std::string cmd = "warm";
  WarmArgs w;
  w.grouped = p.all("grouped");
  const size_t manifests = w.grouped.empty() ? 1 : p.positional.size();
  if (p.positional.size() != manifests || manifests > 1)
    usage_error(cmd, w.grouped.empty() ? "expected one MANIFEST.json"
                                       : "expected at most one MANIFEST.json besides --grouped");
  if (!p.after_dashdash.empty()) usage_error(cmd, "unexpected arguments after '--'");
  if (manifests) w.manifest = p.positional[0];
  w.jobs = std::max(1u, std::thread::hardware_concurrency());
  if (p.has("jobs")) {
    const std::string j = p.get("jobs");
    char* end = nullptr;
    const long v = std::strtol(j.c_str(), &end, 10);
    if (j.empty() || *end != '\0' || v < 1 || v > 1024) {
      usage_error(cmd, "bad -j '" + j + "' (a number from 1 to 1024)");
    }
    w.jobs = static_cast<unsigned>(v);
  }
  if (p.has("arch") && p.get("arch").empty()) usage_error(cmd, "--arch needs a target");
  w.arch = p.get("arch");
  if (!w.grouped.empty() && w.arch.empty())
    usage_error(cmd,
                "--grouped needs --arch, the target of the devices that will run the "
                "kernels (e.g. sm_90a for H100/H200)");
  w.dry_run = p.has("dry-run");
  if (!w.grouped.empty() && w.dry_run) usage_error(cmd, "--dry-run does not take --grouped");
  w.progress = !p.has("no-progress");
  return w;
}

// One job per kernel and target (--arch replaces the manifest's targets).
std::vector<Job> plan_jobs(const std::vector<KernelSpec>& specs, const std::string& arch) {
  std::vector<Job> jobs;
  for (const KernelSpec& s : specs) {
    const std::vector<std::string> targets =
        arch.empty() ? s.targets : std::vector<std::string>{arch};
    for (const std::string& t : targets) {
      Job j;
      j.spec = &s;
      j.target = t;
      j.label = s.name + " (" + t + ")";
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

// Everything in a manifest is relative to its directory, and warm works there: source
// files, include paths and program names are used as written, so the keys do not depend
// on where kjit warm was started. The cache is then named by an absolute path (a relative
// one is relative to where warm started). Returns the manifest's directory.
std::string enter_manifest_directory(const std::string& manifest, Global& g) {
  const std::string cwd = current_directory_or_dot();
  const std::string dir = cache_location(g);
  if (!dir.empty() && dir[0] != '/') g.cache_dir = path_in(cwd, dir);
  const std::string base = path_in(cwd, parent_dir_or_dot(manifest));
  if (::chdir(base.c_str()) != 0) {
    fail(kExitError,
         "cannot enter the manifest's directory '" + base + "': " + std::strerror(errno));
  }
  return base;
}

// Reads the source files of the kernels (in the manifest's directory). A file that cannot
// be read, or holds a NUL byte, fails its kernel only.
void read_sources(std::vector<KernelSpec>& specs, const std::string& base) {
  for (KernelSpec& s : specs) {
    if (s.file.empty() || !s.problem.empty()) continue;
    std::string err;
    if (!read_bounded_file(s.file, kMaxSourceBytes, "a source", false, &s.source, &err)) {
      s.problem = "cannot read '" + path_in(base, s.file) + "': " + err;
      s.problem_status = KJIT_ERROR_IO;
      continue;
    }
    // Refused like a source that is not valid UTF-8 (KJIT_ERROR_INVALID_SOURCE).
    const std::string nul = nul_byte_problem(s.source);
    if (!nul.empty()) {
      s.problem = "'" + path_in(base, s.file) + "': source " + nul;
      s.problem_status = KJIT_ERROR_INVALID_SOURCE;
    }
  }
}

// --dry-run: each job's key and whether `cache` holds it (a null cache, one that does not
// exist yet, holds nothing). Compiles nothing: the key of a kernel that reads files comes
// from the cache's record of its compile (kjit_compute_key_cached); without one it is
// listed as unknown.
int dry_run(const std::vector<Job>& jobs, kjit_cache* cache, const Global& g) {
  JsonHolder doc;
  cJSON* results = nullptr;
  if (g.json) {
    doc.p = new_document("kjit.warm.dry-run");
    results = cJSON_AddArrayToObject(doc.p, "results");
  }
  int rc = kExitOk;
  for (const Job& j : jobs) {
    OptionsHolder o;
    std::string why;
    char key[65] = {0};
    kjit_status st = KJIT_OK;
    bool reads_files = false;
    if (!j.spec->problem.empty()) {
      why = j.spec->problem;
      st = j.spec->problem_status;
    } else if (!build_options(j, o, &why)) {
      st = KJIT_ERROR_INVALID_ARGUMENT;
    } else {
      int known = 0;
      st = kjit_compute_key_cached(cache, j.spec->source.c_str(), o.p, key, &known);
      if (st != KJIT_OK) why = kjit_last_error() ? kjit_last_error() : "";
      reads_files = st == KJIT_OK && !known;
    }
    bool cached = false;
    if (reads_files) {
      why =
          "reads files: its key comes from what NVRTC reads, recorded by its first compile "
          "into this cache ('kjit warm' without --dry-run)";
    } else if (st == KJIT_OK && cache) {
      BinaryHolder b;
      cached = kjit_cache_get(cache, key, &b.p) == KJIT_OK;
    } else if (st != KJIT_OK) {
      rc = kExitCompile;
    }
    if (results) {
      cJSON* r = cJSON_CreateObject();
      cJSON_AddStringToObject(r, "name", j.spec->name.c_str());
      cJSON_AddStringToObject(r, "target", j.target.c_str());
      cJSON_AddBoolToObject(r, "ok", st == KJIT_OK);
      if (reads_files) {
        cJSON_AddNullToObject(r, "key");
        cJSON_AddNullToObject(r, "cached");
      } else {
        cJSON_AddStringToObject(r, "key", key);
        cJSON_AddBoolToObject(r, "cached", cached);
      }
      cJSON_AddStringToObject(r, "message", why.c_str());
      cJSON_AddItemToArray(results, r);
    } else if (reads_files) {
      std::printf("%-64s  %-7s %s: %s\n", "-", "unknown", j.label.c_str(), why.c_str());
    } else if (st == KJIT_OK) {
      std::printf("%s  %-7s %s\n", key, cached ? "cached" : "missing", j.label.c_str());
    } else {
      std::printf("%-64s  %-7s %s: %s\n", "-", "error", j.label.c_str(), why.c_str());
    }
  }
  if (doc.p) print_json(doc.p);
  return rc;
}

// Compiles the jobs, at most `jobs_n` at a time, reporting each as it finishes.
class Runner {
 public:
  Runner(std::vector<Job>& jobs, kjit_cache* cache, kjit_compiler* compiler, unsigned jobs_n,
         bool bar, bool lines, const Global& g)
      : jobs_(jobs),
        cache_(cache),
        compiler_(compiler),
        jobs_n_(jobs_n),
        bar_(bar),
        lines_(lines),
        g_(g),
        progress_(bar, jobs.size()) {}

  void run() {
    std::vector<const Job*> current;
    while (done_ < jobs_.size()) {
      start_more();
      if (running_.size() > 1) {
        for (InFlight& r : running_) r.overlapped = true;
      }
      const bool progressed = collect_finished();
      current.clear();
      for (const auto& r : running_) current.push_back(r.job);
      progress_.draw(done_, current, progressed);
      if (!progressed && !running_.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    current.clear();
    progress_.draw(done_, current, true);
    progress_.clear();
  }

 private:
  struct InFlight {
    Job* job;
    kjit_future* future;
    double started;
    uint64_t waits;           // the cache's wait count when the job started
    bool overlapped = false;  // other jobs ran while this one did
  };
  // The cache counts waits for all jobs together. A job waited if the count grew while it
  // ran, unless other jobs ran then too: one of them may have waited, and this job's own
  // wall time beyond its compile is only overhead unless it is long.
  static constexpr double kSharedWaitMinMs = 100;

  // Keeps at most jobs_n compiles in flight, so that the ones in flight are the ones the
  // worker pool is running (the progress bar names them).
  void start_more() {
    while (next_ < jobs_.size() && running_.size() < jobs_n_) {
      Job& j = jobs_[next_++];
      if (!j.spec->problem.empty()) {
        finish_failed(j, j.spec->problem_status, j.spec->problem);
        continue;
      }
      OptionsHolder o;
      std::string why;
      if (!build_options(j, o, &why)) {
        finish_failed(j, KJIT_ERROR_INVALID_OPTION, why);
        continue;
      }
      kjit_future* f = nullptr;
      const uint64_t waits = cache_waits(cache_);  // before the job can start waiting
      const double started = now_ms();
      const kjit_status st = kjit_compile_async(compiler_, j.spec->source.c_str(), o.p, &f);
      if (st != KJIT_OK) {
        finish_failed(j, st, error_text(st) + " [" + status_name(st) + "]");
        continue;
      }
      running_.push_back({&j, f, started, waits});
    }
  }

  // Takes the result of every compile that is ready. True when one was.
  bool collect_finished() {
    bool progressed = false;
    for (auto it = running_.begin(); it != running_.end();) {
      if (kjit_future_ready(it->future) != 1) {
        ++it;
        continue;
      }
      take_result(*it);
      kjit_future_destroy(it->future);
      Job& j = *it->job;
      it = running_.erase(it);
      finish(j);
      progressed = true;
    }
    return progressed;
  }

  void take_result(const InFlight& r) {
    Job& j = *r.job;
    BinaryHolder b;
    j.status = kjit_future_wait(r.future, 0, &b.p);
    j.elapsed_ms = now_ms() - r.started;
    // The library's message first, before any other call can replace it.
    const std::string detail =
        j.status != KJIT_OK && kjit_last_error() ? kjit_last_error() : std::string();
    j.take_binary(b.p);
    if (j.status == KJIT_OK) {
      const bool waited = cache_waits(cache_) > r.waits;
      j.wait_ms = wait_ms_of(waited, j.tier, j.elapsed_ms, j.compile_ms);
      if (r.overlapped && j.wait_ms < kSharedWaitMinMs) j.wait_ms = 0;
    } else if (j.status == KJIT_ERROR_COMPILE) {
      j.message = "compilation failed";
    } else {
      j.message = (detail.empty() ? std::string(kjit_status_string(j.status)) : detail) + " [" +
                  status_name(j.status) + "]";
      if (j.status == KJIT_ERROR_CUDA_UNAVAILABLE && j.target == "auto") {
        j.message +=
            " (no GPU here: pass an explicit target, e.g. --arch sm_90, or leave "
            "--arch out to compile for the manifest's targets)";
      }
    }
  }

  void finish_failed(Job& j, kjit_status st, const std::string& message) {
    j.status = st;
    j.message = message;
    finish(j);
  }

  void finish(Job& j) {
    j.done = true;
    ++done_;
    const bool ok = j.status == KJIT_OK;
    if (!ok && (bar_ || g_.quiet) && !g_.json) {
      progress_.clear();
      std::fprintf(stderr, "FAILED %s: %s\n", j.label.c_str(), j.message.c_str());
    }
    if (!lines_) return;
    const int w = static_cast<int>(std::to_string(jobs_.size()).size());
    if (!ok) {
      std::printf("[%*zu/%zu] FAILED   %s: %s\n", w, done_, jobs_.size(), j.label.c_str(),
                  j.message.c_str());
    } else if (j.tier == KJIT_TIER_COMPILED) {
      std::printf("[%*zu/%zu] compiled %s in %s%s\n", w, done_, jobs_.size(), j.label.c_str(),
                  human_ms(j.compile_ms).c_str(), waited_text(j.wait_ms).c_str());
    } else {
      std::printf("[%*zu/%zu] cached   %s, saves %s%s\n", w, done_, jobs_.size(), j.label.c_str(),
                  human_ms(j.compile_ms).c_str(),
                  j.wait_ms > 0 ? ("," + waited_text(j.wait_ms)).c_str() : "");
    }
    std::fflush(stdout);
  }

  std::vector<Job>& jobs_;
  kjit_cache* cache_;
  kjit_compiler* compiler_;
  unsigned jobs_n_;
  bool bar_, lines_;
  const Global& g_;
  Progress progress_;
  std::deque<InFlight> running_;
  size_t next_ = 0, done_ = 0;
};

struct Counts {
  size_t compiled = 0, cached = 0, failed = 0;
};

Counts count_results(const std::vector<Job>& jobs) {
  Counts c;
  for (const Job& j : jobs) {
    if (j.status != KJIT_OK) {
      ++c.failed;
    } else if (j.tier == KJIT_TIER_COMPILED) {
      ++c.compiled;
    } else {
      ++c.cached;
    }
  }
  return c;
}

void print_warm_json(const WarmArgs& w, const std::vector<Job>& jobs, kjit_cache* cache,
                     double total_ms) {
  const Counts c = count_results(jobs);
  JsonHolder j;
  j.p = new_document("kjit.warm");
  cJSON_AddStringToObject(j.p, "manifest", w.manifest.c_str());
  cJSON_AddStringToObject(j.p, "cache", kjit_cache_directory(cache));
  cJSON_AddNumberToObject(j.p, "kernels", static_cast<double>(jobs.size()));
  cJSON_AddNumberToObject(j.p, "compiled", static_cast<double>(c.compiled));
  cJSON_AddNumberToObject(j.p, "cached", static_cast<double>(c.cached));
  cJSON_AddNumberToObject(j.p, "failed", static_cast<double>(c.failed));
  cJSON_AddNumberToObject(j.p, "elapsed_ms", total_ms);
  cJSON_AddNumberToObject(j.p, "jobs", w.jobs);
  cJSON* results = cJSON_AddArrayToObject(j.p, "results");
  for (const Job& job : jobs) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", job.spec->name.c_str());
    cJSON_AddStringToObject(o, "target", job.target.c_str());
    cJSON_AddBoolToObject(o, "ok", job.status == KJIT_OK);
    cJSON_AddNumberToObject(o, "status", job.status);
    cJSON_AddStringToObject(o, "status_name", status_name(job.status).c_str());
    if (job.status == KJIT_OK) {
      cJSON_AddStringToObject(o, "tier", tier_name(job.tier));
      cJSON_AddStringToObject(o, "key", job.key.c_str());
      cJSON_AddNumberToObject(o, "compile_ms", job.compile_ms);
      cJSON_AddNumberToObject(o, "wait_ms", job.wait_ms);
    } else {
      cJSON_AddStringToObject(o, "message", job.message.c_str());
    }
    cJSON_AddNumberToObject(o, "elapsed_ms", job.elapsed_ms);
    cJSON_AddStringToObject(o, "log", job.log.c_str());
    cJSON_AddItemToArray(results, o);
  }
  print_json(j.p);
}

void print_warm_text(const WarmArgs& w, const std::vector<Job>& jobs, double total_ms) {
  const Counts c = count_results(jobs);
  const double rate = total_ms > 0 ? 1000.0 * static_cast<double>(jobs.size()) / total_ms : 0;
  std::printf(
      "warmed %zu kernels in %s (%.1f/s, -j %u): %zu compiled, %zu already cached, "
      "%zu failed\n",
      jobs.size(), human_ms(total_ms).c_str(), rate, w.jobs, c.compiled, c.cached, c.failed);
  if (!c.failed) return;
  std::printf("failures:\n");
  for (const Job& job : jobs) {
    if (job.status == KJIT_OK) continue;
    std::printf("  %s: %s\n", job.label.c_str(), job.message.c_str());
    if (!job.log.empty()) std::printf("%s", indent_log(job.log, 20).c_str());
  }
}

// --grouped SPEC: "G,K,N,ROWS[,b=kn|nk][,epi=beta+bias+silu][,dtype=bf16|fp8]
// [,scale=none|rowwise|block128][,portable]".
GroupedSpec parse_grouped(const std::string& text) {
  const std::string cmd = "warm";
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const auto bad = [&](const std::string& why) {
    usage_error(cmd, "bad --grouped '" + text + "': " + why);
  };
  if (parts.size() < 4) bad("expected G,K,N,ROWS first");
  GroupedSpec g;
  int64_t nums[4];
  const char* names[4] = {"G", "K", "N", "ROWS"};
  for (int i = 0; i < 4; ++i) {
    char* end = nullptr;
    const long long v = std::strtoll(parts[size_t(i)].c_str(), &end, 10);
    if (parts[size_t(i)].empty() || *end != '\0' || v < (i == 3 ? 0 : 1) || v > 2147483647LL)
      bad(std::string(names[i]) + " is '" + parts[size_t(i)] + "', not a number in range");
    nums[i] = v;
  }
  g.desc.groups = int32_t(nums[0]);
  g.desc.k = nums[1];
  g.desc.n = nums[2];
  g.desc.rows = nums[3];
  for (size_t i = 4; i < parts.size(); ++i) {
    const std::string& f = parts[i];
    if (f == "b=kn") {
      g.desc.b_order = KJIT_GROUPED_B_KN;
    } else if (f == "b=nk") {
      g.desc.b_order = KJIT_GROUPED_B_NK;
    } else if (f == "portable") {
      g.options.portable_only = 1;
    } else if (f == "dtype=bf16") {
      g.desc.a_type = g.desc.b_type = KJIT_GEMM_BF16;
    } else if (f == "dtype=fp8" || f == "dtype=e4m3") {
      g.desc.a_type = g.desc.b_type = KJIT_GEMM_F8_E4M3;
    } else if (f.compare(0, 6, "dtype=") == 0) {
      bad("unknown dtype '" + f.substr(6) + "' (bf16, fp8)");
    } else if (f == "scale=none") {
      g.desc.scale_mode = KJIT_GROUPED_SCALE_NONE;
    } else if (f == "scale=rowwise") {
      g.desc.scale_mode = KJIT_GROUPED_SCALE_ROWWISE;
    } else if (f == "scale=block128") {
      g.desc.scale_mode = KJIT_GROUPED_SCALE_BLOCK128;
    } else if (f.compare(0, 6, "scale=") == 0) {
      bad("unknown scale '" + f.substr(6) + "' (none, rowwise, block128)");
    } else if (f.compare(0, 4, "epi=") == 0) {
      std::string rest = f.substr(4) + "+";
      for (size_t at = 0, plus; (plus = rest.find('+', at)) != std::string::npos; at = plus + 1) {
        const std::string piece = rest.substr(at, plus - at);
        if (piece == "alpha" || piece == "none") continue;
        if (piece == "beta")
          g.desc.beta = 1.0;
        else if (piece == "bias")
          g.with_bias = 1;
        else if (piece == "relu")
          g.desc.activation = KJIT_GROUPED_ACT_RELU;
        else if (piece == "gelu")
          g.desc.activation = KJIT_GROUPED_ACT_GELU;
        else if (piece == "silu")
          g.desc.activation = KJIT_GROUPED_ACT_SILU;
        else
          bad("unknown epilogue piece '" + piece + "' (alpha, beta, bias, relu, gelu, silu)");
      }
    } else {
      bad("unknown field '" + f + "' (b=kn, b=nk, epi=..., dtype=..., scale=..., portable)");
    }
  }
  if (g.desc.scale_mode != KJIT_GROUPED_SCALE_NONE && g.desc.a_type != KJIT_GEMM_F8_E4M3)
    bad("scale= needs dtype=fp8 (scales apply to fp8 inputs only)");
  return g;
}

// Compiles the --grouped jobs, `threads` at a time; each is reported as a line when
// `lines` (after all are done, in order).
void run_grouped(std::vector<Job>& jobs, kjit_compiler* compiler, unsigned threads, bool lines) {
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      Job& j = jobs[i];
      BinaryHolder b;
      const double t0 = now_ms();
      j.status = kjit_grouped_gemm_compile(compiler, j.target.c_str(), &j.grouped->desc,
                                           &j.grouped->options, j.grouped->with_bias, &b.p);
      j.elapsed_ms = now_ms() - t0;
      if (j.status != KJIT_OK)
        j.message = std::string(kjit_last_error() ? kjit_last_error() : "") + " [" +
                    status_name(j.status) + "]";
      j.take_binary(b.p);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, std::min<unsigned>(threads, unsigned(jobs.size()))); ++t)
    pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  if (!lines) return;
  const int w = static_cast<int>(std::to_string(jobs.size()).size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    if (j.status != KJIT_OK)
      std::printf("[%*zu/%zu] FAILED   %s: %s\n", w, i + 1, jobs.size(), j.label.c_str(),
                  j.message.c_str());
    else if (j.tier == KJIT_TIER_COMPILED)
      std::printf("[%*zu/%zu] compiled %s in %s\n", w, i + 1, jobs.size(), j.label.c_str(),
                  human_ms(j.compile_ms).c_str());
    else
      std::printf("[%*zu/%zu] cached   %s, saves %s\n", w, i + 1, jobs.size(), j.label.c_str(),
                  human_ms(j.compile_ms).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int cmd_warm(const std::vector<std::string>& args, Global& g) {
  const std::string cmd = "warm";
  const Parsed p = parse_args(cmd, args,
                              {{"jobs", 'j', true},
                               {"arch", 'a', true},
                               {"dry-run", 0, false},
                               {"no-progress", 0, false},
                               {"grouped", 0, true}},
                              g);
  if (p.help) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  const WarmArgs w = make_warm_args(p);
  // Grouped jobs first parsed (usage errors before any work), named by their spec.
  std::vector<GroupedSpec> grouped;
  std::vector<KernelSpec> grouped_names(w.grouped.size());
  for (size_t i = 0; i < w.grouped.size(); ++i) {
    grouped.push_back(parse_grouped(w.grouped[i]));
    grouped_names[i].name = "grouped " + w.grouped[i];
  }
  std::vector<KernelSpec> specs;
  if (!w.manifest.empty()) specs = load_manifest(w.manifest, !w.arch.empty());
  std::vector<Job> jobs = plan_jobs(specs, w.arch);
  std::vector<Job> grouped_jobs;
  for (size_t i = 0; i < grouped.size(); ++i) {
    Job j;
    j.spec = &grouped_names[i];
    j.grouped = &grouped[i];
    j.target = w.arch;
    j.label = grouped_names[i].name + " (" + w.arch + ")";
    grouped_jobs.push_back(std::move(j));
  }
  const std::string base =
      w.manifest.empty() ? std::string() : enter_manifest_directory(w.manifest, g);
  CacheHolder cache;
  if (w.dry_run) {
    // Only reads: a cache that does not exist yet holds nothing, and is not created.
    std::string dir;
    cache.p = open_cache_if_present(g, &dir);
    if (cache.p) require_disk(cache.p, cmd, false);
  } else {
    cache.p = open_cache(g);
    require_disk(cache.p, cmd, true);
  }
  read_sources(specs, base);
  if (w.dry_run) return dry_run(jobs, cache.p, g);

  CompilerHolder compiler;
  const kjit_status st = kjit_compiler_create(cache.p, w.jobs, &compiler.p);
  if (st != KJIT_OK) fail_status(st, "cannot create a compiler");
  const bool bar = isatty(STDERR_FILENO) == 1 && w.progress && !g.quiet;
  const bool lines = !bar && !g.json && !g.quiet;
  const double t0 = now_ms();
  if (!jobs.empty()) Runner(jobs, cache.p, compiler.p, w.jobs, bar, lines, g).run();
  run_grouped(grouped_jobs, compiler.p, w.jobs, !g.json && !g.quiet);
  for (Job& j : grouped_jobs) {
    if (j.status != KJIT_OK && g.quiet && !g.json)
      std::fprintf(stderr, "FAILED %s: %s\n", j.label.c_str(), j.message.c_str());
    jobs.push_back(std::move(j));
  }
  const double total_ms = now_ms() - t0;
  if (g.json) {
    print_warm_json(w, jobs, cache.p, total_ms);
  } else {
    print_warm_text(w, jobs, total_ms);
  }
  const Counts c = count_results(jobs);
  return c.failed ? kExitCompile : kExitOk;
}

}  // namespace kjit_cli
