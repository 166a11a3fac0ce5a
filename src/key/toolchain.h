// Facts about the NVRTC in use: version with build number, supported architectures.
#pragma once

#include <cstdint>
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

// The record of the facts kept in a cache (docs/formats.md, "Toolchain record"): util/wire,
// the string "kjit-toolchain", a u32 version, the identity, the version, a u64 count of
// architectures and each as a u64. decode() gives false (and leaves *f alone) for a record
// of another version, a damaged or truncated one: the facts are probed again.
constexpr const char* kToolchainMagic = "kjit-toolchain";
constexpr uint32_t kToolchainRecordVersion = 3;
std::string encode_toolchain_record(const ToolchainFacts& f);
bool decode_toolchain_record(const std::string& record, ToolchainFacts* f);

// The name of the record in a cache ("" when libnvrtc is not found).
std::string toolchain_record_name();

// Writes the facts this process has learnt (nothing when it has learnt none) into `store`
// when it holds no readable record of them: a cache directory opened after the facts were
// learnt from another gets its record, so that a compile worker started for it reads the
// facts instead of probing NVRTC with a compile. Called before a worker is started for a
// cache directory.
void record_toolchain_facts(Facts* store);

// Forgets the facts learnt, so that the next toolchain_facts() reads them from the cache it
// is given (or probes). References handed out stay valid. Through reset_process_state().
void reset_toolchain_facts();

// Real path of the libnvrtc in use (opened or not), and the toolkit root it belongs to.
std::string nvrtc_library_path();
std::string toolkit_root();

}  // namespace kjit
