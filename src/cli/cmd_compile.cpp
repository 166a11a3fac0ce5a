// kjit compile: compile one CUDA C++ file through the cache and write PTX, CUBIN or LTO-IR.
#include <cjson/cJSON.h>

#include <cstdio>
#include <cstring>

#include "cli.h"

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit compile FILE.cu [--arch sm_XY|compute_XY|auto] [--ptx|--cubin|--ltoir]\n"
    "                    [-o OUT] [-I DIR]... [-D NAME[=VALUE]]... [-n EXPR]...\n"
    "                    [--program-name NAME]\n"
    "                    [--json] [-q] [--cache-dir DIR] [NVRTC-OPTION...]\n"
    "                    [-- NVRTC-OPTION...]\n"
    "\n"
    "Compile FILE.cu with NVRTC through the kjit cache, like 'nvcc -cubin' but a second\n"
    "compile of the same input (source, reachable headers, options, target, NVRTC build)\n"
    "is a cache hit. FILE '-' reads the source from standard input.\n"
    "\n"
    "FILE must be a regular file of at most 64 MiB (standard input is read up to 64 MiB);\n"
    "a directory, device or FIFO is refused (status 3) without reading it. The source\n"
    "must be UTF-8 text: a byte that is not valid UTF-8, or a NUL byte, fails the compile\n"
    "(status 1) with its byte offset.\n"
    "\n"
    "A result the cache does not keep (a full disk, a read-only or disabled cache, a\n"
    "file NVRTC read that the key cannot vouch for) is said on stderr as 'compiled, not\n"
    "cached: REASON'; the output is written and the status is 0 all the same.\n"
    "\n"
    "The status line on stderr gives NVRTC's compile time and, apart, the time spent\n"
    "waiting for another process that was compiling the same input: 'compiled in 1.2 s\n"
    "after waiting 30.7 s for another process'. With --arch auto, the time spent finding\n"
    "device 0's target is given apart too: the first time, the CUDA driver is asked (its\n"
    "initialisation, tens of ms); later processes read the cache's record of the answer\n"
    "while the machine's driver, GPUs and CUDA_VISIBLE_DEVICES are unchanged.\n"
    "\n"
    "Options:\n"
    "  -a, --arch TARGET          sm_90, sm_90a, compute_90, ... or auto (the exact\n"
    "                             architecture of device 0; needs a GPU). Default auto.\n"
    "      --ptx | --cubin | --ltoir\n"
    "                             what to write (default: from OUT's extension, .ptx,\n"
    "                             .cubin, .ltoir or .lto; else cubin for sm_ targets, ptx\n"
    "                             for compute_ targets; an extension that contradicts\n"
    "                             the option is refused). The cached entry holds PTX\n"
    "                             and CUBIN as a program using the default outputs\n"
    "                             would; --ltoir compiles to LTO-IR (-dlto) instead.\n"
    "  -o, --output OUT           output file ('-' = stdout). Default: FILE's base name\n"
    "                             with .cubin, .ptx or .ltoir, in the current directory.\n"
    "                             OUT is replaced whole: written to a temporary file in\n"
    "                             its directory (which must be writable), synced, then\n"
    "                             renamed over OUT, so OUT never holds part of an output.\n"
    "                             A device such as /dev/null is written as it is.\n"
    "  -I, --include-path DIR     add an include directory (its headers are hashed)\n"
    "  -D, --define NAME[=VALUE]  define a macro\n"
    "      --toolkit DIR          find <cuda_fp16.h>, <cub/...> ... in the CUDA toolkit at\n"
    "                             DIR (default: KJIT_CUDA_HOME, CUDA_PATH, CUDA_HOME, else\n"
    "                             the toolkit of the libnvrtc in use; see kjit info)\n"
    "      --no-toolkit           do not add the toolkit's include directories\n"
    "      --no-pch               no precompiled headers (also KJIT_PCH=0)\n"
    "      --no-builtin-std       no built-in standard headers (<cstdint>, <cmath> ...,\n"
    "                             listed by kjit info): only the include paths' files\n"
    "  -n, --name-expression EXPR add a name expression, e.g. 'scale<float>'; its\n"
    "                             lowered name is printed\n"
    "      --program-name NAME    program name NVRTC sees (__FILE__, messages; its\n"
    "                             directory is searched for #include \"...\"). Default:\n"
    "                             FILE as given. It is part of the cache key: to warm\n"
    "                             a program's entries, pass the name it uses.\n"
    "      --json                 print the result as JSON on stdout (needs -o FILE when\n"
    "                             writing the output, not '-'): elapsed_ms is the wall\n"
    "                             time, compile_ms NVRTC's time for the entry (on a hit:\n"
    "                             when it was first compiled), wait_ms the time spent\n"
    "                             waiting for another process compiling the same input,\n"
    "                             device_ms the time --arch auto spent finding device\n"
    "                             0's target (0 for an explicit one), device_from_record\n"
    "                             whether the cache's record of it answered rather than\n"
    "                             the CUDA driver, stored whether the cache keeps the\n"
    "                             result, not_stored why not (null when it does)\n"
    "  -q, --quiet                print nothing on success\n"
    "      --cache-dir DIR        use the cache in DIR\n"
    "  NVRTC-OPTION               NVRTC's options are taken in place, in either spelling:\n"
    "                             -std=c++17, --use_fast_math, -default-device, -lineinfo,\n"
    "                             -G, -rdc (=true), -dopt (=on), -maxrregcount=64 or\n"
    "                             -maxrregcount 64, -Xptxas -v, -U NAME, -include FILE,\n"
    "                             -ftz=true, -w, -time=FILE... nvcc's -arch sm_90,\n"
    "                             -arch=sm_90, -ptx, -cubin, -dlto and -o are kjit's;\n"
    "                             -arch native is --arch auto. nvcc's options for host\n"
    "                             code (-O3, -Xcompiler X, -ccbin X, -c, -g, -m64, -x cu,\n"
    "                             --extended-lambda) are ignored with a warning that\n"
    "                             says why; --expt-relaxed-constexpr is taken as\n"
    "                             -default-device; -gencode, -code and -arch all are\n"
    "                             refused (one target a call: --arch sm_XY).\n"
    "                             A result with no kernel entry point (a template without\n"
    "                             -n) is warned about on stderr.\n"
    "  -- OPTION...               pass the remaining arguments to NVRTC as they are,\n"
    "                             unchecked (but -o OUT, which is kjit's), e.g.\n"
    "                             -- -std=c++17 --use_fast_math -maxrregcount=64\n"
    "\n"
    "Exit status: 0 ok; 1 compile error (NVRTC log printed on stderr) or FILE not UTF-8\n"
    "text; 2 usage, unknown NVRTC option or unsupported target; 3 other error (unreadable\n"
    "FILE, unwritable OUT, no GPU for --arch auto, the compiler crashed on FILE, ...).\n";

// What to compile and where the output goes, from the command line.
struct Request {
  std::string file;    // FILE as given, "-" for standard input
  std::string arch;    // --arch as given ("auto" included)
  std::string target;  // the target compiled for: --arch, or device 0's for auto
  int kind = KJIT_OUTPUT_CUBIN;
  const char* ext = ".cubin";
  std::string out_path;
};

// The result of a compile that succeeded, for the report.
struct Result {
  size_t size = 0;  // bytes written
  int tier = KJIT_TIER_COMPILED;
  double elapsed_ms = 0;            // wall time of the call
  double compile_ms = 0;            // NVRTC's time for this entry (on a hit: when first compiled)
  double wait_ms = 0;               // waiting for another process's compile of the same key
  double device_ms = 0;             // --arch auto: finding device 0's target
  bool device_from_record = false;  // --arch auto: the cache's record answered, not the driver
};

Parsed parse_known_args(const std::vector<std::string>& args, Global& g);

Parsed parse_compile_args(const std::vector<std::string>& args, Global& g) {
  try {
    return parse_known_args(args, g);
  } catch (Failure& f) {
    const size_t at = f.message.rfind(" (see 'kjit compile --help')");
    if (f.message.rfind("unknown option", 0) == 0 && at != std::string::npos) {
      f.message.insert(at,
                       "; NVRTC's options are taken as they are (see --help), and every"
                       " argument after '--' goes to NVRTC unchecked");
    }
    throw;
  }
}

Parsed parse_known_args(const std::vector<std::string>& args, Global& g) {
  return parse_args("compile", args,
                    {{"arch", 'a', true},
                     {"ptx", 0, false},
                     {"cubin", 0, false},
                     {"ltoir", 0, false},
                     {"output", 'o', true, Arg::kPath},
                     {"include-path", 'I', true, Arg::kPath},
                     {"define", 'D', true},
                     {"name-expression", 'n', true},
                     {"program-name", 0, true},
                     {"toolkit", 0, true, Arg::kPath},
                     {"no-toolkit", 0, false},
                     {"no-pch", 0, false},
                     {"no-builtin-std", 0, false}},
                    g);
}

// The output kind an output file's extension names (.ptx, .cubin, .ltoir or .lto), or 0.
int kind_of_extension(const std::string& path) {
  const std::string base = basename_of(path);
  const size_t dot = base.rfind('.');
  if (dot == std::string::npos || dot == 0) return 0;
  const std::string ext = base.substr(dot);
  if (ext == ".ptx") return KJIT_OUTPUT_PTX;
  if (ext == ".cubin") return KJIT_OUTPUT_CUBIN;
  if (ext == ".ltoir" || ext == ".lto") return KJIT_OUTPUT_LTOIR;
  return 0;
}

const char* kind_name(int kind) {
  return kind == KJIT_OUTPUT_PTX ? "PTX" : kind == KJIT_OUTPUT_CUBIN ? "CUBIN" : "LTO-IR";
}

const char* kind_option(int kind) {
  return kind == KJIT_OUTPUT_PTX ? "--ptx" : kind == KJIT_OUTPUT_CUBIN ? "--cubin" : "--ltoir";
}

Request make_request(const Parsed& p, const Global& g) {
  const std::string cmd = "compile";
  if (p.positional.empty()) usage_error(cmd, "missing FILE.cu");
  if (p.positional.size() > 1) usage_error(cmd, "more than one input file given");
  Request r;
  r.file = p.positional[0];
  const int kinds = (p.has("ptx") ? 1 : 0) + (p.has("cubin") ? 1 : 0) + (p.has("ltoir") ? 1 : 0);
  if (kinds > 1) usage_error(cmd, "--ptx, --cubin and --ltoir are exclusive");
  r.arch = p.get("arch", "auto");
  if (r.arch.empty()) usage_error(cmd, "--arch needs a target such as sm_90");
  const bool compute_target = r.arch.rfind("compute_", 0) == 0;
  const int asked = p.has("ptx")     ? KJIT_OUTPUT_PTX
                    : p.has("cubin") ? KJIT_OUTPUT_CUBIN
                    : p.has("ltoir") ? KJIT_OUTPUT_LTOIR
                                     : 0;
  const int named = kind_of_extension(p.get("output"));
  if (asked && named && asked != named) {
    usage_error(cmd, "-o '" + p.get("output") + "' names " + kind_name(named) + " output, but " +
                         kind_option(asked) + " asks for " + kind_name(asked));
  }
  r.kind = asked ? asked : named ? named : compute_target ? KJIT_OUTPUT_PTX : KJIT_OUTPUT_CUBIN;
  if (r.kind == KJIT_OUTPUT_CUBIN && compute_target) {
    usage_error(cmd, "CUBIN output (--cubin, or -o FILE.cubin) needs an sm_ target, not " + r.arch);
  }
  r.ext = r.kind == KJIT_OUTPUT_PTX ? ".ptx" : r.kind == KJIT_OUTPUT_CUBIN ? ".cubin" : ".ltoir";
  r.out_path = p.get("output");
  if (r.out_path.empty()) {
    std::string base = r.file == "-" ? std::string("stdin.cu") : basename_of(r.file);
    const size_t dot = base.rfind('.');
    if (dot != std::string::npos && dot > 0) base.resize(dot);
    r.out_path = base + r.ext;
  }
  if (g.json && r.out_path == "-") usage_error(cmd, "--json cannot be combined with -o -");
  if (p.has("toolkit") && p.has("no-toolkit")) {
    usage_error(cmd, "--toolkit and --no-toolkit contradict each other");
  }
  return r;
}

// A compile that fails, or a source refused before compiling: the message on stderr (and
// the JSON document on stdout), exit status by the library status.
[[noreturn]] void report_failure(const Global& g, const Request& r, kjit_status st,
                                 const std::string& detail, const std::string& log) {
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.compile");
    cJSON_AddStringToObject(j.p, "file", r.file.c_str());
    cJSON_AddStringToObject(j.p, "target", r.arch.c_str());
    cJSON_AddBoolToObject(j.p, "ok", 0);
    cJSON_AddNumberToObject(j.p, "status", st);
    cJSON_AddStringToObject(j.p, "status_name", status_name(st).c_str());
    cJSON_AddStringToObject(j.p, "message", detail.c_str());
    cJSON_AddStringToObject(j.p, "log", log.c_str());
    print_json(j.p);
  }
  std::string msg = "'" + r.file + "' (" + r.arch + "): ";
  if (st == KJIT_ERROR_COMPILE) {
    msg += "compilation failed";
  } else {
    msg += (detail.empty() ? std::string(kjit_status_string(st)) : detail) + " [" +
           status_name(st) + "]";
  }
  if (!log.empty()) {
    msg += "\n" + log;
    if (msg.back() == '\n') msg.pop_back();
  } else if (st == KJIT_ERROR_CUDA_UNAVAILABLE && r.arch == "auto") {
    msg += "\n(no GPU here: pass an explicit target, e.g. --arch sm_90)";
  }
  fail(exit_code_for_compile_status(st), msg);
}

// The options of the command line as a kjit_options. An argument the library refuses is a
// usage error.
void build_compile_options(const Parsed& p, const Request& r, const CompileArgs& ca,
                           kjit_options* opts) {
  const std::string cmd = "compile";
  auto check = [&](kjit_status s, const std::string& what) {
    if (s == KJIT_OK) return;
    if (s == KJIT_ERROR_INVALID_ARGUMENT) {
      std::string m = what;
      const char* d = kjit_last_error();
      if (d && *d) m += ": " + std::string(d);
      usage_error(cmd, m);
    }
    fail_status(s, what);
  };
  const std::string program = p.has("program-name") ? p.get("program-name")
                              : r.file == "-"       ? std::string("stdin.cu")
                                                    : r.file;
  check(kjit_options_set_name(opts, program.c_str()), "bad program name '" + program + "'");
  check(kjit_options_set_target(opts, r.target.c_str()), "bad target '" + r.target + "'");
  if (r.kind == KJIT_OUTPUT_LTOIR) {
    check(kjit_options_set_outputs(opts, KJIT_OUTPUT_LTOIR), "cannot ask for LTO-IR");
  }
  if (p.has("toolkit"))
    check(kjit_options_set_toolkit(opts, p.get("toolkit").c_str()), "bad toolkit");
  if (p.has("no-toolkit")) check(kjit_options_set_toolkit(opts, ""), "bad toolkit");
  if (p.has("no-pch")) check(kjit_options_set_pch(opts, 0), "cannot turn PCH off");
  if (p.has("no-builtin-std")) {
    check(kjit_options_add(opts, "--no-builtin-std"), "cannot turn the built-in headers off");
  }
  for (const std::string& dir : p.all("include-path")) {
    check(kjit_options_add_include_path(opts, dir.c_str()), "bad include path '" + dir + "'");
  }
  for (const std::string& d : p.all("define")) {
    const size_t eq = d.find('=');
    const std::string name = d.substr(0, eq);
    if (name.empty()) usage_error(cmd, "bad -D '" + d + "': empty macro name");
    const std::string value = eq == std::string::npos ? std::string() : d.substr(eq + 1);
    check(kjit_options_add_define(opts, name.c_str(),
                                  eq == std::string::npos ? nullptr : value.c_str()),
          "bad -D '" + d + "'");
  }
  for (const std::string& e : p.all("name-expression")) {
    check(kjit_options_add_name_expression(opts, e.c_str()), "bad name expression '" + e + "'");
  }
  for (const auto* list : {&ca.nvrtc, &ca.passed}) {
    for (const std::string& o : *list) {
      check(kjit_options_add(opts, o.c_str()), "bad NVRTC option '" + o + "'");
    }
  }
}

void print_result_json(const Request& r, const Result& res, kjit_binary* bin) {
  JsonHolder j;
  j.p = new_document("kjit.compile");
  cJSON_AddStringToObject(j.p, "file", r.file.c_str());
  cJSON_AddBoolToObject(j.p, "ok", 1);
  cJSON_AddStringToObject(j.p, "output", r.out_path.c_str());
  cJSON_AddStringToObject(j.p, "kind", r.ext + 1);
  cJSON_AddNumberToObject(j.p, "bytes", static_cast<double>(res.size));
  cJSON_AddStringToObject(j.p, "key", kjit_binary_key(bin));
  cJSON_AddStringToObject(j.p, "tier", tier_name(res.tier));
  cJSON_AddBoolToObject(j.p, "hit", res.tier != KJIT_TIER_COMPILED);
  const char* why = nullptr;
  cJSON_AddBoolToObject(j.p, "stored", kjit_binary_stored(bin, &why) != 0);
  if (why) {
    cJSON_AddStringToObject(j.p, "not_stored", why);
  } else {
    cJSON_AddNullToObject(j.p, "not_stored");
  }
  cJSON_AddNumberToObject(j.p, "elapsed_ms", res.elapsed_ms);
  cJSON_AddNumberToObject(j.p, "wait_ms", res.wait_ms);
  cJSON_AddNumberToObject(j.p, "device_ms", res.device_ms);
  cJSON_AddBoolToObject(j.p, "device_from_record", res.device_from_record);
  add_binary_json(j.p, bin, false);  // target, compile_ms, sizes, kernels, names, log
  print_json(j.p);
}

// " (+ 32 ms to ask the CUDA driver for device 0's target)" for --arch auto, else "".
std::string device_text(const Request& r, const Result& res) {
  if (r.arch != "auto") return "";
  if (res.device_from_record) {
    return " (+ " + human_ms(res.device_ms) + " for device 0's target, from the cache's record)";
  }
  return " (+ " + human_ms(res.device_ms) + " to ask the CUDA driver for device 0's target)";
}

// One line for ptxas's performance advisories (wgmma serialised, and the like), which the
// log above may bury among warnings; on a hit too (they are the stored compile's).
void print_advisories(kjit_binary* bin) {
  const size_t n = kjit_binary_advisory_count(bin);
  if (n == 0) return;
  const std::string more =
      n == 1 ? std::string() : " (and " + std::to_string(n - 1) + " more in the log)";
  std::fprintf(stderr, "  performance: %zu ptxas advisor%s: %s%s\n", n, n == 1 ? "y" : "ies",
               kjit_binary_advisory(bin, 0), more.c_str());
}

// The status line (and the log, and the lowered names) on stderr, so that `-o -` keeps
// stdout for the binary.
void print_result_text(const Request& r, const Result& res, kjit_binary* bin) {
  const std::string log = log_for_cli(kjit_binary_log(bin));
  if (!log.empty()) std::fprintf(stderr, "%s%s", log.c_str(), log.back() == '\n' ? "" : "\n");
  const std::string key = kjit_binary_key(bin);
  const char* target = kjit_binary_target(bin);
  const std::string size = human_bytes(res.size);
  if (res.tier == KJIT_TIER_COMPILED) {
    std::fprintf(stderr, "%s -> %s (%s, %s): cache miss, compiled in %s%s%s [key %.16s]\n",
                 r.file.c_str(), r.out_path.c_str(), target, size.c_str(),
                 human_ms(res.compile_ms).c_str(), waited_text(res.wait_ms).c_str(),
                 device_text(r, res).c_str(), key.c_str());
  } else if (res.wait_ms > 0) {
    std::fprintf(stderr,
                 "%s -> %s (%s, %s): cache hit (%s)%s to compile it, compile took %s [key %.16s]\n",
                 r.file.c_str(), r.out_path.c_str(), target, size.c_str(), tier_name(res.tier),
                 waited_text(res.wait_ms).c_str(), human_ms(res.compile_ms).c_str(), key.c_str());
  } else {
    std::fprintf(stderr, "%s -> %s (%s, %s): cache hit (%s) in %s%s, compile took %s [key %.16s]\n",
                 r.file.c_str(), r.out_path.c_str(), target, size.c_str(), tier_name(res.tier),
                 human_ms(res.elapsed_ms).c_str(), device_text(r, res).c_str(),
                 human_ms(res.compile_ms).c_str(), key.c_str());
  }
  for (size_t i = 0; i < kjit_binary_name_count(bin); ++i) {
    const char* lowered = kjit_binary_lowered_name_at(bin, i);
    std::fprintf(stderr, "  %s -> %s\n", kjit_binary_name_expression(bin, i),
                 lowered ? lowered : "(none)");
  }
  // A result the cache did not keep: the next compile of it compiles again.
  const char* why = nullptr;
  if (kjit_binary_stored(bin, &why) == 0 && why) {
    std::fprintf(stderr, "kjit compile: compiled, not cached: %s\n", why);
  }
  print_advisories(bin);
}

// A result without any kernel entry point: most often a __global__ template compiled
// without a name expression. Relocatable code and LTO-IR, meant for linking, are quiet.
void warn_if_no_kernel(const Request& r, const CompileArgs& ca, kjit_binary* bin) {
  if (r.kind == KJIT_OUTPUT_LTOIR || kjit_binary_name_count(bin) > 0) return;
  for (const auto* list : {&ca.nvrtc, &ca.passed}) {
    for (const std::string& o : *list) {
      if (o == "-dc" || o == "--device-c" || o == "-rdc=true" ||
          o == "--relocatable-device-code=true" || o == "-ewp" ||
          o == "--extensible-whole-program") {
        return;
      }
    }
  }
  const char* meta_text = kjit_binary_metadata_json(bin);
  JsonHolder meta;
  meta.p = meta_text ? cJSON_Parse(meta_text) : nullptr;
  const cJSON* kernels = meta.p ? cJSON_GetObjectItemCaseSensitive(meta.p, "kernels") : nullptr;
  if (!cJSON_IsArray(kernels) || cJSON_GetArraySize(kernels) > 0) return;
  std::fprintf(stderr,
               "kjit compile: warning: '%s' (%s) holds no kernel entry point: a __global__ "
               "template is compiled only where it is instantiated; name the instantiation, "
               "e.g. -n 'kernel<float>'\n",
               r.out_path.c_str(), kjit_binary_target(bin));
}

}  // namespace

int cmd_compile(const std::vector<std::string>& args, Global& g) {
  const CompileArgs ca = split_compile_args(args);
  const Parsed p = parse_compile_args(ca.kjit, g);
  if (p.help) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  Request r = make_request(p, g);
  if (!g.quiet) {
    for (const std::string& n : ca.notes) std::fprintf(stderr, "kjit compile: %s\n", n.c_str());
  }
  std::string source, err;
  if (!read_bounded_file(r.file, kMaxSourceBytes, "a source", true, &source, &err)) {
    const std::string what = r.file == "-" ? "standard input" : "'" + r.file + "'";
    fail(kExitError, "cannot read " + what + ": " + err);
  }
  Result res;
  r.target = r.arch;  // "auto" until device 0's target is known
  OptionsHolder opts;
  kjit_status st = kjit_options_create(&opts.p);
  if (st != KJIT_OK) fail_status(st, "cannot create options");
  build_compile_options(p, r, ca, opts.p);
  // NVRTC takes the source as a C string, which a NUL byte would end: refused like invalid
  // UTF-8, which the library reports as KJIT_ERROR_INVALID_SOURCE.
  const std::string nul = nul_byte_problem(source);
  if (!nul.empty()) report_failure(g, r, KJIT_ERROR_INVALID_SOURCE, "source " + nul, "");

  CacheHolder cache;
  cache.p = open_cache(g);
  // --arch auto: device 0's target, found here so that its cost (the CUDA driver's
  // initialisation, unless the cache's record for this machine answers) is reported apart
  // from the compile or the hit.
  if (r.arch == "auto") {
    char arch[64] = {0};
    int from_record = 0;
    const double t = now_ms();
    const kjit_status ds = kjit_device_arch_cached(cache.p, 0, arch, sizeof arch, &from_record);
    res.device_ms = now_ms() - t;
    res.device_from_record = from_record != 0;
    if (ds != KJIT_OK) {
      const std::string detail = kjit_last_error() ? kjit_last_error() : "";
      report_failure(g, r, ds, detail, "");
    }
    r.target = arch;
    st = kjit_options_set_target(opts.p, arch);
    if (st != KJIT_OK) fail_status(st, "cannot set the target '" + r.target + "'");
  }
  CompilerHolder compiler;
  st = kjit_compiler_create(cache.p, 1, &compiler.p);
  if (st != KJIT_OK) fail_status(st, "cannot create a compiler");

  // The wall time of the call may include waiting for another process that compiles the
  // same key; the cache counts such waits, so the wait is reported apart from the compile.
  const uint64_t waits_before = cache_waits(cache.p);
  BinaryHolder bin;
  const double t0 = now_ms();
  st = kjit_compile(compiler.p, source.c_str(), opts.p, &bin.p);
  res.elapsed_ms = now_ms() - t0;
  if (st != KJIT_OK) {
    // The library's message first, before another call can replace it.
    const std::string detail = kjit_last_error() ? kjit_last_error() : "";
    report_failure(g, r, st, detail, bin.p ? log_for_cli(kjit_binary_log(bin.p)) : "");
  }
  const bool waited = cache_waits(cache.p) > waits_before;
  const void* data = kjit_binary_data(bin.p, r.kind, &res.size);
  if (!data) {
    fail(kExitError, std::string("'") + r.file + "': the compile produced no " + (r.ext + 1) +
                         " output for " + kjit_binary_target(bin.p));
  }
  if (!write_file(r.out_path, data, res.size, &err)) {
    fail(kExitError, "cannot write '" + r.out_path + "': " + err);
  }
  if (!g.quiet) warn_if_no_kernel(r, ca, bin.p);
  res.tier = kjit_binary_tier(bin.p);
  res.compile_ms = kjit_binary_compile_ms(bin.p);
  res.wait_ms = wait_ms_of(waited, res.tier, res.elapsed_ms, res.compile_ms);
  if (g.json) {
    print_result_json(r, res, bin.p);
  } else if (!g.quiet) {
    print_result_text(r, res, bin.p);
  }
  return kExitOk;
}

}  // namespace kjit_cli
