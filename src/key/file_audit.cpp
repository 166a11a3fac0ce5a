#include "key/file_audit.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cuda/nvrtc_lib.h"
#include "key/include_scan.h"
#include "key/toolchain.h"
#include "util/error.h"
#include "util/log.h"

namespace kjit {

void record_open(const char* path, bool ok, bool write, bool directory);

namespace {

thread_local FileAudit* t_audit = nullptr;
// Opens (and program starts) by libnvrtc on threads that were not auditing.
std::atomic<unsigned long long> g_stray{0};
std::atomic<bool> g_disabled{false};

std::string absolute_at(int dirfd, const char* path) {
  if (path[0] == '/') return path;
  std::string base;
  if (dirfd == AT_FDCWD) {
    char buf[PATH_MAX];
    base = getcwd(buf, sizeof buf) ? buf : "";
  } else {
    char buf[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(dirfd);
    const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
    base = n > 0 ? std::string(buf, size_t(n)) : "";
  }
  return base.empty() ? std::string(path) : base + "/" + path;
}

bool write_only_mode(const char* mode) {
  return mode && (std::strchr(mode, 'w') || std::strchr(mode, 'a')) && !std::strchr(mode, '+');
}

// A subprocess or an unknown way of opening a file: nothing it reads can be audited.
void unauditable() {
  record_open("", false, false, false);
}

}  // namespace

void record_open(const char* path, bool ok, bool write, bool directory) {
  const int saved = errno;
  if (FileAudit* a = t_audit) {
    try {
      OpenedFile f;
      f.path = path && *path ? absolute_at(AT_FDCWD, path) : std::string();
      f.relative = path && *path && *path != '/';
      f.ok = ok;
      f.write = write;
      f.directory = directory;
      a->opened_.push_back(std::move(f));
    } catch (...) {
      a->stray_at_start_ = ~0ull;  // out of memory: the record is not whole
    }
  } else {
    g_stray.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved;
}

namespace {

void record_at(int dirfd, const char* path, bool ok, bool write) {
  const int saved = errno;
  if (!path) {
  } else if (dirfd == AT_FDCWD) {
    record_open(path, ok, write, false);  // relative stays relative to the working directory
  } else {
    record_open(absolute_at(dirfd, path).c_str(), ok, write, false);
  }
  errno = saved;
}

// The wrappers libnvrtc calls instead of the C library's functions. Each calls the
// function by its ordinary name, which resolves as libnvrtc's own import would have.
FILE* hook_fopen(const char* path, const char* mode) {
  FILE* f = std::fopen(path, mode);
  record_open(path, f != nullptr, write_only_mode(mode), false);
  return f;
}

FILE* hook_fopen64(const char* path, const char* mode) {
  FILE* f = fopen64(path, mode);
  record_open(path, f != nullptr, write_only_mode(mode), false);
  return f;
}

mode_t variadic_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(ap, int)) : 0;
}

int hook_open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = variadic_mode(flags, ap);
  va_end(ap);
  const int fd = ::open(path, flags, mode);
  record_open(path, fd >= 0, (flags & O_ACCMODE) == O_WRONLY, false);
  return fd;
}

int hook_open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = variadic_mode(flags, ap);
  va_end(ap);
  const int fd = open64(path, flags, mode);
  record_open(path, fd >= 0, (flags & O_ACCMODE) == O_WRONLY, false);
  return fd;
}

int hook_openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = variadic_mode(flags, ap);
  va_end(ap);
  const int fd = ::openat(dirfd, path, flags, mode);
  record_at(dirfd, path, fd >= 0, (flags & O_ACCMODE) == O_WRONLY);
  return fd;
}

int hook_open_2(const char* path, int flags) {
  const int fd = ::open(path, flags);
  record_open(path, fd >= 0, (flags & O_ACCMODE) == O_WRONLY, false);
  return fd;
}

DIR* hook_opendir(const char* path) {
  DIR* d = ::opendir(path);
  record_open(path, d != nullptr, false, true);
  return d;
}

FILE* hook_freopen(const char* path, const char* mode, FILE* stream) {
  FILE* f = std::freopen(path, mode, stream);
  if (path) record_open(path, f != nullptr, write_only_mode(mode), false);
  return f;
}

long hook_syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  const long r = ::syscall(number, a1, a2, a3, a4, a5, a6);
  const int saved = errno;
#ifdef SYS_open
  if (number == SYS_open) {
    record_open(reinterpret_cast<const char*>(a1), r >= 0, false, false);
  }
#endif
  if (number == SYS_openat) {
    record_at(int(a1), reinterpret_cast<const char*>(a2), r >= 0, (a3 & O_ACCMODE) == O_WRONLY);
  }
#ifdef SYS_openat2
  if (number == SYS_openat2) unauditable();
#endif
  errno = saved;
  return r;
}

int hook_execv(const char* path, char* const argv[]) {
  unauditable();
  return ::execv(path, argv);
}

int hook_execve(const char* path, char* const argv[], char* const envp[]) {
  unauditable();
  return ::execve(path, argv, envp);
}

int hook_execvp(const char* file, char* const argv[]) {
  unauditable();
  return ::execvp(file, argv);
}

// A child process's reads are its own: what it opens cannot be recorded here.
pid_t hook_fork() {
  unauditable();
  return ::fork();
}

int hook_system(const char* command) {
  unauditable();
  return std::system(command);
}

struct Target {
  const char* name;
  void* hook;
};

const Target kTargets[] = {
    {"fopen", reinterpret_cast<void*>(&hook_fopen)},
    {"fopen64", reinterpret_cast<void*>(&hook_fopen64)},
    {"freopen", reinterpret_cast<void*>(&hook_freopen)},
    {"open", reinterpret_cast<void*>(&hook_open)},
    {"open64", reinterpret_cast<void*>(&hook_open64)},
    {"openat", reinterpret_cast<void*>(&hook_openat)},
    {"openat64", reinterpret_cast<void*>(&hook_openat)},
    {"__open_2", reinterpret_cast<void*>(&hook_open_2)},
    {"__open64_2", reinterpret_cast<void*>(&hook_open_2)},
    {"opendir", reinterpret_cast<void*>(&hook_opendir)},
    {"syscall", reinterpret_cast<void*>(&hook_syscall)},
    {"execv", reinterpret_cast<void*>(&hook_execv)},
    {"execve", reinterpret_cast<void*>(&hook_execve)},
    {"execvp", reinterpret_cast<void*>(&hook_execvp)},
    {"system", reinterpret_cast<void*>(&hook_system)},
    {"fork", reinterpret_cast<void*>(&hook_fork)},
};

// Functions through which a library can open a file or start a program and that have no
// wrapper here: if libnvrtc imports one, its reads cannot be audited.
const char* const kUnaudited[] = {"creat",
                                  "creat64",
                                  "freopen64",
                                  "fdopendir",
                                  "scandir",
                                  "scandir64",
                                  "__openat_2",
                                  "__openat64_2",
                                  "popen",
                                  "posix_spawn",
                                  "posix_spawnp",
                                  "execl",
                                  "vfork",
                                  "clone",
                                  "execlp",
                                  "execle",
                                  "execvpe",
                                  "fexecve",
                                  "nftw",
                                  "ftw",
                                  "glob",
                                  "name_to_handle_at",
                                  "open_by_handle_at"};

#if defined(__x86_64__)
constexpr unsigned kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr unsigned kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#endif

struct Install {
  std::string library;  // real path of the libnvrtc in use
  bool found = false;
  int patched = 0;
  std::string problem;
};

#if defined(__x86_64__) || defined(__aarch64__)
int patch_library(dl_phdr_info* info, size_t, void* data) {
  auto* st = static_cast<Install*>(data);
  char real[PATH_MAX];
  if (!info->dlpi_name || !*info->dlpi_name || !realpath(info->dlpi_name, real) ||
      st->library != real) {
    return 0;
  }
  st->found = true;
  const ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Dyn)* dyn = nullptr;
  uintptr_t relro_begin = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_begin = base + ph.p_vaddr;
      relro_end = relro_begin + ph.p_memsz;
    }
  }
  if (!dyn) {
    st->problem = "no dynamic section";
    return 1;
  }
  ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
  size_t pltrelsz = 0, relasz = 0, strsz = 0;
  long pltrel = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = d->d_un.d_ptr;
        break;
      case DT_STRTAB:
        strtab = d->d_un.d_ptr;
        break;
      case DT_STRSZ:
        strsz = d->d_un.d_val;
        break;
      case DT_JMPREL:
        jmprel = d->d_un.d_ptr;
        break;
      case DT_PLTRELSZ:
        pltrelsz = d->d_un.d_val;
        break;
      case DT_PLTREL:
        pltrel = long(d->d_un.d_val);
        break;
      case DT_RELA:
        rela = d->d_un.d_ptr;
        break;
      case DT_RELASZ:
        relasz = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  // The loader usually rewrites these to addresses; where it does not, they are offsets.
  auto addr = [base](ElfW(Addr) p) { return p && p < base ? p + base : p; };
  symtab = addr(symtab);
  strtab = addr(strtab);
  jmprel = addr(jmprel);
  rela = addr(rela);
  if (!symtab || !strtab || (jmprel && pltrel != DT_RELA)) {
    st->problem = "unexpected relocation layout";
    return 1;
  }
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(symtab);
  const char* strs = reinterpret_cast<const char*>(strtab);
  const long page = sysconf(_SC_PAGESIZE);

  auto patch = [&](ElfW(Addr) table, size_t size) {
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; i < size / sizeof(ElfW(Rela)); ++i) {
      const unsigned type = unsigned(ELF64_R_TYPE(r[i].r_info));
      if (type != kJumpSlot && type != kGlobDat) continue;
      const ElfW(Sym)& sym = syms[ELF64_R_SYM(r[i].r_info)];
      if (sym.st_name >= strsz) continue;
      const char* name = strs + sym.st_name;
      for (const char* bad : kUnaudited) {
        if (std::strcmp(name, bad) == 0) st->problem = std::string("it imports ") + name;
      }
      for (const Target& t : kTargets) {
        if (std::strcmp(name, t.name) != 0) continue;
        void** slot = reinterpret_cast<void**>(base + r[i].r_offset);
        const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
        const bool read_only = at >= relro_begin && at < relro_end;
        void* first = reinterpret_cast<void*>(at & ~uintptr_t(page - 1));
        const size_t span =
            (at + sizeof(void*) > uintptr_t(first) + size_t(page)) ? 2 * page : page;
        if (read_only && mprotect(first, span, PROT_READ | PROT_WRITE) != 0) {
          st->problem = std::string("cannot make the import slot of ") + name + " writable";
          continue;
        }
        __atomic_store_n(slot, t.hook, __ATOMIC_RELEASE);
        if (read_only) mprotect(first, span, PROT_READ);
        ++st->patched;
      }
    }
  };
  if (jmprel) patch(jmprel, pltrelsz);
  if (rela) patch(rela, relasz);
  return 1;
}
#endif

bool install() {
#if defined(__x86_64__) || defined(__aarch64__)
  Install st;
  try {
    st.library = nvrtc().library;  // opened now, so that its imports can be patched
  } catch (const Error& e) {
    log_warn(std::string("the files NVRTC reads cannot be audited: ") + e.what());
    return false;
  }
  if (st.library.empty()) {
    log_warn("cannot locate libnvrtc: the files it reads cannot be audited");
    return false;
  }
  dl_iterate_phdr(patch_library, &st);
  if (!st.found) st.problem = "it is not among the loaded objects";
  if (st.patched == 0 && st.problem.empty()) st.problem = "none of its imports open files";
  if (!st.problem.empty()) {
    log_warn("cannot audit the files NVRTC reads (" + st.library + ": " + st.problem +
             "): results of programs that include files will not be cached");
    return false;
  }
  return true;
#else
  log_warn(
      "auditing the files NVRTC reads is not supported on this architecture: results of "
      "programs that include files will not be cached");
  return false;
#endif
}

}  // namespace

bool FileAudit::available() {
  static const bool ok = install();
  return ok && !g_disabled.load(std::memory_order_relaxed);
}

void FileAudit::disable_for_testing(bool disabled) {
  g_disabled = disabled;
}

FileAudit::FileAudit() : stray_at_start_(g_stray.load(std::memory_order_acquire)) {
  t_audit = this;
}

FileAudit::~FileAudit() {
  t_audit = nullptr;
}

bool FileAudit::whole() const {
  if (stray_at_start_ != g_stray.load(std::memory_order_acquire)) return false;
  for (const OpenedFile& f : opened_) {
    if (f.path.empty()) return false;  // a program start or an open that cannot be audited
  }
  return true;
}

}  // namespace kjit
