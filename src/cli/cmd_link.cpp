// kjit link: link device code (LTO-IR, PTX, CUBIN, fatbinaries, objects, static libraries,
// and CUDA sources compiled on the way) with nvJitLink through the cache.
#include <cjson/cJSON.h>

#include <cstdio>
#include <cstring>

#include "cli.h"

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit link INPUT... [--arch sm_XY|auto] [--lto] [-O N] [--maxrregcount N]\n"
    "                 [--ptx] [-o OUT] [--json] [-q] [--cache-dir DIR]\n"
    "                 [-- NVJITLINK-OPTION...]\n"
    "\n"
    "Link separately compiled device code into one CUBIN with nvJitLink, through the kjit\n"
    "cache: a second link of the same inputs (bytes, kinds, order), options, target and\n"
    "nvJitLink build is a cache hit and does not run nvJitLink.\n"
    "\n"
    "Each INPUT's kind comes from its name: .ltoir or .lto (LTO-IR, needs --lto), .ptx,\n"
    ".cubin, .fatbin, .o (object with device code), .a (static library). A .cu file is\n"
    "compiled first, through the cache, with -rdc=true: to LTO-IR with --lto, else to PTX.\n"
    "Input files must be regular files of at most 64 MiB.\n"
    "\n"
    "Options:\n"
    "  -a, --arch TARGET      sm_90, sm_90a, sm_100f ... or auto (the exact architecture\n"
    "                         of device 0; needs a GPU). Default auto.\n"
    "      --lto              link-time optimisation (nvJitLink -lto)\n"
    "  -O, --opt-level N      optimisation level of the link: 0 or 3 (nvJitLink -ON)\n"
    "      --maxrregcount N   at most N registers per thread\n"
    "      --ptx              write PTX instead of a CUBIN (needs --lto)\n"
    "  -o, --output OUT       output file ('-' = stdout). Default a.cubin (a.ptx with\n"
    "                         --ptx) in the current directory. Replaced whole, as kjit\n"
    "                         compile does.\n"
    "      --json             print the result as JSON on stdout (needs -o FILE, not '-')\n"
    "  -q, --quiet            print nothing on success\n"
    "      --cache-dir DIR    use the cache in DIR\n"
    "  -- OPTION...           pass the remaining arguments to nvJitLink as is, e.g.\n"
    "                         -- -ftz=1 -prec-div=0 -split-compile=0\n"
    "\n"
    "Exit status: 0 ok; 1 link error (nvJitLink's log printed on stderr: undefined or\n"
    "duplicate symbols, inputs it cannot read) or a .cu input that does not compile; 2\n"
    "usage, an option nvJitLink refuses or mismatched targets; 3 other error (unreadable\n"
    "INPUT, unwritable OUT, nvJitLink not installed, no GPU for --arch auto, ...).\n";

struct LinkerHolder {
  kjit_linker* p = nullptr;
  ~LinkerHolder() { kjit_linker_destroy(p); }
};

int exit_code_for_link_status(kjit_status st) {
  if (st == KJIT_ERROR_LINK) return kExitCompile;
  return exit_code_for_compile_status(st);
}

// Prints the failure (and nvJitLink's or NVRTC's log) and stops.
[[noreturn]] void report_failure(const Global& g, const std::string& what, kjit_status st,
                                 const std::string& log) {
  const char* e = kjit_last_error();
  std::string detail = e && *e ? e : kjit_status_string(st);
  // The library's message repeats the log after its first line.
  if (!log.empty() && detail.find('\n') != std::string::npos) detail.resize(detail.find('\n'));
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.link");
    cJSON_AddBoolToObject(j.p, "ok", 0);
    cJSON_AddNumberToObject(j.p, "status", st);
    cJSON_AddStringToObject(j.p, "status_name", status_name(st).c_str());
    cJSON_AddStringToObject(j.p, "message", (what + ": " + detail).c_str());
    cJSON_AddStringToObject(j.p, "log", log.c_str());
    print_json(j.p);
  }
  std::string msg = what + ": " + detail + " [" + status_name(st) + "]";
  if (!log.empty()) {
    msg += "\n" + log;
    if (msg.back() == '\n') msg.pop_back();
  }
  fail(exit_code_for_link_status(st), msg);
}

// Compiles a .cu input through the cache for the link: LTO-IR with --lto, else PTX.
void add_source(kjit_linker* l, kjit_compiler* compiler, const std::string& file,
                const std::string& arch, bool lto, const Global& g) {
  std::string source, err;
  if (!read_bounded_file(file, kMaxSourceBytes, "a source", false, &source, &err)) {
    fail(kExitError, "cannot read '" + file + "': " + err);
  }
  const std::string nul = nul_byte_problem(source);
  if (!nul.empty()) fail(kExitCompile, "'" + file + "': source " + nul);
  OptionsHolder o;
  kjit_status st = kjit_options_create(&o.p);
  if (st != KJIT_OK) fail_status(st, "cannot create options");
  kjit_options_set_name(o.p, file.c_str());
  if (kjit_options_set_target(o.p, arch.c_str()) != KJIT_OK)
    usage_error("link", "bad target '" + arch + "'");
  kjit_options_set_outputs(o.p, lto ? KJIT_OUTPUT_LTOIR : KJIT_OUTPUT_PTX);
  kjit_options_add(o.p, "-rdc=true");
  BinaryHolder b;
  st = kjit_compile(compiler, source.c_str(), o.p, &b.p);
  if (st != KJIT_OK)
    report_failure(g, "'" + file + "' (" + arch + ")", st, b.p ? kjit_binary_log(b.p) : "");
  st = kjit_linker_add_binary(l, b.p, file.c_str());
  if (st != KJIT_OK) fail_status(st, "cannot add '" + file + "'");
}

void add_file(kjit_linker* l, const std::string& file) {
  std::string err;
  if (!check_regular_file(file, &err)) fail(kExitError, "cannot read '" + file + "': " + err);
  const kjit_status st = kjit_linker_add_file(l, KJIT_LINK_INPUT_AUTO, file.c_str());
  if (st == KJIT_ERROR_INVALID_ARGUMENT) usage_error("link", kjit_last_error());
  if (st != KJIT_OK) fail_status(st, "cannot add '" + file + "'");
}

void print_result(const Global& g, kjit_binary* b, const std::string& out_path, size_t size,
                  double elapsed, size_t inputs) {
  const int tier = kjit_binary_tier(b);
  const std::string log = kjit_binary_log(b);
  if (g.json) {
    JsonHolder j;
    j.p = new_document("kjit.link");
    cJSON_AddBoolToObject(j.p, "ok", 1);
    cJSON_AddNumberToObject(j.p, "inputs", static_cast<double>(inputs));
    cJSON_AddStringToObject(j.p, "output", out_path.c_str());
    cJSON_AddNumberToObject(j.p, "bytes", static_cast<double>(size));
    cJSON_AddStringToObject(j.p, "key", kjit_binary_key(b));
    cJSON_AddStringToObject(j.p, "tier", tier_name(tier));
    cJSON_AddBoolToObject(j.p, "hit", tier != KJIT_TIER_COMPILED);
    cJSON_AddNumberToObject(j.p, "elapsed_ms", elapsed);
    cJSON_AddNumberToObject(j.p, "link_ms", kjit_binary_compile_ms(b));
    add_binary_json(j.p, b, false);
    print_json(j.p);
    return;
  }
  if (g.quiet) return;
  if (!log.empty()) std::fprintf(stderr, "%s%s", log.c_str(), log.back() == '\n' ? "" : "\n");
  const std::string key = kjit_binary_key(b);
  const std::string how =
      tier == KJIT_TIER_COMPILED
          ? "cache miss, linked in " + human_ms(kjit_binary_compile_ms(b))
          : "cache hit (" + std::string(tier_name(tier)) + ") in " + human_ms(elapsed);
  std::fprintf(stderr, "%zu inputs -> %s (%s, %s): %s [key %.16s]\n", inputs, out_path.c_str(),
               kjit_binary_target(b), human_bytes(size).c_str(), how.c_str(), key.c_str());
  for (size_t i = 0; i < kjit_binary_kernel_count(b); ++i) {
    std::fprintf(stderr, "  kernel %s\n", kjit_binary_kernel_name(b, i));
  }
}

}  // namespace

int cmd_link(const std::vector<std::string>& args, Global& g) {
  const std::string cmd = "link";
  Parsed p = parse_args(cmd, args,
                        {{"arch", 'a', true},
                         {"lto", 0, false},
                         {"opt-level", 'O', true},
                         {"maxrregcount", 0, true},
                         {"ptx", 0, false},
                         {"output", 'o', true, Arg::kPath}},
                        g);
  if (p.help) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (p.positional.empty()) usage_error(cmd, "missing INPUT files");
  const std::string arch = p.get("arch", "auto");
  if (arch.empty()) usage_error(cmd, "--arch needs a target such as sm_90");
  const bool lto = p.has("lto");
  const bool ptx = p.has("ptx");
  if (ptx && !lto) usage_error(cmd, "--ptx needs --lto (nvJitLink makes PTX only from LTO-IR)");
  const std::string out_path = p.get("output", ptx ? "a.ptx" : "a.cubin");
  if (g.json && out_path == "-") usage_error(cmd, "--json cannot be combined with -o -");

  CacheHolder cache;
  cache.p = open_cache(g);
  LinkerHolder l;
  kjit_status st = kjit_linker_create(cache.p, &l.p);
  if (st != KJIT_OK) fail_status(st, "cannot create a linker");
  kjit_linker_set_target(l.p, arch.c_str());
  if (lto) kjit_linker_add_option(l.p, "-lto");
  if (p.has("opt-level")) kjit_linker_add_option(l.p, ("-O" + p.get("opt-level")).c_str());
  if (p.has("maxrregcount")) {
    kjit_linker_add_option(l.p, ("-maxrregcount=" + p.get("maxrregcount")).c_str());
  }
  for (const std::string& o : p.after_dashdash) {
    if (kjit_linker_add_option(l.p, o.c_str()) != KJIT_OK)
      usage_error(cmd, "bad nvJitLink option '" + o + "'");
  }
  kjit_linker_set_outputs(l.p, ptx ? KJIT_OUTPUT_PTX : KJIT_OUTPUT_CUBIN);

  CompilerHolder compiler;
  for (const std::string& file : p.positional) {
    const size_t dot = file.rfind('.');
    if (dot != std::string::npos && file.compare(dot, std::string::npos, ".cu") == 0) {
      if (!compiler.p && (st = kjit_compiler_create(cache.p, 1, &compiler.p)) != KJIT_OK) {
        fail_status(st, "cannot create a compiler");
      }
      add_source(l.p, compiler.p, file, arch, lto, g);
    } else {
      add_file(l.p, file);
    }
  }

  BinaryHolder bin;
  const double t0 = now_ms();
  st = kjit_link(l.p, &bin.p);
  const double elapsed = now_ms() - t0;
  if (st != KJIT_OK)
    report_failure(g, "link (" + arch + ")", st, bin.p ? kjit_binary_log(bin.p) : "");
  size_t size = 0;
  const void* data = kjit_binary_data(bin.p, ptx ? KJIT_OUTPUT_PTX : KJIT_OUTPUT_CUBIN, &size);
  if (!data) fail(kExitError, "the link produced no output");
  std::string err;
  if (!write_file(out_path, data, size, &err))
    fail(kExitError, "cannot write '" + out_path + "': " + err);
  print_result(g, bin.p, out_path, size, elapsed, p.positional.size());
  return kExitOk;
}

}  // namespace kjit_cli
