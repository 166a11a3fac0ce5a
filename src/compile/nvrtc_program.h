// One NVRTC compilation: source + normalised options -> an entry or a failure.
#pragma once

#include <string>

#include "compile/compiler.h"
#include "compile/options.h"
#include "store/cache.h"

namespace kjit {

Outcome run_nvrtc(const std::string& source, const CompileOptions& opts,
                  const NormalisedOptions& norm, const std::string& key,
                  const std::string& toolchain, const CancelFlag& cancel);

}  // namespace kjit
