// NVRTC, opened with dlopen on first need. A process that only gets hits from the cache
// never maps libnvrtc (about 100 MB of code whose loading and relocation cost more than
// ten milliseconds): the toolchain's identity and supported architectures come from the
// cache database, keyed by the library file that would be opened (toolchain.h).
//
// Which file: one already loaded in the process; else the first `libnvrtc.so.<major>`
// found in the directories the dynamic loader would search first for kjit itself
// ($LD_LIBRARY_PATH, kjit's RPATH/RUNPATH); else whatever dlopen() finds by name (the
// loader's cache and system directories), which then has to be opened to be named. The
// file named is the file opened: the prediction and the load cannot disagree.
#pragma once

#include <nvrtc.h>

#include <string>

namespace kjit {

#define KJIT_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)               \
  X(nvrtcGetErrorString)        \
  X(nvrtcGetNumSupportedArchs)  \
  X(nvrtcGetSupportedArchs)     \
  X(nvrtcCreateProgram)         \
  X(nvrtcDestroyProgram)        \
  X(nvrtcCompileProgram)        \
  X(nvrtcAddNameExpression)     \
  X(nvrtcGetLoweredName)        \
  X(nvrtcGetProgramLogSize)     \
  X(nvrtcGetProgramLog)         \
  X(nvrtcGetPTXSize)            \
  X(nvrtcGetPTX)                \
  X(nvrtcGetCUBINSize)          \
  X(nvrtcGetCUBIN)              \
  X(nvrtcGetLTOIRSize)          \
  X(nvrtcGetLTOIR)              \
  X(nvrtcSetFlowCallback)       \
  X(nvrtcGetPCHHeapSize)        \
  X(nvrtcSetPCHHeapSize)        \
  X(nvrtcGetPCHCreateStatus)    \
  X(nvrtcGetPCHHeapSizeRequired)

struct Nvrtc {
#define KJIT_NVRTC_DECLARE(name) decltype(&::name) name = nullptr;
  KJIT_NVRTC_FUNCTIONS(KJIT_NVRTC_DECLARE)
#undef KJIT_NVRTC_DECLARE
  std::string library;  // real path of the file opened
};

// NVRTC, opened on the first call (thread-safe). Throws kjit::Error(KJIT_ERROR_NVRTC,
// "libnvrtc.so.13 (NVRTC) cannot be used: ...", util/dl.h) when the library cannot be opened or
// lacks an entry point; the same error on every call.
const Nvrtc& nvrtc();

// True once nvrtc() has opened the library in this process.
bool nvrtc_loaded();

// Real path of the libnvrtc file nvrtc() opens (or opened), found without opening it
// where the loader's search allows; "" when no such file can be found.
std::string nvrtc_library_file();
// The same file as found, before its path is resolved (which costs a system call per path
// component): enough to stat it.
std::string nvrtc_library_as_named();

}  // namespace kjit
