#include "link/nvjitlink.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "store/facts.h"
#include "util/dl.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit::link {
namespace {

struct Loaded {
  NvJitLink lib;
  std::string error;  // non-empty when loading failed
};

std::atomic<bool> g_loaded{false};

struct BuildIdSearch {
  const void* address;  // an address inside the library
  std::string hex;
};

// The GNU build id of the loaded object that contains `address`, from its PT_NOTE segments.
int find_build_id(struct dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<BuildIdSearch*>(data);
  const auto addr = reinterpret_cast<ElfW(Addr)>(s->address);
  bool inside = false;
  for (int i = 0; i < info->dlpi_phnum && !inside; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    const ElfW(Addr) start = info->dlpi_addr + p.p_vaddr;
    inside = p.p_type == PT_LOAD && addr >= start && addr < start + p.p_memsz;
  }
  if (!inside) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& p = info->dlpi_phdr[i];
    if (p.p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(info->dlpi_addr + p.p_vaddr);
    const char* end = at + p.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) n;
      std::memcpy(&n, at, sizeof n);
      const char* name = at + sizeof n;
      const char* desc = name + ((n.n_namesz + 3) & ~3u);
      const char* next = desc + ((n.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char digits[] = "0123456789abcdef";
        for (uint32_t k = 0; k < n.n_descsz; ++k) {
          const auto b = static_cast<unsigned char>(desc[k]);
          s->hex += digits[b >> 4];
          s->hex += digits[b & 15];
        }
        return 1;
      }
      at = next;
    }
  }
  return 1;
}

std::string real_path_of(const void* address, const std::string& fallback) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || !info.dli_fname) return fallback;
  char buf[PATH_MAX];
  return realpath(info.dli_fname, buf) ? buf : info.dli_fname;
}

std::string identity_of(const NvJitLink& l, const void* address) {
  BuildIdSearch s{address, {}};
  dl_iterate_phdr(find_build_id, &s);
  std::string id = "nvJitLink " + std::to_string(l.major) + "." + std::to_string(l.minor);
  if (!s.hex.empty()) return id + " build-id:" + s.hex;
  struct stat st;
  if (::stat(l.library.c_str(), &st) == 0) {
    id += " size:" + std::to_string(st.st_size) + " mtime:" + std::to_string(st.st_mtim.tv_sec) +
          "." + std::to_string(st.st_mtim.tv_nsec);
  }
  return id;
}

constexpr const char* kSoname = "libnvJitLink.so.13";

// The file to open, when it is known without opening it: the one $KJIT_NVJITLINK_LIBRARY
// names; one already loaded; the first in $LD_LIBRARY_PATH or kjit's RPATH; the one beside
// a libnvrtc already loaded (the same toolkit). "" otherwise (the loader's cache decides).
std::string library_file() {
  const char* env = std::getenv("KJIT_NVJITLINK_LIBRARY");
  if (env && *env) return env;
  static const std::string found = [] {
    std::string f = already_loaded(kSoname);
    if (f.empty()) f = search_before_loader_cache(kSoname);
    if (f.empty()) {
      const std::string nvrtc = already_loaded("libnvrtc.so.13");
      const std::string beside = nvrtc.empty() ? "" : join_path(dirname_of(nvrtc), kSoname);
      if (!beside.empty() && is_regular_file(beside)) f = beside;
    }
    return f;
  }();
  return found;
}

const LibraryKind kNvJitLink = {"nvJitLink",
                                "set KJIT_NVJITLINK_LIBRARY to its path, or LD_LIBRARY_PATH"};

Loaded load() {
  Loaded out;
  const std::string file = library_file();
  // Kept open for the life of the process.
  OpenedLibrary lib(kNvJitLink, file.empty() ? kSoname : file);
#define KJIT_NVJITLINK_RESOLVE(member, symbol) lib.resolve(out.lib.member, #symbol);
  KJIT_NVJITLINK_FUNCTIONS(KJIT_NVJITLINK_RESOLVE)
#undef KJIT_NVJITLINK_RESOLVE
  if (lib.check_symbols("kjit needs nvJitLink 13") &&
      out.lib.version(&out.lib.major, &out.lib.minor) != NVJITLINK_SUCCESS) {
    lib.refuse("nvJitLinkVersion failed");
  }
  out.error = lib.error();
  if (!out.error.empty()) return out;
  const void* address = reinterpret_cast<const void*>(out.lib.create);
  out.lib.library = real_path_of(address, lib.file());
  out.lib.identity = identity_of(out.lib, address);
  log_debug("loaded " + out.lib.library + " (" + out.lib.identity + ")");
  return out;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r = load();
    if (r.error.empty()) g_loaded.store(true, std::memory_order_release);
    return r;
  }();
  return l;
}

}  // namespace

const NvJitLink& nvjitlink() {
  const Loaded& l = loaded();
  if (!l.error.empty()) fail(KJIT_ERROR_NVJITLINK, l.error);
  return l.lib;
}

void remember_identity(Facts* facts) {
  const std::string file = library_file();
  const std::string stat_id = file.empty() ? "" : file_identity(file);
  if (!facts || stat_id.empty() || !nvjitlink_loaded()) return;
  const NvJitLink& lib = nvjitlink();
  char buf[PATH_MAX];
  if (!realpath(file.c_str(), buf) || lib.library != buf) return;
  const std::string memo = "nvjitlink:" + file + ":" + stat_id;
  if (facts->get(memo) != lib.identity) facts->set(memo, lib.identity);
}

std::string nvjitlink_identity(Facts* facts) {
  const std::string file = library_file();
  const std::string stat_id = file.empty() ? "" : file_identity(file);
  if (stat_id.empty()) return nvjitlink().identity;
  const std::string memo = "nvjitlink:" + file + ":" + stat_id;
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find(memo);
    if (it != known.end()) return it->second;
  }
  std::optional<std::string> id;
  if (facts) id = facts->get(memo);
  if (!id || id->rfind("nvJitLink ", 0) != 0) {
    const NvJitLink& lib = nvjitlink();
    char buf[PATH_MAX];
    // Remembered only when the loaded library is that file.
    if (!realpath(file.c_str(), buf) || lib.library != buf) return lib.identity;
    id = lib.identity;
    if (facts) facts->set(memo, *id);
  }
  std::lock_guard<std::mutex> lock(mu);
  if (known.size() < 64) known[memo] = *id;
  return *id;
}

bool nvjitlink_loaded() noexcept {
  return g_loaded.load(std::memory_order_acquire);
}

const char* result_name(nvJitLinkResult r) noexcept {
  switch (r) {
    case NVJITLINK_SUCCESS:
      return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
      return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH:
      return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT:
      return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE:
      return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE:
      return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL:
      return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL:
      return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT:
      return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE:
      return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT:
      return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
      return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE:
      return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH:
      return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY:
      return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN:
      return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
      return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
      return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED:
      return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
  }
  return "NVJITLINK_ERROR_UNKNOWN";
}

}  // namespace kjit::link
