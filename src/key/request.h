// A compile request's options as the caller gave them (what the public kjit_options
// builder holds), and as normalising made them concrete (nvrtc/options.h: normalise).
// Everything that affects a compile's output is here, the source aside, so the key is
// computed from these two (key.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kjit {

using HeaderList = std::vector<std::pair<std::string, std::string>>;  // (name, contents)
using StringList = std::vector<std::string>;

// The fields of CompileOptions, in order: X(type, name, default). The struct, its
// comparison and its encoding for the compile worker (worker/protocol.h) are generated from
// this one list, so a field added here reaches all three.
#define KJIT_COMPILE_OPTIONS_FIELDS(X)                                                   \
  X(std::string, target, "auto")                                                         \
  X(unsigned, outputs, 0) /* KJIT_OUTPUT_* mask; 0 = defaults for the target */          \
  X(int, device, 0)                                                                      \
  X(std::string, name, "kernel.cu")                                                      \
  X(StringList, raw, {})     /* NVRTC options as given */                                \
  X(HeaderList, headers, {}) /* in-memory headers */                                     \
  X(StringList, name_expressions, {})                                                    \
  X(bool, toolkit_headers, true)   /* add the CUDA toolkit's include dirs (toolkit.h) */ \
  X(std::string, toolkit_root, "") /* "" = automatic */                                  \
  X(bool, pch, true)               /* automatic precompiled headers for header-heavy programs */

#define KJIT_REQUEST_MEMBER(type, field, init) type field = init;
#define KJIT_REQUEST_FIELD_EQUAL(type, field, init) &&field == o.field

struct CompileOptions {
  KJIT_COMPILE_OPTIONS_FIELDS(KJIT_REQUEST_MEMBER)

  void add_header(std::string header_name, std::string contents);
  void add_name_expression(const std::string& expr);  // ignores duplicates

  // Every field: two requests with equal options and sources have the same key (the
  // compiler's memo of keys relies on it).
  bool operator==(const CompileOptions& o) const {
    return true KJIT_COMPILE_OPTIONS_FIELDS(KJIT_REQUEST_FIELD_EQUAL);
  }
};

// The fields of NormalisedOptions, a request made concrete (exact target, outputs, and the
// option lists), in order: X(type, name, default). Generated as CompileOptions' are: the
// compile worker receives them as the client normalised them.
#define KJIT_NORMALISED_OPTIONS_FIELDS(X)                                                       \
  X(std::string, target, "")  /* "sm_90", "sm_90a", "compute_90" ... never "auto" */            \
  X(bool, real_target, false) /* sm_ (CUBIN possible) rather than compute_ */                   \
  X(unsigned, outputs, 0)                                                                       \
  X(StringList, nvrtc, {})                /* passed to nvrtcCompileProgram, in order */         \
  X(StringList, key, {})                  /* normalised user options, in order (for the key) */ \
  X(StringList, include_paths, {})        /* from -I / --include-path */                        \
  X(StringList, pre_includes, {})         /* from -include / --pre-include */                   \
  X(StringList, defines, {})              /* from -D / --define-macro: NAME or NAME=BODY */     \
  X(std::string, toolkit_fingerprint, "") /* covers the toolkit files the scan skips */         \
  X(StringList, skip_roots, {})           /* toolkit roots: their files are not hashed */       \
  X(StringList, toolkit_dirs, {})         /* the toolkit's include dirs (in `key` as -I) */     \
  X(bool, pch, false)                     /* kjit may add automatic PCH options */              \
  X(bool, user_pch, false)                /* the caller passed PCH options of their own */      \
  X(bool, builtin_std, true) /* built-in standard headers (builtin_std.h); off with     */      \
                             /* "--no-builtin-std", which NVRTC never sees              */

struct NormalisedOptions {
  KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_REQUEST_MEMBER)

  bool operator==(const NormalisedOptions& o) const {
    return true KJIT_NORMALISED_OPTIONS_FIELDS(KJIT_REQUEST_FIELD_EQUAL);
  }
};

#undef KJIT_REQUEST_MEMBER
#undef KJIT_REQUEST_FIELD_EQUAL

}  // namespace kjit
