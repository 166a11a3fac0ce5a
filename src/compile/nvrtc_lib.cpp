#include "compile/nvrtc_lib.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "util/error.h"

#ifndef KJIT_NVRTC_SONAME
#error "KJIT_NVRTC_SONAME (libnvrtc.so.<major> of the toolkit built against) must be defined"
#endif

namespace kjit {
namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The object this code is part of (libkjit.so, or a program it is linked into statically),
// whose search path dlopen() uses.
void* own_object() {
  Dl_info info{};
  static int anchor;
  if (dladdr(&anchor, &info) == 0 || !info.dli_fname) return nullptr;
  void* self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  return self ? self : dlopen(nullptr, RTLD_LAZY);
}

// The file a dlopen(KJIT_NVRTC_SONAME) from here would open, where it is in a directory
// searched before the loader's cache: one of $LD_LIBRARY_PATH or kjit's RPATH/RUNPATH.
std::string search_before_cache() {
  void* self = own_object();
  if (!self) return "";
  Dl_serinfo size{};
  if (dlinfo(self, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof(Dl_serinfo)) {
    return "";
  }
  std::vector<unsigned char> buf(size.dls_size);
  auto* info = reinterpret_cast<Dl_serinfo*>(buf.data());
  *info = size;
  if (dlinfo(self, RTLD_DI_SERINFO, info) != 0) return "";
  for (unsigned i = 0; i < info->dls_cnt; ++i) {
    const Dl_serpath& p = info->dls_serpath[i];
    // The loader's cache comes before the configured and default directories: from
    // those on, only dlopen() itself knows.
    if (p.dls_flags & (LA_SER_CONFIG | LA_SER_DEFAULT)) break;
    if (!p.dls_name || !*p.dls_name) continue;
    const std::string candidate = std::string(p.dls_name) + "/" + KJIT_NVRTC_SONAME;
    if (is_file(candidate)) return real(candidate);
  }
  return "";
}

std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return real(map->l_name);
}

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

void load(State& s) {
  std::string path = nvrtc_library_file();
  const std::string name = path.empty() ? KJIT_NVRTC_SONAME : path;
  dlerror();
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    s.error = "cannot open NVRTC (" + name + "): " + (why ? why : "unknown dlopen error");
    return;
  }
  // Open for the life of the process: programs and the PCH heap live in it.
  s.api.library = path.empty() ? loaded_path(lib) : path;
  std::string missing;
#define KJIT_NVRTC_RESOLVE(fn)                                   \
  s.api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn)); \
  if (!s.api.fn) missing += missing.empty() ? #fn : ", " #fn;
  KJIT_NVRTC_FUNCTIONS(KJIT_NVRTC_RESOLVE)
#undef KJIT_NVRTC_RESOLVE
  if (!missing.empty()) {
    s.error = "cannot use NVRTC " + s.api.library + ": it lacks " + missing;
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

std::string nvrtc_library_file() {
  static const std::string file = [] {
    // Already in the process (linked by the program, or opened by another library).
    if (void* h = dlopen(KJIT_NVRTC_SONAME, RTLD_LAZY | RTLD_NOLOAD)) {
      std::string p = loaded_path(h);
      dlclose(h);
      if (!p.empty()) return p;
    }
    std::string p = search_before_cache();
    if (!p.empty()) return p;
    // Only the loader knows (its cache or system directories): open it to learn which.
    if (void* h = dlopen(KJIT_NVRTC_SONAME, RTLD_NOW | RTLD_LOCAL)) return loaded_path(h);
    return std::string();
  }();
  return file;
}

}  // namespace kjit
