// NVRTC's options and nvcc's spellings of kjit's own on the `kjit compile` command line.
#include <cstring>

#include "cli.h"

namespace kjit_cli {
namespace {

// How an NVRTC option takes a value.
enum class Val {
  kNone,  // a flag: -G
  kBool,  // a flag or a value: -rdc means -rdc=true (-dopt: -dopt=on)
  kNeed,  // a value: -std=c++17, or nvcc's -std c++17 (one argument for NVRTC)
};

struct NvrtcOption {
  const char* dash;    // the short spelling, without the dash: "std"
  const char* dashes;  // the long spelling, without the dashes: "std"
  Val val;
};

// The options of NVRTC 13 (its documentation's "Supported Compile Options"), except those
// kjit takes itself: -arch (--arch), -I (--include-path), -D (--define), -dlto (--ltoir).
const NvrtcOption kNvrtcOptions[] = {
    {"dc", "device-c", Val::kNone},
    {"dw", "device-w", Val::kNone},
    {"rdc", "relocatable-device-code", Val::kBool},
    {"ewp", "extensible-whole-program", Val::kNone},
    {"G", "device-debug", Val::kNone},
    {"lineinfo", "generate-line-info", Val::kNone},
    {"dopt", "dopt", Val::kBool},
    {"Ofc", "Ofast-compile", Val::kNeed},
    {"Xptxas", "ptxas-options", Val::kNeed},
    {"maxrregcount", "maxrregcount", Val::kNeed},
    {"ftz", "ftz", Val::kBool},
    {"prec-sqrt", "prec-sqrt", Val::kBool},
    {"prec-div", "prec-div", Val::kBool},
    {"fmad", "fmad", Val::kBool},
    {"use_fast_math", "use_fast_math", Val::kNone},
    {"extra-device-vectorization", "extra-device-vectorization", Val::kNone},
    {"modify-stack-limit", "modify-stack-limit", Val::kBool},
    {"gen-opt-lto", "gen-opt-lto", Val::kNone},
    {"optix-ir", "optix-ir", Val::kNone},
    {"jtd", "jump-table-density", Val::kNeed},
    {"device-stack-protector", "device-stack-protector", Val::kBool},
    {"U", "undefine-macro", Val::kNeed},
    {"include", "pre-include", Val::kNeed},
    {"no-source-include", "no-source-include", Val::kNone},
    {"std", "std", Val::kNeed},
    {"builtin-move-forward", "builtin-move-forward", Val::kBool},
    {"builtin-initializer-list", "builtin-initializer-list", Val::kBool},
    {"pch", "pch", Val::kNone},
    {"create-pch", "create-pch", Val::kNeed},
    {"use-pch", "use-pch", Val::kNeed},
    {"pch-dir", "pch-dir", Val::kNeed},
    {"pch-verbose", "pch-verbose", Val::kBool},
    {"pch-messages", "pch-messages", Val::kBool},
    {"instantiate-templates-in-pch", "instantiate-templates-in-pch", Val::kBool},
    {"w", "disable-warnings", Val::kNone},
    {"restrict", "restrict", Val::kNone},
    {"default-device", "device-as-default-execution-space", Val::kNone},
    {"device-int128", "device-int128", Val::kNone},
    {"device-float128", "device-float128", Val::kNone},
    {"opt-info", "optimization-info", Val::kNeed},
    {"err-no", "display-error-number", Val::kNone},
    {"no-err-no", "no-display-error-number", Val::kNone},
    {"diag-error", "diag-error", Val::kNeed},
    {"diag-suppress", "diag-suppress", Val::kNeed},
    {"diag-warn", "diag-warn", Val::kNeed},
    {"brief-diag", "brief-diagnostics", Val::kBool},
    {"time", "time", Val::kNeed},
    {"split-compile", "split-compile", Val::kNeed},
    {"fdevice-syntax-only", "fdevice-syntax-only", Val::kNone},
    {"minimal", "minimal", Val::kNone},
    {"fdevice-time-trace", "fdevice-time-trace", Val::kNeed},
    {"frandom-seed", "frandom-seed", Val::kNeed},
};

// nvcc's spellings of kjit's options, as kjit's: {spelling, kjit option, takes a value}.
struct Alias {
  const char* spelling;
  const char* kjit;
  bool value;
};
const Alias kAliases[] = {
    {"-arch", "--arch", true},
    {"--gpu-architecture", "--arch", true},
    {"-ptx", "--ptx", false},
    {"-cubin", "--cubin", false},
    {"-ltoir", "--ltoir", false},
    {"-dlto", "--ltoir", false},
    {"--dlink-time-opt", "--ltoir", false},
    {"--output-file", "--output", true},
    {"--define-macro", "--define", true},
};

// kjit's options that take their value as the next argument.
const char* const kValued[] = {"-a",
                               "--arch",
                               "-o",
                               "--output",
                               "-I",
                               "--include-path",
                               "-D",
                               "--define",
                               "-n",
                               "--name-expression",
                               "--program-name",
                               "--toolkit",
                               "--cache-dir"};

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

// `a` spelled as NVRTC option `o` ("-name", "--name", "--dashes", "-dashes", each bare or
// with "=VALUE"): true with *value ("" when bare) and *has_value.
bool spells(const std::string& a, const NvrtcOption& o, std::string* value, bool* has_value) {
  for (const std::string& name : {std::string("-") + o.dash, std::string("--") + o.dash,
                                  std::string("--") + o.dashes, std::string("-") + o.dashes}) {
    if (a == name) {
      *has_value = false;
      value->clear();
      return true;
    }
    if (o.val != Val::kNone && starts_with(a, name + "=")) {
      *has_value = true;
      *value = a.substr(name.size() + 1);
      return true;
    }
  }
  return false;
}

bool is_bool_word(const std::string& v) {
  return v == "true" || v == "false" || v == "on" || v == "off";
}

// One NVRTC option at args[*i] (advancing *i past a separate value) as the single argument
// NVRTC takes; "" when args[*i] is not one.
std::string take_nvrtc(const std::vector<std::string>& args, size_t* i) {
  const std::string& a = args[*i];
  // -UNAME: NVRTC's own short form.
  if (a.size() > 2 && a[1] == 'U' && a[0] == '-' && a.find('=') == std::string::npos &&
      a.compare(0, 3, "-U=") != 0) {
    return a;
  }
  for (const NvrtcOption& o : kNvrtcOptions) {
    std::string value;
    bool has_value = false;
    if (!spells(a, o, &value, &has_value)) continue;
    const std::string name = std::string("-") + o.dash;
    if (has_value) return name + "=" + value;
    const bool next = *i + 1 < args.size();
    if (o.val == Val::kNeed) {
      if (!next) usage_error("compile", "option '" + a + "' needs a value");
      return name + "=" + args[++*i];
    }
    if (o.val == Val::kBool) {
      if (next && is_bool_word(args[*i + 1])) return name + "=" + args[++*i];
      return name + (std::strcmp(o.dash, "dopt") == 0 ? "=on" : "=true");
    }
    return name;
  }
  return "";
}

// nvcc's spelling of a kjit option at args[*i], appended to *out as kjit's; false if none.
bool take_alias(const std::vector<std::string>& args, size_t* i, std::vector<std::string>* out) {
  const std::string& a = args[*i];
  for (const Alias& al : kAliases) {
    if (a == al.spelling) {
      out->push_back(al.kjit);
      if (al.value && *i + 1 < args.size()) out->push_back(args[++*i]);
      return true;
    }
    if (al.value && starts_with(a, std::string(al.spelling) + "=")) {
      out->push_back(std::string(al.kjit) + "=" + a.substr(std::strlen(al.spelling) + 1));
      return true;
    }
  }
  return false;
}

// nvcc's options that NVRTC lacks, and what `kjit compile` does with each.
enum class Nvcc {
  kIgnore,  // no meaning for device code compiled at run time: dropped with a warning
  kRefuse,  // something kjit does another way: a usage error that says which
  kMap,     // NVRTC's (or kjit's) own spelling of it: taken so, with a note
};

struct NvccOption {
  const char* spellings[4];  // every spelling (nullptr-terminated), without "=VALUE"
  bool value;                // takes a value: "-Xcompiler -fPIC", "-Xcompiler=-fPIC"
  Nvcc action;
  const char* why;  // what it is and what to do, said after "'<argument>': "
  const char* as;   // kMap: the option it becomes
};

const NvccOption kNvccOptions[] = {
    {{"-O", "-O0", "-O1", nullptr},
     false,
     Nvcc::kIgnore,
     "nvcc's optimisation level for host code; NVRTC compiles device code only, which is "
     "optimised by default (ptxas's level: -Xptxas -O3)",
     nullptr},
    {{"-O2", "-O3", nullptr},
     false,
     Nvcc::kIgnore,
     "nvcc's optimisation level for host code; NVRTC compiles device code only, which is "
     "optimised by default (ptxas's level: -Xptxas -O3)",
     nullptr},
    {{"--optimize", nullptr},
     true,
     Nvcc::kIgnore,
     "nvcc's optimisation level for host code; NVRTC compiles device code only, which is "
     "optimised by default (ptxas's level: -Xptxas -O3)",
     nullptr},
    {{"-Xcompiler", "--compiler-options", nullptr},
     true,
     Nvcc::kIgnore,
     "options for the host compiler; NVRTC compiles device code only and runs no host compiler",
     nullptr},
    {{"-ccbin", "--compiler-bindir", nullptr},
     true,
     Nvcc::kIgnore,
     "the host compiler; NVRTC compiles device code only and runs no host compiler",
     nullptr},
    {{"-c", "--compile", nullptr},
     false,
     Nvcc::kIgnore,
     "nvcc's 'compile to an object file'; kjit compile always writes one PTX, CUBIN or "
     "LTO-IR file (--ptx, --cubin, --ltoir, or -o's extension)",
     nullptr},
    {{"-g", "--debug", nullptr},
     false,
     Nvcc::kIgnore,
     "debug information for host code; for device code pass -G (or -lineinfo)",
     nullptr},
    {{"-m64", nullptr},
     false,
     Nvcc::kIgnore,
     "the host's address size; device code is always 64-bit",
     nullptr},
    {{"-x", "--x", nullptr},
     true,
     Nvcc::kIgnore,
     "the input language; kjit compile's input is always CUDA C++",
     nullptr},
    {{"--extended-lambda", "-extended-lambda", "--expt-extended-lambda", "-expt-extended-lambda"},
     false,
     Nvcc::kIgnore,
     "NVRTC has no such option and compiles no host code: a lambda in device code is device "
     "code already, so write it without __device__ or __host__ (NVRTC refuses annotated "
     "lambdas)",
     nullptr},
    {{"--expt-relaxed-constexpr", "-expt-relaxed-constexpr", nullptr},
     false,
     Nvcc::kMap,
     "NVRTC has no such option and compiles no host code; its way to call constexpr functions "
     "without __device__ from device code is -default-device (every function without an "
     "execution space annotation is a device function)",
     "-default-device"},
    {{"-gencode", "--generate-code", nullptr},
     true,
     Nvcc::kRefuse,
     "nvcc builds for several targets at once; kjit compiles for one target a call",
     nullptr},
    {{"-code", "--gpu-code", nullptr},
     true,
     Nvcc::kRefuse,
     "nvcc's code to embed; kjit compiles for one target a call, named by --arch",
     nullptr},
};

// The nvcc option at args[*i] (advancing *i past a separate value): kIgnore and kMap give
// a warning or note in *notes (kMap's option goes to *nvrtc); kRefuse is a usage error.
// False when args[*i] is none of them.
bool take_nvcc(const std::vector<std::string>& args, size_t* i, std::vector<std::string>* nvrtc,
               std::vector<std::string>* notes) {
  const std::string& a = args[*i];
  for (const NvccOption& o : kNvccOptions) {
    for (const char* const* s = o.spellings; s < o.spellings + 4 && *s; ++s) {
      std::string value, given = a;
      if (a == *s) {
        if (o.value && *i + 1 < args.size()) {
          value = args[++*i];
          given += " " + value;
        }
      } else if (o.value && starts_with(a, std::string(*s) + "=")) {
        value = a.substr(std::strlen(*s) + 1);
      } else {
        continue;
      }
      if (o.action == Nvcc::kRefuse) {
        // The one target to name instead: code=sm_XY (or the value itself for -code).
        std::string target = value;
        const size_t code = value.find("code=");
        if (code != std::string::npos) target = value.substr(code + 5);
        target = target.substr(0, target.find_first_of(",]"));
        if (!target.empty() && target[0] == '[') target.erase(0, 1);
        std::string use = "--arch sm_XY (CUBIN) or --arch compute_XY (PTX)";
        if (starts_with(target, "sm_") || starts_with(target, "compute_")) use = "--arch " + target;
        usage_error("compile", "'" + given + "': " + o.why + "; use " + use + " instead");
      }
      if (o.action == Nvcc::kMap) {
        nvrtc->push_back(o.as);
        notes->push_back("note: '" + given + "' taken as '" + o.as + "': " + o.why);
      } else {
        notes->push_back("warning: ignoring '" + given + "': " + o.why);
      }
      return true;
    }
  }
  return false;
}

// nvcc's -arch values that name no single target: native (this machine's GPU: kjit's
// "auto"), all and all-major (many targets, refused). Rewrites the --arch value *v in place.
void check_arch_value(std::string* v, std::vector<std::string>* notes) {
  if (*v == "native") {
    notes->push_back("note: '-arch native' taken as '--arch auto' (device 0's exact target)");
    *v = "auto";
  } else if (*v == "all" || *v == "all-major") {
    usage_error("compile", "'-arch " + *v +
                               "': nvcc builds for many targets; kjit compiles for one target a "
                               "call: use --arch auto (this machine's GPU) or --arch sm_XY");
  }
}

bool is_valued(const std::string& a) {
  for (const char* v : kValued) {
    if (a == v) return true;
  }
  return false;
}

}  // namespace

CompileArgs split_compile_args(const std::vector<std::string>& args) {
  CompileArgs r;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') {
      r.kjit.push_back(a);
      continue;
    }
    if (is_valued(a)) {  // kjit's own option and its value, as they are
      r.kjit.push_back(a);
      if (i + 1 < args.size()) {
        std::string v = args[++i];
        if (a == "-a" || a == "--arch") check_arch_value(&v, &r.notes);
        r.kjit.push_back(v);
      }
      continue;
    }
    if (take_alias(args, &i, &r.kjit)) {
      std::string& last = r.kjit.back();
      if (last.rfind("--arch=", 0) == 0) {
        std::string v = last.substr(7);
        check_arch_value(&v, &r.notes);
        last = "--arch=" + v;
      } else if (r.kjit.size() >= 2 && r.kjit[r.kjit.size() - 2] == "--arch" && last != "--arch") {
        check_arch_value(&last, &r.notes);
      }
      continue;
    }
    const std::string nvrtc = take_nvrtc(args, &i);
    if (!nvrtc.empty()) {
      r.nvrtc.push_back(nvrtc);
      continue;
    }
    if (take_nvcc(args, &i, &r.nvrtc, &r.notes)) continue;
    r.kjit.push_back(a);  // kjit's, or unknown: the parser says which
  }
  // After "--": NVRTC's, as they are, but for an output file named there.
  if (i < args.size()) ++i;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if ((a == "-o" || a == "--output" || a == "--output-file") && i + 1 < args.size()) {
      r.kjit.push_back("--output");
      r.kjit.push_back(args[++i]);
    } else if (starts_with(a, "--output=") || starts_with(a, "--output-file=")) {
      r.kjit.push_back("--output=" + a.substr(a.find('=') + 1));
    } else {
      r.passed.push_back(a);
    }
  }
  return r;
}

}  // namespace kjit_cli
