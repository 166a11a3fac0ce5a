// Where the dynamic loader finds a library, asked without loading it where possible: for
// the libraries kjit opens with dlopen on first use (NVRTC, nvJitLink), whose file must be
// named before it is opened (its identity is part of cache keys).
#pragma once

#include <string>

namespace kjit {

// Real path of the object `handle` (from dlopen) names; "" when unknown.
std::string loaded_library_path(void* handle);

// Real path of `soname` when it is already loaded in the process, else "".
std::string already_loaded(const char* soname);

// The file a dlopen(`soname`) from kjit would open, where it lies in a directory searched
// before the loader's cache ($LD_LIBRARY_PATH, kjit's RPATH/RUNPATH); its real path, or
// "" when only the loader knows (its cache, configured and default directories).
std::string search_before_loader_cache(const char* soname);

}  // namespace kjit
