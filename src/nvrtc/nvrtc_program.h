// One NVRTC compilation: source + normalised options -> an entry or a failure.
#pragma once

#include <string>

#include "key/file_audit.h"
#include "nvrtc/options.h"
#include "nvrtc/pch.h"
#include "store/outcome.h"
#include "util/cancel.h"

namespace kjit {

// Adds to a failed compile's log (and message) a "kjit: note:" on its cause where kjit
// knows it: a standard header NVRTC lacks (and the toolkit header that wants it), a
// built-in one turned off, C++14 under libcu++, a toolkit header that is host code, an
// nvcc-only flag NVRTC's log asks for. Needs the request's options as the client has them.
void add_failure_note(const NormalisedOptions& norm, Outcome* o);

// With a PCH ticket, its options are added and what NVRTC did with the PCH is reported
// to it (Outcome::pch); PCH trouble never fails the compile (it is run again without).
Outcome run_nvrtc(const std::string& source, const CompileOptions& opts,
                  const NormalisedOptions& norm, const std::string& key,
                  const std::string& toolchain, const CancelFlag& cancel, PchTicket* pch = nullptr);

// One audited NVRTC run, as the compiler does it in this process and the compile worker
// does it in its own: precompiled headers when `use_pch`, the opens of libnvrtc recorded in
// *audit, with the inputs of a PCH the compile used (pch.h) and a doubt when a PCH was used
// whose inputs are not known. Callers check the record with the scan of the request (fail
// closed).
Outcome compile_audited(const std::string& source, const CompileOptions& opts,
                        const NormalisedOptions& norm, const std::string& key,
                        const std::string& toolchain, const CancelFlag& cancel, bool use_pch,
                        AuditRecord* audit);

}  // namespace kjit
