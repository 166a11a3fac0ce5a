#include "nvrtc/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "cuda/device.h"
#include "key/builtin_std.h"
#include "key/include_scan.h"
#include "key/toolchain.h"
#include "key/toolkit.h"
#include "kjit/compile.h"
#include "nvrtc/device_target.h"
#include "store/cache.h"
#include "util/error.h"
#include "util/text.h"
#include "util/utf8.h"

namespace kjit {
namespace {

// Architecture number of a target ("sm_90a" -> 90), -1 if malformed.
int arch_number(const std::string& target) {
  size_t pos;
  if (starts_with(target, "sm_")) {
    pos = 3;
  } else if (starts_with(target, "compute_")) {
    pos = 8;
  } else {
    return -1;
  }
  size_t end = pos;
  while (end < target.size() && std::isdigit(static_cast<unsigned char>(target[end]))) ++end;
  if (end == pos || end - pos > 4) return -1;
  const std::string suffix = target.substr(end);
  if (!suffix.empty() && suffix != "a" && suffix != "f") return -1;
  return std::stoi(target.substr(pos, end - pos));
}

// Architecture-specific ("a") targets exist from sm_90, family ("f") targets from sm_100.
bool suffix_exists(const std::string& target, int number) {
  const char last = target.back();
  if (last == 'a') return number >= 90;
  if (last == 'f') return number >= 100;
  return true;
}

// An option is one line of valid UTF-8: NVRTC would read a line break as two options.
void check_option_text(const std::string& o) {
  if (o.empty()) fail(KJIT_ERROR_INVALID_OPTION, "empty compile option");
  if (o.find_first_of("\n\r") != std::string::npos) {
    fail(KJIT_ERROR_INVALID_OPTION,
         "compile option '" + o.substr(0, o.find_first_of("\n\r")) + "...' contains a line break");
  }
  const size_t bad = utf8_error(o);
  if (bad != std::string::npos) {
    fail(KJIT_ERROR_INVALID_OPTION,
         "compile option is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
}

}  // namespace

bool is_valid_target_syntax(const std::string& target) {
  return target == "auto" || arch_number(target) >= 0;
}

namespace {

// A text can read files when it holds an include-like directive or __has_include, as the
// preprocessor sees it: line splices joined, comments and string literals skipped (the
// word "include" in a comment reads nothing).
bool text_may_read_files(const std::string& text) {
  return !scan_directives(text).refs.empty();
}

}  // namespace

bool may_read_files(const std::string& source, const CompileOptions& opts) {
  if (text_may_read_files(source)) return true;
  for (const auto& [name, text] : opts.headers) {
    if (text_may_read_files(text)) return true;
  }
  // Pre-included headers (-include, --pre-include, in any spelling) and precompiled-header
  // options; include paths (-I, --include-path) read nothing by themselves.
  for (const std::string& raw : opts.raw) {
    const std::string o = trim(raw);
    if (starts_with(o, "-include") || starts_with(o, "--pre-include") ||
        o.find("pch") != std::string::npos) {
      return true;
    }
  }
  return false;
}

NormalisedOptions normalise(const CompileOptions& opts, const MachineFacts& machine) {
  NormalisedOptions n;
  std::string target = opts.target;
  bool lto = (opts.outputs & KJIT_OUTPUT_LTOIR) != 0;
  bool has_seed = false;

  for (size_t i = 0; i < opts.raw.size(); ++i) {
    std::string o = trim(opts.raw[i]);
    check_option_text(o);
    // NVRTC also takes these options' values as the next argument: fold them into one
    // argument, so that what NVRTC is given is exactly what the key and the include
    // scanner read.
    for (const char* flag : {"-arch", "--gpu-architecture", "-I", "--include-path", "-include",
                             "--pre-include", "-D", "--define-macro", "-U", "--undefine-macro"}) {
      if (o != flag) continue;
      if (i + 1 >= opts.raw.size()) {
        fail(KJIT_ERROR_INVALID_OPTION, "option '" + o + "' needs a value");
      }
      std::string value = trim(opts.raw[++i]);
      check_option_text(value);
      o = o + "=" + value;
    }
    std::string arch;
    if (starts_with(o, "-arch=")) arch = o.substr(6);
    if (starts_with(o, "--gpu-architecture=")) arch = o.substr(19);
    if (!arch.empty()) {
      if (target != "auto" && target != arch) {
        fail(KJIT_ERROR_INVALID_OPTION,
             "option '" + o + "' conflicts with target '" + target + "' set on the options");
      }
      target = arch;
      continue;
    }
    if (o == kNoBuiltinStdOption) {  // kjit's own: a built-in header is not in the key either
      n.builtin_std = false;
      continue;
    }
    if (o == "-dlto" || o == "--dlink-time-opt") {
      lto = true;
      continue;
    }
    if (starts_with(o, "--define-macro=")) o = "-D" + o.substr(15);
    if (starts_with(o, "--undefine-macro=")) o = "-U" + o.substr(17);
    if (starts_with(o, "-D=") || starts_with(o, "-U=")) o.erase(2, 1);  // NVRTC reads -D=X as -DX
    if (starts_with(o, "-D")) n.defines.push_back(o.substr(2));
    if (starts_with(o, "--include-path=")) o = "-I" + o.substr(15);
    if (starts_with(o, "--std=")) o = "-std=" + o.substr(6);
    if (starts_with(o, "--pre-include=")) o = "-include=" + o.substr(14);
    if (starts_with(o, "-I")) {
      // NVRTC reads "-I=DIR" and "-I DIR" (one argument) as DIR: say it that way.
      std::string dir = o.substr(2);
      if (!dir.empty() && dir[0] == '=') {
        dir = dir.substr(1);
      } else {
        dir = trim(dir);
      }
      if (dir.empty()) fail(KJIT_ERROR_INVALID_OPTION, "option '-I' needs a path: -I<dir>");
      o = "-I" + dir;
      n.include_paths.push_back(dir);
    }
    if (starts_with(o, "-include=")) {
      // An empty name would read as a computed include: every file on the include path.
      if (o.size() == 9) fail(KJIT_ERROR_INVALID_OPTION, "option '-include=' needs a file name");
      n.pre_includes.push_back(o.substr(9));
    }
    if (starts_with(o, "--frandom-seed") || starts_with(o, "-frandom-seed")) has_seed = true;
    for (const char* p : {"-pch", "--pch", "-create-pch", "--create-pch", "-use-pch", "--use-pch",
                          "-pch-dir", "--pch-dir"}) {
      if (o == p || starts_with(o, (std::string(p) + "=").c_str())) n.user_pch = true;
    }
    n.key.push_back(o);
  }

  const ToolchainFacts& nvrtc = *machine.nvrtc;
  if (target == "auto") target = machine.device_arch(opts.device);
  if (!is_valid_target_syntax(target)) {
    fail(KJIT_ERROR_UNSUPPORTED_TARGET,
         "target '" + target +
             "' is not a CUDA architecture; supported: " + supported_archs_text(nvrtc));
  }
  const int number = arch_number(target);
  if (!arch_supported(nvrtc, number) || !suffix_exists(target, number)) {
    fail(KJIT_ERROR_UNSUPPORTED_TARGET, "target '" + target + "' is not supported by NVRTC " +
                                            nvrtc.version +
                                            "; supported: " + supported_archs_text(nvrtc));
  }
  n.target = target;
  n.real_target = starts_with(target, "sm_");

  unsigned outputs = opts.outputs;
  if (lto) outputs |= KJIT_OUTPUT_LTOIR;
  if (outputs == 0)
    outputs = n.real_target ? (KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN) : KJIT_OUTPUT_PTX;
  if ((outputs & ~unsigned(KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN | KJIT_OUTPUT_LTOIR)) != 0) {
    fail(KJIT_ERROR_INVALID_OPTION, "unknown output bits " + std::to_string(outputs));
  }
  if ((outputs & KJIT_OUTPUT_LTOIR) && (outputs & ~unsigned(KJIT_OUTPUT_LTOIR))) {
    fail(KJIT_ERROR_INVALID_OPTION, "LTO-IR output cannot be combined with PTX or CUBIN");
  }
  if ((outputs & KJIT_OUTPUT_CUBIN) && !n.real_target) {
    fail(KJIT_ERROR_INVALID_OPTION,
         "CUBIN output needs a real architecture (sm_XY), not '" + target + "'");
  }
  n.outputs = outputs;

  // The toolkit's headers, searched after the caller's own include paths; for a program
  // that can read no file, only a toolkit named in the options (checked as always).
  // (may_read_files saw the same pre-includes and PCH options: checked on their
  // normalised form.)
  const bool reads_files = machine.automatic != nullptr;
  if (!reads_files && (!n.pre_includes.empty() || n.user_pch)) {
    fail(KJIT_ERROR_INTERNAL,
         "normalise: options that read files, facts for a program that reads none");
  }
  static const Toolkit kNone;
  const Toolkit& nvrtc_toolkit = reads_files ? *machine.automatic : kNone;
  if (reads_files && !machine.nvrtc_toolkit_root.empty()) {
    n.skip_roots.push_back(machine.nvrtc_toolkit_root);
  }
  n.toolkit_fingerprint = reads_files ? nvrtc_toolkit.fingerprint : "none: no file can be read";
  const Toolkit* wanted = opts.toolkit_root.empty() ? machine.automatic : machine.named;
  if (opts.toolkit_headers && wanted) {
    const Toolkit& tk = *wanted;
    if (tk.include_dirs.empty() && (tk.found_by == "option" || tk.found_by == "KJIT_CUDA_HOME")) {
      fail(KJIT_ERROR_INVALID_OPTION,
           "the CUDA toolkit at '" + tk.root + "' (from " +
               (tk.found_by == "option" ? std::string("the options") : tk.found_by) +
               ") has no include directory with cuda_fp16.h");
    }
    for (const std::string& dir : tk.include_dirs) {
      n.key.push_back("-I" + dir);
      n.toolkit_dirs.push_back(dir);
    }
    if (!tk.root.empty() && tk.root != nvrtc_toolkit.root) {
      n.skip_roots.push_back(tk.root);
      n.toolkit_fingerprint += tk.fingerprint;
    }
  }
  n.pch = opts.pch && !n.user_pch && machine.switches.pch;

  n.nvrtc.push_back("-arch=" + target);
  if (outputs & KJIT_OUTPUT_LTOIR) n.nvrtc.push_back("-dlto");
  n.nvrtc.insert(n.nvrtc.end(), n.key.begin(), n.key.end());
  // Deterministic output: equal inputs give byte-equal PTX.
  if (!has_seed) n.nvrtc.push_back("--frandom-seed=kjit");
  return n;
}

MachineFacts machine_facts(const CompileOptions& opts, bool reads_files, Cache* cache) {
  MachineFacts m;
  m.nvrtc = &toolchain_facts(facts_of(cache));
  if (reads_files) {  // only a program that reads files needs the toolkit's place
    m.nvrtc_toolkit_root = toolkit_root();
    m.automatic = &find_toolkit("", facts_of(cache));
  }
  if (opts.toolkit_headers && !opts.toolkit_root.empty()) {
    m.named = &find_toolkit(opts.toolkit_root, facts_of(cache));
  }
  m.device_arch = [cache](int device) { return device_target(cache, device).arch; };
  m.switches = process_switches();
  return m;
}

}  // namespace kjit
