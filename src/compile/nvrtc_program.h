// One NVRTC compilation: source + normalised options -> an entry or a failure.
#pragma once

#include <string>

#include "compile/compiler.h"
#include "compile/options.h"
#include "compile/pch.h"
#include "store/outcome.h"

namespace kjit {

// With a PCH ticket, its options are added and what NVRTC did with the PCH is reported
// to it (Outcome::pch); PCH trouble never fails the compile (it is run again without).
Outcome run_nvrtc(const std::string& source, const CompileOptions& opts,
                  const NormalisedOptions& norm, const std::string& key,
                  const std::string& toolchain, const CancelFlag& cancel, PchTicket* pch = nullptr);

}  // namespace kjit
