// The process-wide state that can be forgotten, in one list (process_state.cpp), with one
// reset. Each part learns itself lazily on first use; reset_process_state() makes every one
// learn again, so that a memo bound to the first cache a process used (the toolchain facts,
// the toolkits) does not answer for the next. Tests use it between caches.
//
// The list (kProcessState):
//   switches         util/switches.h   KJIT_PCH, read once
//   toolchain facts  key/toolchain.h   NVRTC's identity and architectures, read from the
//                                      first cache given (or probed)
//   toolkits         key/toolkit.h     find_toolkit(): the automatic toolkit and those of
//                                      explicit roots, read from the first cache given
//
// Process-wide state that is not in the list, because it is a fact of the process that no
// cache or setting changes, or because it must outlive every user: the loaded libraries
// (nvrtc/nvrtc_lib, cuda/driver, blas/lt, link/nvjitlink, util/dl), their paths and the
// toolkit root (key/toolchain.h: toolkit_root), the builtin headers' tables
// (key/builtin_std), the log sink (util/log), the file-audit hooks and the files seen
// (key/file_audit, key/inputs), include scans by content (key/include_scan), the device
// tables (cuda/device), loaded modules and kernel parameter memos (kernel/), the PCH slots
// (compile/pch: PCHs in use by compiles), the worker client's crash memory
// (worker/client), live claims (store/claims), kjit_nvrtc_version()'s string.
#pragma once

namespace kjit {

// Forgets every part of the list. Not to be called while another thread compiles: the
// parts are learnt again by the next user. References handed out before stay valid.
void reset_process_state();

}  // namespace kjit
