// kjit info: library, NVRTC, driver and cuBLASLt versions, devices, cache location and state.
#include <cjson/cJSON.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "cli.h"

#if defined(KJIT_CLI_HAVE_CUBLASLT_VERSION) && __has_include(<kjit/gemm.h>)
#include <kjit/gemm.h>
#endif

namespace kjit_cli {
namespace {

const char* const kHelp =
    "Usage: kjit info [--json] [--cache-dir DIR]\n"
    "\n"
    "Print the kjit library version and file, the NVRTC version (with its build), the CUDA\n"
    "driver version, the cuBLASLt version when the library reports it, every CUDA device\n"
    "with its architecture, and the cache location and state. Parts that are unavailable\n"
    "(no driver, no GPU) are reported as such; that is not an error. The compile worker\n"
    "that serves the cache is shown (pid, uptime, compiles, crashes survived, PCH) when one\n"
    "runs; this command never starts one.\n"
    "\n"
    "Exit status: 0 ok; 2 usage; 3 the cache cannot be opened.\n";

std::string last_error_or(const char* fallback) {
  const char* e = kjit_last_error();
  return e && *e ? std::string(e) : std::string(fallback);
}

std::string driver_text(int v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

}  // namespace

int cmd_info(const std::vector<std::string>& args, Global& g) {
  const std::string cmd = "info";
  Parsed p = parse_args(cmd, args, {}, g);
  if (p.help) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (!p.positional.empty()) usage_error(cmd, "unexpected argument '" + p.positional[0] + "'");

  // Library.
  const std::string version = kjit_version_string();
  std::string lib_path = "?";
  Dl_info dl;
  int (*fn)(void) = &kjit_version;
  void* addr = nullptr;
  static_assert(sizeof addr == sizeof fn, "function and object pointers differ in size");
  std::memcpy(&addr, &fn, sizeof addr);
  if (dladdr(addr, &dl) != 0 && dl.dli_fname) {
    lib_path = dl.dli_fname;
  }

  // Toolchain. The cache is opened first so that the NVRTC build probe can be cached.
  CacheHolder cache;
  cache.p = open_cache(g, false);
  const char* nvrtc = nullptr;
  const kjit_status nvrtc_st = kjit_nvrtc_version(&nvrtc);
  const std::string nvrtc_text =
      nvrtc_st == KJIT_OK && nvrtc ? std::string(nvrtc) : "unavailable: " + last_error_or(kjit_status_string(nvrtc_st));

  int drv = 0;
  const kjit_status drv_st = kjit_driver_version(&drv);
  const std::string drv_error = drv_st == KJIT_OK ? "" : last_error_or(kjit_status_string(drv_st));

#ifdef KJIT_CLI_HAVE_CUBLASLT_VERSION
  size_t blas = 0;
  const kjit_status blas_st = kjit_cublaslt_version(&blas);
  std::string blas_text;
  if (blas_st == KJIT_OK) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%zu.%zu.%zu (%zu)", blas / 10000, (blas / 100) % 100,
                  blas % 100, blas);
    blas_text = buf;
  } else {
    blas_text = "unavailable: " + last_error_or(kjit_status_string(blas_st));
  }
#else
  const std::string blas_text = "not reported by this kjit version";
#endif

  // Devices.
  struct Dev {
    std::string name, arch;
  };
  std::vector<Dev> devices;
  int count = 0;
  const kjit_status count_st = kjit_device_count(&count);
  std::string dev_error = count_st == KJIT_OK ? "" : last_error_or(kjit_status_string(count_st));
  for (int d = 0; count_st == KJIT_OK && d < count; ++d) {
    Dev dev;
    char buf[256];
    dev.name = kjit_device_name(d, buf, sizeof buf) == KJIT_OK ? buf : "? (" + last_error_or("error") + ")";
    dev.arch = kjit_device_arch(d, buf, sizeof buf) == KJIT_OK ? buf : "? (" + last_error_or("error") + ")";
    devices.push_back(dev);
  }

  // Cache.
  kjit_cache_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  const kjit_status cs = kjit_cache_stats_get(cache.p, &s);
  if (cs != KJIT_OK) fail_status(cs, "cannot read the cache state");
  const std::string dir = kjit_cache_directory(cache.p);

  if (g.json) {
    JsonHolder j;
    j.p = cJSON_CreateObject();
    cJSON* lib = cJSON_AddObjectToObject(j.p, "library");
    cJSON_AddStringToObject(lib, "version", version.c_str());
    cJSON_AddNumberToObject(lib, "version_number", kjit_version());
    cJSON_AddNumberToObject(lib, "header_version", KJIT_VERSION);
    cJSON_AddStringToObject(lib, "path", lib_path.c_str());
    cJSON_AddStringToObject(j.p, "nvrtc", nvrtc_text.c_str());
    cJSON_AddStringToObject(j.p, "toolkit_include_path", kjit_toolkit_include_path());
    cJSON* d = cJSON_AddObjectToObject(j.p, "driver");
    if (drv_st == KJIT_OK) {
      cJSON_AddNumberToObject(d, "version", drv);
      cJSON_AddStringToObject(d, "version_string", driver_text(drv).c_str());
    } else {
      cJSON_AddNullToObject(d, "version");
      cJSON_AddStringToObject(d, "error", drv_error.c_str());
    }
    cJSON_AddStringToObject(j.p, "cublaslt", blas_text.c_str());
    cJSON* devs = cJSON_AddArrayToObject(j.p, "devices");
    for (size_t i = 0; i < devices.size(); ++i) {
      cJSON* o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "index", static_cast<double>(i));
      cJSON_AddStringToObject(o, "name", devices[i].name.c_str());
      cJSON_AddStringToObject(o, "arch", devices[i].arch.c_str());
      cJSON_AddItemToArray(devs, o);
    }
    if (!dev_error.empty()) cJSON_AddStringToObject(j.p, "devices_error", dev_error.c_str());
    cJSON* c = cJSON_AddObjectToObject(j.p, "cache");
    cJSON_AddStringToObject(c, "directory", dir.c_str());
    cJSON_AddStringToObject(c, "state", disk_state_name(s.disk_state));
    cJSON_AddStringToObject(c, "message", s.message);
    cJSON_AddNumberToObject(c, "entries", static_cast<double>(s.disk_entries));
    cJSON_AddNumberToObject(c, "bytes", static_cast<double>(s.disk_bytes));
    cJSON_AddNumberToObject(c, "max_size_bytes", static_cast<double>(s.max_size_bytes));
    add_worker_json(j.p, cache.p);
    print_json(j.p);
    return kExitOk;
  }
  std::printf("kjit        %s (%s)\n", version.c_str(), lib_path.c_str());
  if (kjit_version() != KJIT_VERSION) {
    std::printf("            note: this tool was built against kjit headers %d.%d.%d\n",
                KJIT_VERSION_MAJOR, KJIT_VERSION_MINOR, KJIT_VERSION_PATCH);
  }
  std::printf("NVRTC       %s\n", nvrtc_text.c_str());
  const std::string toolkit = kjit_toolkit_include_path();
  std::printf("toolkit     %s\n", toolkit.empty() ? "no headers found (set KJIT_CUDA_HOME)"
                                                   : toolkit.c_str());
  std::printf("CUDA driver %s\n",
              drv_st == KJIT_OK ? driver_text(drv).c_str() : ("unavailable: " + drv_error).c_str());
  std::printf("cuBLASLt    %s\n", blas_text.c_str());
  if (count_st != KJIT_OK) {
    std::printf("devices     none: %s\n", dev_error.c_str());
  } else if (devices.empty()) {
    std::printf("devices     none\n");
  } else {
    for (size_t i = 0; i < devices.size(); ++i) {
      std::printf("device %-4zu %s, %s\n", i, devices[i].name.c_str(), devices[i].arch.c_str());
    }
  }
  std::printf("cache       %s\n", dir.empty() ? "(no disk tier)" : dir.c_str());
  std::printf("            %s%s%s; %llu entries, %s of %s\n", disk_state_name(s.disk_state),
              s.message[0] ? ": " : "", s.message, static_cast<unsigned long long>(s.disk_entries),
              human_bytes(s.disk_bytes).c_str(), human_bytes(s.max_size_bytes).c_str());
  std::printf("worker      %s\n", worker_text(cache.p).c_str());
  return kExitOk;
}

}  // namespace kjit_cli
