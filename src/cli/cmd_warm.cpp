// kjit warm: compile the kernels a manifest lists into the cache, in parallel, with a
// progress bar on a terminal and plain lines otherwise.
#include <cjson/cJSON.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "cli.h"

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit warm MANIFEST.json [-j N] [-a TARGET] [--dry-run] [--no-progress]\n"
    "                 [--json] [-q] [--cache-dir DIR]\n"
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
    "                     compile nothing\n"
    "      --no-progress  plain lines even on a terminal\n"
    "      --json         print the results as JSON on stdout\n"
    "  -q, --quiet        print only failures and the summary\n"
    "      --cache-dir DIR\n"
    "                     warm the cache in DIR\n"
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
    "anywhere else makes the manifest malformed.\n"
    "\n"
    "Exit status: 0 every kernel compiled or was cached; 1 one or more kernels failed;\n"
    "2 usage; 3 the manifest cannot be read or is malformed, or the cache is unusable.\n";

// One manifest kernel, with the defaults merged in.
struct KernelSpec {
  std::string name;
  std::string source;       // inline source, or the file's contents once read
  std::string file;         // resolved path, "" for inline sources
  std::string program_name;
  std::vector<std::string> targets, options, include_paths, name_expressions, outputs;
  std::vector<std::pair<std::string, std::string>> defines;  // value "\x01" = no value
  std::vector<std::pair<std::string, std::string>> headers;
  // NUL bytes in the inline source and in headers (by name): "" or what is wrong.
  std::string source_nul;
  std::map<std::string, std::string> header_nul;
  // Why the kernel cannot be compiled ("" when it can), and the status it fails with.
  std::string problem;
  kjit_status problem_status = KJIT_OK;
};

const char kNoValue[] = "\x01";

struct Job {
  const KernelSpec* spec = nullptr;
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
};

[[noreturn]] void bad_manifest(const std::string& file, const std::string& where,
                               const std::string& what) {
  fail(kExitError, "manifest '" + file + "': " + where + ": " + what);
}

std::vector<std::string> string_list(const cJSON* v, const std::string& file,
                                     const std::string& where, const char* field) {
  std::vector<std::string> out;
  if (cJSON_IsString(v)) {
    out.emplace_back(v->valuestring);
    return out;
  }
  if (!cJSON_IsArray(v)) {
    bad_manifest(file, where, std::string("'") + field + "' must be a string or an array of strings");
  }
  const cJSON* item = nullptr;
  cJSON_ArrayForEach(item, v) {
    if (!cJSON_IsString(item)) {
      bad_manifest(file, where, std::string("'") + field + "' must hold only strings");
    }
    out.emplace_back(item->valuestring);
  }
  return out;
}

// For each string of the JSON `text`, keys included, in document order: whether it holds
// the escape \u0000. cJSON decodes it into a NUL byte, and the C string it then gives us
// ends there: the rest of the value would be lost without a word.
std::vector<bool> strings_with_nul(const std::string& text) {
  std::vector<bool> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '"') {
      ++i;
      continue;
    }
    bool nul = false;
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] != '\\' || i + 1 >= text.size()) continue;
      ++i;  // the escaped character
      if (text[i] == 'u' && text.compare(i + 1, 4, "0000") == 0) nul = true;
    }
    ++i;  // the closing quote
    out.push_back(nul);
  }
  return out;
}

// Walks the parsed manifest in document order beside strings_with_nul(). A NUL in an inline
// source or in a header's contents is collected into `found` (the kernel then fails like a
// source that is not valid UTF-8); anywhere else it cannot be passed on and the manifest is
// rejected. `in_kernel`: `node` is a field of an object in an array, that is of a kernel.
void find_nul_strings(const cJSON* node, const cJSON* parent, bool in_kernel,
                      const std::string& where, const std::vector<bool>& with_nul, size_t* next,
                      std::set<const cJSON*>* found, const std::string& file) {
  auto has_nul = [&]() { return *next < with_nul.size() && with_nul[(*next)++]; };
  if (node->string && has_nul()) {
    bad_manifest(file, where, "a name holds a NUL character (\\u0000)");
  }
  if (cJSON_IsString(node)) {
    if (!has_nul()) return;
    const bool source = in_kernel && std::strcmp(node->string ? node->string : "", "source") == 0;
    const bool header = parent && parent->string && std::strcmp(parent->string, "headers") == 0;
    if (!source && !header) {
      bad_manifest(file, where, "holds a NUL character (\\u0000), which cannot be passed on");
    }
    found->insert(node);
    return;
  }
  const bool kernel = cJSON_IsObject(node) && parent && cJSON_IsArray(parent);
  size_t index = 0;
  const cJSON* child = nullptr;
  cJSON_ArrayForEach(child, node) {
    std::string at;
    if (cJSON_IsObject(node)) {
      const std::string name = child->string ? child->string : "";
      at = where.empty() ? name : where + "." + name;
    } else {
      at = where + "[" + std::to_string(index) + "]";
    }
    find_nul_strings(child, node, kernel, at, with_nul, next, found, file);
    ++index;
  }
}

// Merges the fields of `obj` into `k`. Lists append; maps replace by name; scalars replace.
// `nul` holds the strings that have a NUL character (see find_nul_strings()).
void apply_fields(const cJSON* obj, KernelSpec& k, bool is_default, const std::string& file,
                  const std::string& where, const std::set<const cJSON*>& nul) {
  if (!cJSON_IsObject(obj)) bad_manifest(file, where, "must be a JSON object");
  const cJSON* f = nullptr;
  bool have_source = false;
  cJSON_ArrayForEach(f, obj) {
    const std::string field = f->string ? f->string : "";
    auto need_string = [&]() -> std::string {
      if (!cJSON_IsString(f)) bad_manifest(file, where, "'" + field + "' must be a string");
      return f->valuestring;
    };
    if (field == "targets" || field == "target") {
      k.targets = string_list(f, file, where, field.c_str());
      if (k.targets.empty()) bad_manifest(file, where, "'" + field + "' is empty");
    } else if (field == "options") {
      for (auto& o : string_list(f, file, where, "options")) k.options.push_back(o);
    } else if (field == "include_paths") {
      for (auto& o : string_list(f, file, where, "include_paths")) {
        k.include_paths.push_back(o);
      }
    } else if (field == "name_expressions") {
      for (auto& o : string_list(f, file, where, "name_expressions")) k.name_expressions.push_back(o);
    } else if (field == "outputs") {
      k.outputs = string_list(f, file, where, "outputs");
      for (const auto& o : k.outputs) {
        if (o != "ptx" && o != "cubin" && o != "ltoir") {
          bad_manifest(file, where, "unknown output '" + o + "' (ptx, cubin or ltoir)");
        }
      }
    } else if (field == "defines") {
      if (cJSON_IsArray(f)) {
        for (auto& d : string_list(f, file, where, "defines")) {
          const size_t eq = d.find('=');
          if (d.empty() || eq == 0) bad_manifest(file, where, "bad define '" + d + "'");
          k.defines.emplace_back(d.substr(0, eq),
                                 eq == std::string::npos ? std::string(kNoValue) : d.substr(eq + 1));
        }
      } else if (cJSON_IsObject(f)) {
        const cJSON* d = nullptr;
        cJSON_ArrayForEach(d, f) {
          std::string value;
          if (cJSON_IsString(d)) {
            value = d->valuestring;
          } else if (cJSON_IsNumber(d)) {
            char buf[64];
            if (d->valuedouble == static_cast<double>(static_cast<long long>(d->valuedouble))) {
              std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(d->valuedouble));
            } else {
              std::snprintf(buf, sizeof buf, "%.17g", d->valuedouble);
            }
            value = buf;
          } else if (cJSON_IsNull(d) || cJSON_IsTrue(d)) {
            value = kNoValue;
          } else {
            bad_manifest(file, where, std::string("define '") + d->string +
                                          "' must be a string, a number, true or null");
          }
          k.defines.emplace_back(d->string, value);
        }
      } else {
        bad_manifest(file, where, "'defines' must be an object or an array of \"NAME=VALUE\"");
      }
    } else if (field == "headers") {
      if (!cJSON_IsObject(f)) bad_manifest(file, where, "'headers' must be an object name -> contents");
      const cJSON* h = nullptr;
      cJSON_ArrayForEach(h, f) {
        if (!cJSON_IsString(h)) {
          bad_manifest(file, where, std::string("header '") + h->string + "' must be a string");
        }
        k.headers.emplace_back(h->string, h->valuestring);
        // A later header of the same name replaces an earlier one, NUL or not.
        if (nul.count(h)) {
          k.header_nul[h->string] =
              "header '" + std::string(h->string) + "' " + nul_byte_at(std::strlen(h->valuestring));
        } else {
          k.header_nul.erase(h->string);
        }
      }
    } else if (field == "name" && !is_default) {
      k.name = need_string();
    } else if (field == "program_name") {
      k.program_name = need_string();
    } else if (field == "file" && !is_default) {
      if (have_source) bad_manifest(file, where, "give either 'file' or 'source', not both");
      have_source = true;
      k.file = need_string();
      if (k.file.empty()) bad_manifest(file, where, "'file' is empty");
    } else if (field == "source" && !is_default) {
      if (have_source) bad_manifest(file, where, "give either 'file' or 'source', not both");
      have_source = true;
      k.source = need_string();
      if (nul.count(f)) k.source_nul = "inline source " + nul_byte_at(k.source.size());
    } else {
      bad_manifest(file, where, "unknown field '" + field + "'");
    }
  }
  if (!is_default && !have_source) bad_manifest(file, where, "needs 'file' or 'source'");
}

std::vector<KernelSpec> load_manifest(const std::string& path, bool targets_given) {
  std::string text, err;
  if (!read_bounded_file(path, kMaxManifestBytes, "a manifest", false, &text, &err)) {
    fail(kExitError, "cannot read manifest '" + path + "': " + err);
  }
  const std::string nul = nul_byte_problem(text);
  if (!nul.empty()) fail(kExitError, "manifest '" + path + "' " + nul + " (JSON is text)");
  JsonHolder root;
  root.p = cJSON_ParseWithLength(text.data(), text.size());
  if (!root.p) {
    const char* at = cJSON_GetErrorPtr();
    size_t line = 1;
    if (at && at >= text.data() && at <= text.data() + text.size()) {
      line += static_cast<size_t>(std::count(static_cast<const char*>(text.data()), at, '\n'));
    }
    fail(kExitError, "manifest '" + path + "': invalid JSON near line " + std::to_string(line));
  }
  std::set<const cJSON*> nul_strings;
  {
    const std::vector<bool> with_nul = strings_with_nul(text);
    size_t next = 0;
    find_nul_strings(root.p, nullptr, false, "", with_nul, &next, &nul_strings, path);
    if (next != with_nul.size() && std::count(with_nul.begin(), with_nul.end(), true) > 0) {
      // Cannot happen for JSON cJSON accepts; refuse rather than cut a string.
      bad_manifest(path, "top level", "a string holds a NUL character (\\u0000)");
    }
  }
  const cJSON* kernels = nullptr;
  KernelSpec defaults;
  if (cJSON_IsArray(root.p)) {
    kernels = root.p;
  } else if (cJSON_IsObject(root.p)) {
    const cJSON* f = nullptr;
    cJSON_ArrayForEach(f, root.p) {
      const std::string field = f->string ? f->string : "";
      if (field == "version") {
        if (!cJSON_IsNumber(f) || f->valueint != 1) {
          bad_manifest(path, "version", "only version 1 is understood");
        }
      } else if (field == "defaults") {
        apply_fields(f, defaults, true, path, "defaults", nul_strings);
      } else if (field == "kernels") {
        kernels = f;
      } else {
        bad_manifest(path, "top level", "unknown field '" + field + "'");
      }
    }
  } else {
    bad_manifest(path, "top level", "must be an object with \"kernels\" or an array of kernels");
  }
  if (!cJSON_IsArray(kernels)) bad_manifest(path, "top level", "'kernels' must be an array");
  std::vector<KernelSpec> out;
  int index = 0;
  const cJSON* k = nullptr;
  cJSON_ArrayForEach(k, kernels) {
    const std::string where = "kernels[" + std::to_string(index++) + "]";
    KernelSpec spec = defaults;
    apply_fields(k, spec, false, path, where, nul_strings);
    if (spec.name.empty()) spec.name = spec.file.empty() ? where : basename_of(spec.file);
    if (spec.targets.empty() && !targets_given) {
      bad_manifest(path, where + " (" + spec.name + ")",
                   "no target: give 'targets' here or in 'defaults', or pass --arch");
    }
    if (!spec.file.empty() && spec.program_name.empty()) spec.program_name = spec.file;
    if (!spec.source_nul.empty() || !spec.header_nul.empty()) {
      spec.problem = spec.source_nul.empty() ? spec.header_nul.begin()->second : spec.source_nul;
      spec.problem_status = KJIT_ERROR_INVALID_SOURCE;
    }
    out.push_back(std::move(spec));
  }
  if (out.empty()) bad_manifest(path, "kernels", "the list is empty");
  return out;
}

// Builds the options of one job. Returns false with `why` for an option the library refuses.
bool build_options(const Job& job, OptionsHolder& o, std::string* why) {
  const KernelSpec& k = *job.spec;
  auto ok = [&](kjit_status st, const std::string& what) {
    if (st == KJIT_OK) return true;
    *why = what + ": " + error_text(st) + " [" + status_name(st) + "]";
    return false;
  };
  if (!ok(kjit_options_create(&o.p), "cannot create options")) return false;
  if (!k.program_name.empty() &&
      !ok(kjit_options_set_name(o.p, k.program_name.c_str()), "bad program_name '" + k.program_name + "'")) {
    return false;
  }
  if (!ok(kjit_options_set_target(o.p, job.target.c_str()), "bad target '" + job.target + "'")) {
    return false;
  }
  unsigned outputs = 0;
  for (const auto& out : k.outputs) {
    outputs |= out == "ptx" ? KJIT_OUTPUT_PTX : out == "cubin" ? KJIT_OUTPUT_CUBIN : KJIT_OUTPUT_LTOIR;
  }
  if (outputs && !ok(kjit_options_set_outputs(o.p, outputs), "bad outputs")) return false;
  for (const auto& dir : k.include_paths) {
    if (!ok(kjit_options_add_include_path(o.p, dir.c_str()), "bad include path '" + dir + "'")) return false;
  }
  for (const auto& [name, value] : k.defines) {
    if (!ok(kjit_options_add_define(o.p, name.c_str(), value == kNoValue ? nullptr : value.c_str()),
            "bad define '" + name + "'")) {
      return false;
    }
  }
  for (const auto& [name, contents] : k.headers) {
    if (!ok(kjit_options_add_header(o.p, name.c_str(), contents.c_str()), "bad header '" + name + "'")) {
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
    const int filled = total_ ? static_cast<int>(static_cast<double>(bar_width) *
                                                 static_cast<double>(done) /
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
      out += "      ... (" + std::to_string(std::count(log.begin() + static_cast<std::ptrdiff_t>(start),
                                                          log.end(), '\n') + 1) +
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

}  // namespace

int cmd_warm(const std::vector<std::string>& args, Global& g) {
  const std::string cmd = "warm";
  Parsed p = parse_args(cmd, args,
                        {{"jobs", 'j', true}, {"arch", 'a', true}, {"dry-run", 0, false},
                         {"no-progress", 0, false}},
                        g);
  if (p.help) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (p.positional.size() != 1) usage_error(cmd, "expected one MANIFEST.json");
  if (!p.after_dashdash.empty()) usage_error(cmd, "unexpected arguments after '--'");
  unsigned jobs_n = std::max(1u, std::thread::hardware_concurrency());
  if (p.has("jobs")) {
    const std::string j = p.get("jobs");
    char* end = nullptr;
    const long v = std::strtol(j.c_str(), &end, 10);
    if (j.empty() || *end != '\0' || v < 1 || v > 1024) {
      usage_error(cmd, "bad -j '" + j + "' (a number from 1 to 1024)");
    }
    jobs_n = static_cast<unsigned>(v);
  }
  const std::string manifest = p.positional[0];
  if (p.has("arch") && p.get("arch").empty()) usage_error(cmd, "--arch needs a target");
  std::vector<KernelSpec> specs = load_manifest(manifest, p.has("arch"));

  std::vector<Job> jobs;
  for (const KernelSpec& s : specs) {
    std::vector<std::string> targets = s.targets;
    if (p.has("arch")) targets = {p.get("arch")};
    for (const std::string& t : targets) {
      Job j;
      j.spec = &s;
      j.target = t;
      j.label = s.name + " (" + t + ")";
      jobs.push_back(std::move(j));
    }
  }

  CacheHolder cache;
  cache.p = open_cache(g, false);
  require_disk(cache.p, cmd, !p.has("dry-run"));

  // Everything in a manifest is relative to its directory, and warm works there: source
  // files, include paths and program names are used as written, so the keys do not depend
  // on where kjit warm was started. The cache must then be named by an absolute path.
  const std::string cwd = current_directory();
  const std::string cache_dir = kjit_cache_directory(cache.p);
  if (!cache_dir.empty() && cache_dir[0] != '/') {
    kjit_cache_close(cache.p);
    cache.p = nullptr;
    g.cache_dir = join_path(cwd, cache_dir);
    cache.p = open_cache(g, false);
    require_disk(cache.p, cmd, !p.has("dry-run"));
  }
  const std::string base = join_path(cwd, dirname_of(manifest));
  if (::chdir(base.c_str()) != 0) {
    fail(kExitError, "cannot enter the manifest's directory '" + base + "': " + std::strerror(errno));
  }
  for (KernelSpec& s : specs) {
    if (s.file.empty() || !s.problem.empty()) continue;
    std::string err;
    if (!read_bounded_file(s.file, kMaxSourceBytes, "a source", false, &s.source, &err)) {
      s.problem = "cannot read '" + join_path(base, s.file) + "': " + err;
      s.problem_status = KJIT_ERROR_IO;
      continue;
    }
    // Refused like a source that is not valid UTF-8 (KJIT_ERROR_INVALID_SOURCE).
    const std::string nul = nul_byte_problem(s.source);
    if (!nul.empty()) {
      s.problem = "'" + join_path(base, s.file) + "': source " + nul;
      s.problem_status = KJIT_ERROR_INVALID_SOURCE;
    }
  }

  if (p.has("dry-run")) {
    JsonHolder arr;
    if (g.json) arr.p = cJSON_CreateArray();
    int rc = kExitOk;
    for (Job& j : jobs) {
      OptionsHolder o;
      std::string why;
      char key[65] = {0};
      kjit_status st = KJIT_OK;
      if (!j.spec->problem.empty()) {
        why = j.spec->problem;
        st = j.spec->problem_status;
      } else if (!build_options(j, o, &why)) {
        st = KJIT_ERROR_INVALID_ARGUMENT;
      } else {
        st = kjit_compute_key(j.spec->source.c_str(), o.p, key);
        if (st != KJIT_OK) why = kjit_last_error() ? kjit_last_error() : "";
      }
      bool cached = false;
      if (st == KJIT_OK) {
        BinaryHolder b;
        cached = kjit_cache_get(cache.p, key, &b.p) == KJIT_OK;
      } else {
        rc = kExitCompile;
      }
      if (arr.p) {
        cJSON* o2 = cJSON_CreateObject();
        cJSON_AddStringToObject(o2, "name", j.spec->name.c_str());
        cJSON_AddStringToObject(o2, "target", j.target.c_str());
        cJSON_AddBoolToObject(o2, "ok", st == KJIT_OK);
        cJSON_AddStringToObject(o2, "key", key);
        cJSON_AddBoolToObject(o2, "cached", cached);
        cJSON_AddStringToObject(o2, "message", why.c_str());
        cJSON_AddItemToArray(arr.p, o2);
      } else if (st == KJIT_OK) {
        std::printf("%s  %-7s %s\n", key, cached ? "cached" : "missing", j.label.c_str());
      } else {
        std::printf("%-64s  %-7s %s: %s\n", "-", "error", j.label.c_str(), why.c_str());
      }
    }
    if (arr.p) print_json(arr.p);
    return rc;
  }

  CompilerHolder compiler;
  kjit_status st = kjit_compiler_create(cache.p, jobs_n, &compiler.p);
  if (st != KJIT_OK) fail_status(st, "cannot create a compiler");

  const bool tty = isatty(STDERR_FILENO) == 1;
  const bool bar = tty && !p.has("no-progress") && !g.quiet;
  const bool lines = !bar && !g.json && !g.quiet;
  Progress progress(bar, jobs.size());

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
  constexpr double kSharedWaitMinMs = 100;
  std::deque<InFlight> running;
  size_t next = 0, done = 0;
  const double t0 = now_ms();

  auto finish = [&](Job& j) {
    j.done = true;
    ++done;
    const bool ok = j.status == KJIT_OK;
    if (!ok && (bar || g.quiet) && !g.json) {
      progress.clear();
      std::fprintf(stderr, "FAILED %s: %s\n", j.label.c_str(), j.message.c_str());
    }
    if (lines) {
      const int w = static_cast<int>(std::to_string(jobs.size()).size());
      if (ok) {
        if (j.tier == KJIT_TIER_COMPILED) {
          std::printf("[%*zu/%zu] compiled %s in %s%s\n", w, done, jobs.size(), j.label.c_str(),
                      human_ms(j.compile_ms).c_str(), waited_text(j.wait_ms).c_str());
        } else {
          std::printf("[%*zu/%zu] cached   %s, saves %s%s\n", w, done, jobs.size(), j.label.c_str(),
                      human_ms(j.compile_ms).c_str(),
                      j.wait_ms > 0 ? ("," + waited_text(j.wait_ms)).c_str() : "");
        }
      } else {
        std::printf("[%*zu/%zu] FAILED   %s: %s\n", w, done, jobs.size(), j.label.c_str(),
                    j.message.c_str());
      }
      std::fflush(stdout);
    }
  };

  std::vector<const Job*> current;
  while (done < jobs.size()) {
    // Keep at most jobs_n compiles in flight, so that the ones in flight are the ones the
    // worker pool is running (the progress bar names them).
    while (next < jobs.size() && running.size() < jobs_n) {
      Job& j = jobs[next++];
      if (!j.spec->problem.empty()) {
        j.status = j.spec->problem_status;
        j.message = j.spec->problem;
        finish(j);
        continue;
      }
      OptionsHolder o;
      std::string why;
      if (!build_options(j, o, &why)) {
        j.status = KJIT_ERROR_INVALID_OPTION;
        j.message = why;
        finish(j);
        continue;
      }
      kjit_future* f = nullptr;
      const uint64_t waits = cache_waits(cache.p);  // before the job can start waiting
      const double started = now_ms();
      st = kjit_compile_async(compiler.p, j.spec->source.c_str(), o.p, &f);
      if (st != KJIT_OK) {
        j.status = st;
        j.message = error_text(st) + " [" + status_name(st) + "]";
        finish(j);
        continue;
      }
      running.push_back({&j, f, started, waits});
    }
    if (running.size() > 1) {
      for (InFlight& r : running) r.overlapped = true;
    }
    bool progressed = false;
    for (auto it = running.begin(); it != running.end();) {
      if (kjit_future_ready(it->future) != 1) {
        ++it;
        continue;
      }
      Job& j = *it->job;
      BinaryHolder b;
      j.status = kjit_future_wait(it->future, 0, &b.p);
      j.elapsed_ms = now_ms() - it->started;
      if (j.status == KJIT_OK) {
        j.tier = kjit_binary_tier(b.p);
        j.key = kjit_binary_key(b.p);
        j.compile_ms = kjit_binary_compile_ms(b.p);
        const bool waited = cache_waits(cache.p) > it->waits;
        j.wait_ms = wait_ms_of(waited, j.tier, j.elapsed_ms, j.compile_ms);
        if (it->overlapped && j.wait_ms < kSharedWaitMinMs) j.wait_ms = 0;
        const char* log = kjit_binary_log(b.p);
        j.log = log ? log : "";
      } else {
        const std::string detail = kjit_last_error() ? kjit_last_error() : "";
        if (b.p) {
          const char* log = kjit_binary_log(b.p);
          j.log = log ? log : "";
        }
        if (j.status == KJIT_ERROR_COMPILE) {
          j.message = "compilation failed";
        } else {
          j.message = (detail.empty() ? std::string(kjit_status_string(j.status)) : detail) +
                      " [" + status_name(j.status) + "]";
        }
      }
      kjit_future_destroy(it->future);
      it = running.erase(it);
      finish(j);
      progressed = true;
    }
    current.clear();
    for (const auto& r : running) current.push_back(r.job);
    progress.draw(done, current, progressed);
    if (!progressed && !running.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  current.clear();
  progress.draw(done, current, true);
  progress.clear();
  const double total_ms = now_ms() - t0;

  size_t compiled = 0, cached = 0, failed = 0;
  for (const Job& j : jobs) {
    if (j.status != KJIT_OK) {
      ++failed;
    } else if (j.tier == KJIT_TIER_COMPILED) {
      ++compiled;
    } else {
      ++cached;
    }
  }
  const double rate = total_ms > 0 ? 1000.0 * static_cast<double>(jobs.size()) / total_ms : 0;

  if (g.json) {
    JsonHolder j;
    j.p = cJSON_CreateObject();
    cJSON_AddStringToObject(j.p, "manifest", manifest.c_str());
    cJSON_AddStringToObject(j.p, "cache", kjit_cache_directory(cache.p));
    cJSON_AddNumberToObject(j.p, "kernels", static_cast<double>(jobs.size()));
    cJSON_AddNumberToObject(j.p, "compiled", static_cast<double>(compiled));
    cJSON_AddNumberToObject(j.p, "cached", static_cast<double>(cached));
    cJSON_AddNumberToObject(j.p, "failed", static_cast<double>(failed));
    cJSON_AddNumberToObject(j.p, "elapsed_ms", total_ms);
    cJSON_AddNumberToObject(j.p, "jobs", jobs_n);
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
  } else {
    std::printf("warmed %zu kernels in %s (%.1f/s, -j %u): %zu compiled, %zu already cached, "
                "%zu failed\n",
                jobs.size(), human_ms(total_ms).c_str(), rate, jobs_n, compiled, cached, failed);
    if (failed) {
      std::printf("failures:\n");
      for (const Job& job : jobs) {
        if (job.status == KJIT_OK) continue;
        std::printf("  %s: %s\n", job.label.c_str(), job.message.c_str());
        if (!job.log.empty()) std::printf("%s", indent_log(job.log, 20).c_str());
      }
    }
  }
  return failed ? kExitCompile : kExitOk;
}

}  // namespace kjit_cli
