// Built-in standard headers: <cstdint>, <cmath>, <type_traits>, <cstdio> ... for device
// code, so that kernels written for nvcc compile unchanged. A program that includes one of
// them and finds no file of that name on its own include paths (nor an in-memory header of
// that name) is given kjit's text as an in-memory header, and a program whose includes
// reach the toolkit's headers (which include them too) is given every one that no file
// shadows (include_scan.h decides which).
// Most build on libcu++ (cuda::std, in the toolkit's CCCL) and expose the std:: names;
// they need the toolkit's include directories. The option string "--no-builtin-std"
// turns them off (options.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kjit {

struct BuiltinHeader {
  const char* name;       // as included: "cstdint", "sys/time.h"
  std::string_view text;  // the header
};

// Every built-in header, sorted by name (builtin_std_text.cpp).
const std::vector<BuiltinHeader>& builtin_std_texts();

// The text of the built-in header `name`, or nullptr when there is none.
const std::string_view* builtin_std_header(const std::string& name);

// The version of the built-in set: a revision number and a digest of every name and
// text. In the key of every program that uses a built-in header, and only of those.
const std::string& builtin_std_version();

// `opts` with the built-in headers `names` added as in-memory headers.
struct CompileOptions;
CompileOptions with_builtin_std(const CompileOptions& opts, const std::vector<std::string>& names);

// The NVRTC option given with the built-in headers `names`: "-D__KJIT_BUILTIN_STD=0x..."
// (a digest of the set's version and the names), so that a precompiled header made with
// other in-memory headers is not used (NVRTC takes a PCH only for the same options).
std::string builtin_std_marker(const std::vector<std::string>& names);

// The option string that turns the built-in headers off (kjit consumes it; NVRTC never
// sees it).
inline constexpr const char kNoBuiltinStdOption[] = "--no-builtin-std";

}  // namespace kjit
