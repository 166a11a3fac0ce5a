#include "util/dl.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/fs.h"

namespace kjit {
namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// The object this code is part of (libkjit.so, or a program it is linked into statically),
// whose search path dlopen() from kjit uses: its link map, which is the handle dlopen()
// returns for it in glibc (asking dlopen() by file name would open the file of a program).
void* own_object() {
  Dl_info info{};
  link_map* map = nullptr;
  static int anchor;
  if (dladdr1(&anchor, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || !map) {
    return nullptr;
  }
  return map;
}

// The class and machine of an ELF file (bytes 4 and 18-19 of its header), 0 if unreadable.
int elf_kind(const std::string& path) {
  unsigned char h[20] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, h, sizeof h);
  ::close(fd);
  if (n != ssize_t(sizeof h) || h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F') return 0;
  return h[4] << 16 | h[19] << 8 | h[18];
}

// DT_SONAME of an object in the process, read from its dynamic section in memory; nullptr
// when it has none.
const char* soname_of(const dl_phdr_info& info) {
  const ElfW(Dyn)* dyn = nullptr;
  for (ElfW(Half) i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
    }
  }
  if (!dyn) return nullptr;
  ElfW(Addr) strtab = 0;
  ElfW(Xword) name = 0;
  bool has_name = false;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_STRTAB) strtab = dyn->d_un.d_ptr;
    if (dyn->d_tag == DT_SONAME) {
      name = dyn->d_un.d_val;
      has_name = true;
    }
  }
  if (!has_name || strtab == 0) return nullptr;
  // The loader makes the string table's address absolute in place where the section is
  // writable; where it is not (the vDSO, read-only dynamic sections) it stays relative to
  // the object's base.
  if (strtab < info.dlpi_addr) strtab += info.dlpi_addr;
  return reinterpret_cast<const char*>(strtab + name);
}

// The functions below as they find the file: its path as named (by the loader, the search
// path or the loader's cache), maybe through symbolic links.
std::string loader_cache_as_named(const char* soname, const std::string& cache_file) {
  // glibc's format since 2.32 (written alone by default): a 48-byte header (magic
  // "glibc-ld.so.cache1.1", the entry count, the string table's length...), then entries of
  // 24 bytes (flags, key and value as offsets from the start of the file, an unused word,
  // hwcap), then the strings. Older layouts are left to dlopen().
  const std::optional<std::string> data = read_file(cache_file);
  static constexpr char kMagic[] = "glibc-ld.so.cache1.1";
  if (!data || data->size() < 48 || data->compare(0, 20, kMagic) != 0) return "";
  const std::string& d = *data;
  const auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(d[at + size_t(i)]);
    return v;
  };
  const auto text = [&](uint32_t at) -> std::string {
    if (at >= d.size()) return "";
    const size_t end = d.find('\0', at);
    return end == std::string::npos ? "" : d.substr(at, end - at);
  };
  const uint32_t count = u32(20);
  if (count > (d.size() - 48) / 24) return "";
  std::string found;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t e = 48 + size_t(i) * 24;
    if (text(u32(e + 4)) != soname) continue;
    // A second entry (another architecture, a glibc-hwcaps variant) or a hwcap-specific one:
    // which the loader takes depends on more than this file says.
    if (!found.empty() || u32(e + 16) != 0 || u32(e + 20) != 0) return "";
    found = text(u32(e + 8));
    if (found.empty()) return "";
  }
  if (found.empty() || !is_regular_file(found)) return "";
  // The loader skips an entry of another class or machine.
  const int own = elf_kind("/proc/self/exe");
  return own != 0 && elf_kind(found) == own ? found : "";
}

std::string loaded_as_named(const char* soname) {
  // What dlopen(soname, RTLD_NOLOAD) answers, without its search: the loader returns an
  // object in the process that has `soname` as its soname or was loaded under that name, or
  // that is the same file as the one its search finds. For the libraries kjit looks for, each
  // built with its soname, that is the object of that soname. Asking the loader costs its
  // search (it opens the file it finds to compare), tens of microseconds in a process with a
  // long search path.
  struct Search {
    const char* soname;
    std::string file;
  } search{soname, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (!info->dlpi_name || !*info->dlpi_name) return 0;  // the program itself
        const char* name = soname_of(*info);
        if (!name || std::strcmp(name, s->soname) != 0) return 0;
        s->file = info->dlpi_name;
        return 1;
      },
      &search);
  return search.file;
}

std::string search_as_named(const char* soname) {
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
    if (is_regular_file(candidate)) return candidate;
  }
  return "";
}

std::string real_or_empty(const std::string& path) {
  return path.empty() ? path : real(path);
}

}  // namespace

std::string find_in_loader_cache(const char* soname, const std::string& cache_file) {
  return real_or_empty(loader_cache_as_named(soname, cache_file));
}

std::string loaded_library_path(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return real(map->l_name);
}

std::string open_to_locate(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  return h ? loaded_library_path(h) : std::string();
}

bool loader_has(const char* name) {
  void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  dlclose(h);
  return true;
}

std::string already_loaded(const char* soname) {
  return real_or_empty(loaded_as_named(soname));
}

std::string search_before_loader_cache(const char* soname) {
  return real_or_empty(search_as_named(soname));
}

std::string find_library_as_named(const char* soname) {
  std::string p = loaded_as_named(soname);
  if (p.empty()) p = search_as_named(soname);
  if (p.empty()) p = loader_cache_as_named(soname, "/etc/ld.so.cache");
  return p;
}

std::string library_error(const LibraryKind& kind, const std::string& file, const std::string& why,
                          bool with_hint) {
  std::string out = file + " (" + kind.what + ") cannot be used: " + why;
  if (with_hint && kind.hint && *kind.hint) out += std::string("; ") + kind.hint;
  return out;
}

OpenedLibrary::OpenedLibrary(const LibraryKind& kind, std::string file)
    : kind_(kind), file_(std::move(file)) {
  dlerror();
  handle_ = dlopen(file_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_) return;
  // dlerror() starts with the path ("PATH: cannot open shared object file..."): said once.
  const char* e = dlerror();
  std::string why = e ? e : "unknown dlopen error";
  if (why.compare(0, file_.size() + 2, file_ + ": ") == 0) why.erase(0, file_.size() + 2);
  error_ = library_error(kind_, file_, why, /*with_hint=*/true);
}

void* OpenedLibrary::find(const char* symbol) {
  void* p = handle_ ? dlsym(handle_, symbol) : nullptr;
  if (!p && handle_) missing_ += (missing_.empty() ? "" : ", ") + std::string(symbol);
  return p;
}

bool OpenedLibrary::check_symbols(const std::string& needs) {
  if (ok() && !missing_.empty()) {
    refuse("it lacks " + missing_ + (needs.empty() ? "" : " (" + needs + ")"));
  }
  return ok();
}

void OpenedLibrary::refuse(const std::string& why) {
  if (ok()) error_ = library_error(kind_, file_, why);
}

}  // namespace kjit
