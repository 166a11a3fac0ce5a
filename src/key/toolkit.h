// The CUDA toolkit's headers for NVRTC: <cuda_fp16.h>, <cooperative_groups.h>, CCCL's
// <cub/...>, <cuda/std/...> and friends, found without the caller naming a directory.
//
// The toolkit is the one that matches the libnvrtc in use (the directory above its lib/),
// unless overridden, in this order: the options' toolkit root (kjit_options_set_toolkit),
// $KJIT_CUDA_HOME, $CUDA_PATH, $CUDA_HOME. Its include directories are <root>/include/cccl
// and <root>/include, or the same under <root>/targets/<arch>-linux/ where that layout is
// used; they are searched after the caller's own include paths.
//
// The cache key does not hash these thousands of files one by one: it covers them with a
// fingerprint of the toolkit, read once per process: the include directories' paths, the
// toolkit's version.json / version.txt, CCCL's version header and the versions of any
// installed wheel metadata (dist-info), on top of NVRTC's own version and build. Editing a
// toolkit header in place is therefore not seen; upgrading the toolkit or CCCL is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/fs.h"

namespace kjit {

struct Toolkit {
  std::string root;                       // "" when no toolkit headers were found
  std::string found_by;                   // "option", "KJIT_CUDA_HOME", ..., "libnvrtc"
  std::vector<std::string> include_dirs;  // real paths, in search order
  std::string fingerprint;                // 64 hex digits ("" when none found)
};

class Facts;  // store/facts.h

// The toolkit for an explicit root ("" = automatic). Memoised per distinct request for
// the life of the process. The first discovery in a process reads the record `facts` (a
// cache's; may be null) keeps of an earlier one, and uses it while every path that discovery
// looked at stats the same (include_scan.h: paths_unchanged); otherwise it discovers
// again and keeps the result there when nothing it read had changed within
// kRacySeconds. Saves a fresh process reading and hashing the toolkit's version files.
// Thread-safe; once the automatic toolkit is known, asking for it is one atomic load.
const Toolkit& find_toolkit(const std::string& explicit_root, Facts* facts = nullptr);

// The record of a discovery kept in a cache (docs/formats.md, "Toolkit record"): util/wire,
// the string "kjit-toolkit", a u32 version, the toolkit and the stamps of the paths the
// discovery looked at. decode() gives false (and leaves its outputs alone) for a record of
// another version, a damaged or truncated one: the toolkit is discovered again.
constexpr const char* kToolkitMagic = "kjit-toolkit";
constexpr uint32_t kToolkitRecordVersion = 2;
std::string encode_toolkit_record(const Toolkit& t, const std::vector<PathStamp>& looked);
bool decode_toolkit_record(const std::string& record, Toolkit* t, std::vector<PathStamp>* looked);

// Forgets the toolkits found, so that the next find_toolkit() reads the record of the cache
// it is given. References handed out stay valid. Through reset_process_state().
void reset_toolkits();

// The name of that record in the cache's metadata (it depends on the candidates: the
// explicit root, or $KJIT_CUDA_HOME, $CUDA_PATH, $CUDA_HOME and libnvrtc's directory).
std::string toolkit_record_name(const std::string& explicit_root);

}  // namespace kjit
