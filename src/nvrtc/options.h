// The normalisation of a request's options (key/request.h) into NVRTC arguments and
// cache-key fields.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "key/request.h"
#include "util/switches.h"

namespace kjit {

class Cache;
struct Toolkit;
struct ToolchainFacts;

// What normalising needs to know of this machine and process, gathered before it by the caller
// (machine_facts), so that normalise() itself asks nothing of the process's state.
struct MachineFacts {
  const ToolchainFacts* nvrtc = nullptr;  // NVRTC's version and architectures (toolchain.h)
  std::string nvrtc_toolkit_root;  // the toolkit libnvrtc belongs to ("" = none found, or the
                                   // program reads no files and needs none)
  // The toolkit matching libnvrtc (toolkit.h), for a program that can read files; null for
  // one that cannot, whose key then covers no toolkit.
  const Toolkit* automatic = nullptr;
  // The toolkit of the options' root (kjit_options_set_toolkit), when one is set and the
  // toolkit's headers are wanted; null otherwise.
  const Toolkit* named = nullptr;
  // The architecture of device `n` (cuda/device.h), asked only for target "auto".
  std::function<std::string(int)> device_arch;
  // The process's switches (util/switches.h: process_switches()); `pch` false turns
  // precompiled headers off whatever the options ask.
  Switches switches;
};

// The facts for compiling with `opts`: NVRTC's through `cache` (may be null; toolchain.h),
// the toolkits `opts` needs found through the cache's record of an earlier discovery
// (toolkit.h): the automatic one only where `reads_files` (may_read_files).
MachineFacts machine_facts(const CompileOptions& opts, bool reads_files, Cache* cache = nullptr);

// Throws kjit::Error: KJIT_ERROR_INVALID_OPTION (malformed or conflicting options),
// KJIT_ERROR_UNSUPPORTED_TARGET, KJIT_ERROR_CUDA_UNAVAILABLE ("auto" without a driver).
// Without the automatic toolkit in `machine` (a program that cannot make NVRTC open a
// file), the toolkit's include directories are not passed and its fingerprint is not in the
// key, so that its files, which nothing can read, are neither discovered on the way to a hit
// nor make a change of toolkit a miss. A toolkit named in the options is still checked.
// NVRTC opening a toolkit file anyway is then uncovered by the key, and the result is not
// stored (key.h: uncovered). KJIT_ERROR_INTERNAL when the options name a file to include or
// a precompiled header and `machine` has no automatic toolkit (machine_facts was given
// `reads_files` false for them).
NormalisedOptions normalise(const CompileOptions& opts, const MachineFacts& machine);

// Whether compiling `source` with `opts` can make NVRTC open any file: an #include,
// #include_next, #import or #embed directive or a __has_include in the source or an
// in-memory header (include_scan.h: scan_directives: comments and string literals are
// skipped, line splices joined), or an option that names a file to include or a
// precompiled header.
bool may_read_files(const std::string& source, const CompileOptions& opts);

// True if `target` looks like sm_XY[a|f] / compute_XY[a|f] / "auto".
bool is_valid_target_syntax(const std::string& target);

}  // namespace kjit
