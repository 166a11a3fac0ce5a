#include "util/dl.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "util/fs.h"

namespace kjit {
namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// The object this code is part of (libkjit.so, or a program it is linked into statically),
// whose search path dlopen() from kjit uses.
void* own_object() {
  Dl_info info{};
  static int anchor;
  if (dladdr(&anchor, &info) == 0 || !info.dli_fname) return nullptr;
  void* self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  return self ? self : dlopen(nullptr, RTLD_LAZY);
}

}  // namespace

std::string loaded_library_path(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return real(map->l_name);
}

std::string already_loaded(const char* soname) {
  void* h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return "";
  std::string p = loaded_library_path(h);
  dlclose(h);
  return p;
}

std::string search_before_loader_cache(const char* soname) {
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
    // The loader's cache comes before the configured and default directories: from those
    // on, only dlopen() itself knows.
    if (p.dls_flags & (LA_SER_CONFIG | LA_SER_DEFAULT)) break;
    if (!p.dls_name || !*p.dls_name) continue;
    const std::string candidate = join_path(p.dls_name, soname);
    if (is_regular_file(candidate)) return real(candidate);
  }
  return "";
}

}  // namespace kjit
