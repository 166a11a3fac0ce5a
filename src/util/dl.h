// The NVIDIA libraries kjit opens with dlopen on first need (NVRTC, the CUDA driver,
// cuBLASLt, nvJitLink): one way to open them and resolve their entry points, one shape for
// every message that says why one cannot be used, and where the dynamic loader finds a
// library, asked without loading it where possible (for NVRTC and nvJitLink, whose file
// must be named before it is opened: its identity is part of cache keys).
#pragma once

#include <string>

namespace kjit {

// Which library, for messages: its role and what a user can set to pick another file.
struct LibraryKind {
  const char* what;  // "NVRTC", "the CUDA driver", "cuBLASLt", "nvJitLink"
  const char* hint;  // "set KJIT_CUBLASLT_LIBRARY to its path, or LD_LIBRARY_PATH"
};

// The one shape of a library's failure: "<file> (<what>) cannot be used: <why>", and the
// kind's hint after "; " when `with_hint` (the file could not be opened at all).
std::string library_error(const LibraryKind& kind, const std::string& file, const std::string& why,
                          bool with_hint = false);

// A library opened with dlopen(RTLD_NOW | RTLD_LOCAL) for the life of the process (its
// symbols never leak into the host's namespace; its code stays mapped until exit). Not
// thread-safe: each library is loaded once, under its own once-flag.
class OpenedLibrary {
 public:
  // Opens `file` (a path, or a soname the loader searches for). error() says why not.
  OpenedLibrary(const LibraryKind& kind, std::string file);

  // Looks up `symbol` into `fn`; a missing one is remembered for lacking().
  template <typename Fn>
  void resolve(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(find(symbol));
  }

  // Fails the library when a resolved symbol was missing ("it lacks a, b" and `needs`,
  // e.g. "kjit needs nvJitLink 13"). Returns ok().
  bool check_symbols(const std::string& needs = "");
  // Fails the library for a reason found after opening it (a version too old...).
  void refuse(const std::string& why);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // library_error()'s shape
  const std::string& file() const { return file_; }
  void* handle() const { return handle_; }

 private:
  void* find(const char* symbol);

  LibraryKind kind_;
  std::string file_;
  void* handle_ = nullptr;
  std::string missing_;
  std::string error_;
};

// Real path of the object `handle` (from dlopen) names; "" when unknown.
std::string loaded_library_path(void* handle);

// Opens `soname` with dlopen(RTLD_NOW | RTLD_LOCAL) as the loader finds it and returns the
// real path of the file opened ("" when it cannot be opened). The handle is kept: the
// library stays loaded for the life of the process. For a library whose file only the
// loader can name (its system directories, an older cache).
std::string open_to_locate(const char* soname);

// Whether dlopen(`name`, RTLD_NOLOAD) finds `name` (a soname or a path) already loaded in
// the process; loads nothing (the reference it takes is dropped at once).
bool loader_has(const char* name);

// Real path of `soname` when it is already loaded in the process (an object whose soname it
// is: what dlopen(soname, RTLD_NOLOAD) returns, found without the loader's search), else "".
std::string already_loaded(const char* soname);

// The file a dlopen(`soname`) from kjit would open, where it lies in a directory searched
// before the loader's cache ($LD_LIBRARY_PATH, kjit's RPATH/RUNPATH); its real path, or
// "" when only the loader knows (its cache, configured and default directories).
std::string search_before_loader_cache(const char* soname);

// The file the loader's cache (`cache_file`, /etc/ld.so.cache) gives for `soname`, when that
// is certain from the file alone: glibc's current format, exactly one entry of that name,
// not specific to hardware capabilities, an existing file of this process's ELF class and
// machine. "" otherwise (then only dlopen() knows). Call it when
// search_before_loader_cache() found nothing: the loader looks in its cache next.
std::string find_in_loader_cache(const char* soname,
                                 const std::string& cache_file = "/etc/ld.so.cache");

// The file a dlopen(`soname`) from kjit would open where that is known without opening
// it: already_loaded(), else search_before_loader_cache(), else find_in_loader_cache(), but
// the path as found, not resolved (it may pass through symbolic links; stat() sees the same
// file). "" when only the loader knows.
std::string find_library_as_named(const char* soname);

}  // namespace kjit
