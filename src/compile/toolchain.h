// Facts about the NVRTC in use: version with build number, supported architectures.
#pragma once

#include <string>
#include <vector>

namespace kjit {

class Cache;

struct ToolchainFacts {
  std::string id;          // "nvrtc 13.0.88 CL-36424714"
  std::string version;     // "13.0" (nvrtcVersion)
  std::vector<int> archs;  // nvrtcGetSupportedArchs
};

// "13.0" from nvrtcVersion().
std::string nvrtc_version_short();

// Full identity, e.g. "nvrtc 13.0.88 CL-36424714", read once per process from a probe
// compile. With a cache, the facts are remembered in its database keyed by the library
// file's identity (path, device, inode, size, times), so later processes neither probe
// nor open libnvrtc (nvrtc_lib.h). Call it before the functions below: without a cache
// they open NVRTC to learn the same facts.
std::string toolchain_id(Cache* cache);

bool arch_supported(int arch);
std::string supported_archs_text();  // "sm_75, sm_80, ..."

// Real path of the libnvrtc in use (opened or not), and the toolkit root it belongs to.
std::string nvrtc_library_path();
std::string toolkit_root();

}  // namespace kjit
