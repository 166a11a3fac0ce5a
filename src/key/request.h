// A compile request's options as the caller gave them (what the public kjit_options
// builder holds), and as normalising made them concrete (compile/options.h: normalise).
// Everything that affects a compile's output is here, the source aside, so the key is
// computed from these two (key.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kjit {

struct CompileOptions {
  std::string target = "auto";
  unsigned outputs = 0;  // KJIT_OUTPUT_* mask; 0 = defaults for the target
  int device = 0;
  std::string name = "kernel.cu";
  std::vector<std::string> raw;                              // NVRTC options as given
  std::vector<std::pair<std::string, std::string>> headers;  // in-memory headers
  std::vector<std::string> name_expressions;
  bool toolkit_headers = true;  // add the CUDA toolkit's include directories (toolkit.h)
  std::string toolkit_root;     // "" = automatic
  bool pch = true;              // automatic precompiled headers for header-heavy programs

  void add_header(std::string header_name, std::string contents);
  void add_name_expression(const std::string& expr);  // ignores duplicates

  // Every field: two requests with equal options and sources have the same key (the
  // compiler's memo of keys relies on it; a field added above must be added here).
  bool operator==(const CompileOptions& o) const {
    return target == o.target && outputs == o.outputs && device == o.device && name == o.name &&
           raw == o.raw && headers == o.headers && name_expressions == o.name_expressions &&
           toolkit_headers == o.toolkit_headers && toolkit_root == o.toolkit_root && pch == o.pch;
  }
};

// A request made concrete: exact target, outputs, and the option lists.
struct NormalisedOptions {
  std::string target;        // "sm_90", "sm_90a", "compute_90" ... never "auto"
  bool real_target = false;  // sm_ (CUBIN possible) rather than compute_
  unsigned outputs = 0;
  std::vector<std::string> nvrtc;          // passed to nvrtcCompileProgram, in order
  std::vector<std::string> key;            // normalised user options, in order (for the key)
  std::vector<std::string> include_paths;  // from -I / --include-path
  std::vector<std::string> pre_includes;   // from -include / --pre-include
  std::vector<std::string> defines;        // from -D / --define-macro: NAME or NAME=BODY
  std::string toolkit_fingerprint;         // covers the toolkit files the scan skips
  std::vector<std::string> skip_roots;     // toolkit roots: their files are not hashed
  std::vector<std::string> toolkit_dirs;   // the toolkit's include dirs (in `key` as -I)
  bool pch = false;                        // kjit may add automatic PCH options
  bool user_pch = false;                   // the caller passed PCH options of their own
  bool builtin_std = true;                 // built-in standard headers (builtin_std.h); off
                                           // with "--no-builtin-std", which NVRTC never sees
};

}  // namespace kjit
