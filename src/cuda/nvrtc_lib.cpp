#include "cuda/nvrtc_lib.h"

#include <atomic>
#include <mutex>

#include "util/dl.h"
#include "util/error.h"
#include "util/fs.h"

#ifndef KJIT_NVRTC_SONAME
#error "KJIT_NVRTC_SONAME (libnvrtc.so.<major> of the toolkit built against) must be defined"
#endif

namespace kjit {
namespace {

struct State {
  std::once_flag once;
  Nvrtc api;
  std::string error;
  std::atomic<bool> loaded{false};
};

State& state() {
  static State s;
  return s;
}

const LibraryKind kNvrtc = {"NVRTC", "put the CUDA toolkit's lib64 directory on LD_LIBRARY_PATH"};

void load(State& s) {
  const std::string path = nvrtc_library_file();
  // Open for the life of the process: programs and the PCH heap live in it.
  OpenedLibrary lib(kNvrtc, path.empty() ? KJIT_NVRTC_SONAME : path);
  if (!lib.ok()) {
    s.error = lib.error();
    return;
  }
  s.api.library = path.empty() ? loaded_library_path(lib.handle()) : path;
#define KJIT_NVRTC_RESOLVE(fn) lib.resolve(s.api.fn, #fn);
  KJIT_NVRTC_FUNCTIONS(KJIT_NVRTC_RESOLVE)
#undef KJIT_NVRTC_RESOLVE
  if (!lib.check_symbols()) {
    s.error = lib.error();
    return;
  }
  s.loaded = true;
}

}  // namespace

const Nvrtc& nvrtc() {
  State& s = state();
  std::call_once(s.once, [&s] { load(s); });
  if (!s.error.empty()) fail(KJIT_ERROR_NVRTC, s.error);
  return s.api;
}

bool nvrtc_loaded() {
  return state().loaded.load();
}

std::string nvrtc_library_as_named() {
  static const std::string file = [] {
    // Already in the process (linked by the program, or opened by another library), on the
    // search path, or where the toolkit's directory is in the loader's cache (as CUDA's
    // packages set it up): reading the cache costs microseconds, opening NVRTC milliseconds.
    std::string p = find_library_as_named(KJIT_NVRTC_SONAME);
    if (!p.empty()) return p;
    // Only the loader knows (its system directories, an older cache): open it to learn which.
    return open_to_locate(KJIT_NVRTC_SONAME);
  }();
  return file;
}

std::string nvrtc_library_file() {
  static const std::string file = [] {
    const std::string p = nvrtc_library_as_named();
    return p.empty() ? p : resolve_path(p);
  }();
  return file;
}

}  // namespace kjit
