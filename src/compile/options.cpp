#include "compile/options.h"

#include <algorithm>
#include <cctype>

#include "compile/toolchain.h"
#include "cuda/device.h"
#include "kjit/compile.h"
#include "util/error.h"

namespace kjit {
namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

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

}  // namespace

void CompileOptions::add_header(std::string header_name, std::string contents) {
  for (auto& [n, c] : headers) {
    if (n == header_name) {
      c = std::move(contents);
      return;
    }
  }
  headers.emplace_back(std::move(header_name), std::move(contents));
}

void CompileOptions::add_name_expression(const std::string& expr) {
  if (std::find(name_expressions.begin(), name_expressions.end(), expr) ==
      name_expressions.end()) {
    name_expressions.push_back(expr);
  }
}

bool is_valid_target_syntax(const std::string& target) {
  return target == "auto" || arch_number(target) >= 0;
}

NormalisedOptions normalise(const CompileOptions& opts) {
  NormalisedOptions n;
  std::string target = opts.target;
  bool lto = (opts.outputs & KJIT_OUTPUT_LTOIR) != 0;
  bool has_seed = false;

  for (const std::string& raw : opts.raw) {
    std::string o = trim(raw);
    if (o.empty()) fail(KJIT_ERROR_INVALID_OPTION, "empty compile option");
    std::string arch;
    if (starts_with(o, "-arch=")) arch = o.substr(6);
    if (starts_with(o, "--gpu-architecture=")) arch = o.substr(19);
    if (o == "-arch" || o == "--gpu-architecture") {
      fail(KJIT_ERROR_INVALID_OPTION,
           "option '" + o + "' needs its value in the same string, e.g. -arch=sm_90");
    }
    if (!arch.empty()) {
      if (target != "auto" && target != arch) {
        fail(KJIT_ERROR_INVALID_OPTION, "option '" + o + "' conflicts with target '" + target +
                                            "' set on the options");
      }
      target = arch;
      continue;
    }
    if (o == "-dlto" || o == "--dlink-time-opt") {
      lto = true;
      continue;
    }
    if (starts_with(o, "--define-macro=")) o = "-D" + o.substr(15);
    if (starts_with(o, "--undefine-macro=")) o = "-U" + o.substr(17);
    if (starts_with(o, "--include-path=")) o = "-I" + o.substr(15);
    if (starts_with(o, "--std=")) o = "-std=" + o.substr(6);
    if (starts_with(o, "--pre-include=")) o = "-include=" + o.substr(14);
    if (starts_with(o, "-I")) {
      if (o.size() == 2) fail(KJIT_ERROR_INVALID_OPTION, "option '-I' needs a path: -I<dir>");
      n.include_paths.push_back(o.substr(2));
    }
    if (starts_with(o, "-include=")) {
      // An empty name would read as a computed include: every file on the include path.
      if (o.size() == 9) fail(KJIT_ERROR_INVALID_OPTION, "option '-include=' needs a file name");
      n.pre_includes.push_back(o.substr(9));
    }
    if (starts_with(o, "--frandom-seed") || starts_with(o, "-frandom-seed")) has_seed = true;
    n.key.push_back(o);
  }

  if (target == "auto") target = cuda::device_arch(opts.device);
  if (!is_valid_target_syntax(target)) {
    fail(KJIT_ERROR_UNSUPPORTED_TARGET,
         "target '" + target + "' is not a CUDA architecture; supported: " +
             supported_archs_text());
  }
  const int number = arch_number(target);
  if (!arch_supported(number)) {
    fail(KJIT_ERROR_UNSUPPORTED_TARGET, "target '" + target + "' is not supported by NVRTC " +
                                            nvrtc_version_short() +
                                            "; supported: " + supported_archs_text());
  }
  n.target = target;
  n.real_target = starts_with(target, "sm_");

  unsigned outputs = opts.outputs;
  if (lto) outputs |= KJIT_OUTPUT_LTOIR;
  if (outputs == 0) outputs = n.real_target ? (KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN) : KJIT_OUTPUT_PTX;
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

  n.nvrtc.push_back("-arch=" + target);
  if (outputs & KJIT_OUTPUT_LTOIR) n.nvrtc.push_back("-dlto");
  n.nvrtc.insert(n.nvrtc.end(), n.key.begin(), n.key.end());
  // Deterministic output: equal inputs give byte-equal PTX.
  if (!has_seed) n.nvrtc.push_back("--frandom-seed=kjit");
  return n;
}

}  // namespace kjit
