// nvJitLink, opened with dlopen on first need. Nothing in kjit links libnvJitLink: a process
// that never links never loads it, and libkjit loads on machines without it.
//
// The library is the file named by $KJIT_NVJITLINK_LIBRARY, else libnvJitLink.so.13 found
// as NVRTC is (already loaded, $LD_LIBRARY_PATH, kjit's RPATH), else beside a loaded
// libnvrtc, else as the dynamic loader finds it. <nvJitLink.h> is used for types
// only; its inline wrappers call versioned symbols (__nvJitLinkCreate_13_0 ...), which are
// the ones resolved here.
#pragma once

#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>

#include <string>

namespace kjit {
class Facts;  // store/facts.h
}

namespace kjit::link {

// (member, symbol) of every entry point kjit uses.
#define KJIT_NVJITLINK_FUNCTIONS(X)                        \
  X(create, __nvJitLinkCreate_13_0)                        \
  X(destroy, __nvJitLinkDestroy_13_0)                      \
  X(add_data, __nvJitLinkAddData_13_0)                     \
  X(complete, __nvJitLinkComplete_13_0)                    \
  X(linked_cubin_size, __nvJitLinkGetLinkedCubinSize_13_0) \
  X(linked_cubin, __nvJitLinkGetLinkedCubin_13_0)          \
  X(linked_ptx_size, __nvJitLinkGetLinkedPtxSize_13_0)     \
  X(linked_ptx, __nvJitLinkGetLinkedPtx_13_0)              \
  X(error_log_size, __nvJitLinkGetErrorLogSize_13_0)       \
  X(error_log, __nvJitLinkGetErrorLog_13_0)                \
  X(info_log_size, __nvJitLinkGetInfoLogSize_13_0)         \
  X(info_log, __nvJitLinkGetInfoLog_13_0)                  \
  X(version, nvJitLinkVersion)

struct NvJitLink {
#define KJIT_NVJITLINK_DECLARE(member, symbol) decltype(&::symbol) member = nullptr;
  KJIT_NVJITLINK_FUNCTIONS(KJIT_NVJITLINK_DECLARE)
#undef KJIT_NVJITLINK_DECLARE
  unsigned major = 0, minor = 0;  // nvJitLinkVersion()
  std::string library;            // the file that was opened (real path)
  // "nvJitLink 13.0 build-id:<hex>": version and the GNU build id of the loaded file (its
  // size and modification time when it has none). Part of every link key.
  std::string identity;
};

// nvJitLink, loaded once per process, thread-safe. Throws kjit::Error(KJIT_ERROR_NVJITLINK,
// "libnvJitLink.so.13 (nvJitLink) cannot be used: ...", util/dl.h) when the library cannot be
// opened or lacks an entry point; the same error is thrown on every call.
const NvJitLink& nvjitlink();

// NvJitLink::identity of the library a link would use, without loading it when this process
// or `facts` (a cache's; may be null) already know the identity of that file (by its path and
// stat() identity, as the NVRTC toolchain id is remembered): a cache hit of a link never pays
// nvJitLink's load (tens of milliseconds). Throws as nvjitlink() when it must load it.
std::string nvjitlink_identity(Facts* facts);

// After a link in this process: records the loaded library's identity in `facts` (may be
// null) for later processes' nvjitlink_identity(), when it is not there yet.
void remember_identity(Facts* facts);

// True once nvjitlink() has loaded the library in this process. Never loads it.
bool nvjitlink_loaded() noexcept;

// "NVJITLINK_ERROR_PTX_COMPILE".
const char* result_name(nvJitLinkResult r) noexcept;

}  // namespace kjit::link
