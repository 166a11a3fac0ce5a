// Facts about the NVRTC in use: version with build number, supported architectures.
#pragma once

#include <string>

namespace kjit {

class Cache;

// "13.0" from nvrtcVersion().
std::string nvrtc_version_short();

// Full identity, e.g. "nvrtc 13.0.88 CL-36424714", read once per libnvrtc file from a
// probe compile. With a cache, the result is remembered in its database keyed by the
// library file's identity, so later processes skip the probe.
std::string toolchain_id(Cache* cache);

bool arch_supported(int arch);
std::string supported_archs_text();  // "sm_75, sm_80, ..."

// Real path of the loaded libnvrtc, and the toolkit root directory it belongs to.
std::string nvrtc_library_path();
std::string toolkit_root();

}  // namespace kjit
