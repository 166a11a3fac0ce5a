// Facts about the NVRTC in use: version with build number, supported architectures.
#pragma once

#include <string>
#include <vector>

namespace kjit {

class Facts;  // store/facts.h: the cache's small persistent facts

struct ToolchainFacts {
  std::string id;          // "nvrtc 13.0.88 CL-36424714"
  std::string version;     // "13.0" (nvrtcVersion)
  std::vector<int> archs;  // nvrtcGetSupportedArchs
};

// The facts, read once per process. With `facts` (a cache's), they are remembered there
// keyed by the library file's identity (path, device, inode, size, times), so later
// processes neither probe nor open libnvrtc (nvrtc_lib.h); without one (or before any
// record) NVRTC is opened and probed with a tiny compile. The same facts either way.
const ToolchainFacts& toolchain_facts(Facts* facts);

// The full identity, e.g. "nvrtc 13.0.88 CL-36424714": toolchain_facts(facts).id.
std::string toolchain_id(Facts* facts);

bool arch_supported(const ToolchainFacts& facts, int arch);
std::string supported_archs_text(const ToolchainFacts& facts);  // "sm_75, sm_80, ..."

// Real path of the libnvrtc in use (opened or not), and the toolkit root it belongs to.
std::string nvrtc_library_path();
std::string toolkit_root();

}  // namespace kjit
