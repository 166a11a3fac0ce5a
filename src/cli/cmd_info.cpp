// kjit info: library, NVRTC, driver and cuBLASLt versions, devices, cache location and state.
#include <cjson/cJSON.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "cli.h"
#include "key/builtin_std.h"

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
    "(no driver, no GPU, no cache yet, an unusable cache) are reported as such; that is\n"
    "not an error. The compile worker that serves the cache is shown (pid, uptime,\n"
    "compiles, crashes survived, PCH) when one runs; this command never starts one, and\n"
    "never creates the cache.\n"
    "\n"
    "Exit status: 0 ok, whatever it finds; 2 usage; 3 other error (output not written).\n";

std::string last_error_or(const char* fallback) {
  const char* e = kjit_last_error();
  return e && *e ? std::string(e) : std::string(fallback);
}

std::string driver_text(int v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

// What `kjit info` reports, gathered before anything is printed.
struct Info {
  std::string version, lib_path = "?";
  std::string nvrtc;  // version, or "unavailable: why"
  kjit_status driver_status = KJIT_OK;
  int driver = 0;
  std::string driver_error;
  std::string cublaslt;  // version, or why not
  struct Device {
    std::string name, arch;
  };
  std::vector<Device> devices;
  kjit_status devices_status = KJIT_OK;
  std::string devices_error;
  std::string cache_dir;
  bool cache_exists = false;  // false: no database yet (nothing is created)
  kjit_cache_stats stats{};
};

std::string library_path() {
  Dl_info dl;
  int (*fn)(void) = &kjit_version;
  void* addr = nullptr;
  static_assert(sizeof addr == sizeof fn, "function and object pointers differ in size");
  std::memcpy(&addr, &fn, sizeof addr);
  return dladdr(addr, &dl) != 0 && dl.dli_fname ? dl.dli_fname : "?";
}

std::string cublaslt_text() {
#ifdef KJIT_CLI_HAVE_CUBLASLT_VERSION
  size_t blas = 0;
  const kjit_status st = kjit_cublaslt_version(&blas);
  if (st != KJIT_OK) return "unavailable: " + last_error_or(kjit_status_string(st));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu.%zu.%zu (%zu)", blas / 10000, (blas / 100) % 100, blas % 100,
                blas);
  return buf;
#else
  return "not reported by this kjit version";
#endif
}

void gather_toolchain(Info* in) {
  const char* nvrtc = nullptr;
  const kjit_status nvrtc_st = kjit_nvrtc_version(&nvrtc);
  in->nvrtc = nvrtc_st == KJIT_OK && nvrtc
                  ? std::string(nvrtc)
                  : "unavailable: " + last_error_or(kjit_status_string(nvrtc_st));
  in->driver_status = kjit_driver_version(&in->driver);
  if (in->driver_status != KJIT_OK) {
    in->driver_error = last_error_or(kjit_status_string(in->driver_status));
  }
  in->cublaslt = cublaslt_text();
  int count = 0;
  in->devices_status = kjit_device_count(&count);
  if (in->devices_status != KJIT_OK) {
    in->devices_error = last_error_or(kjit_status_string(in->devices_status));
  }
  for (int d = 0; in->devices_status == KJIT_OK && d < count; ++d) {
    Info::Device dev;
    char buf[256];
    dev.name = kjit_device_name(d, buf, sizeof buf) == KJIT_OK
                   ? buf
                   : "? (" + last_error_or("error") + ")";
    dev.arch = kjit_device_arch(d, buf, sizeof buf) == KJIT_OK
                   ? buf
                   : "? (" + last_error_or("error") + ")";
    in->devices.push_back(dev);
  }
}

void print_info_json(const Info& in, kjit_cache* cache) {
  JsonHolder j;
  j.p = new_document("kjit.info");
  cJSON* lib = cJSON_AddObjectToObject(j.p, "library");
  cJSON_AddStringToObject(lib, "version", in.version.c_str());
  cJSON_AddNumberToObject(lib, "version_number", kjit_version());
  cJSON_AddNumberToObject(lib, "header_version", KJIT_VERSION);
  cJSON_AddStringToObject(lib, "path", in.lib_path.c_str());
  cJSON_AddStringToObject(j.p, "nvrtc", in.nvrtc.c_str());
  cJSON_AddStringToObject(j.p, "toolkit_include_path", kjit_toolkit_include_path());
  cJSON* std_headers = cJSON_AddArrayToObject(j.p, "builtin_std_headers");
  for (const kjit::BuiltinHeader& h : kjit::builtin_std_texts()) {
    cJSON_AddItemToArray(std_headers, cJSON_CreateString(h.name));
  }
  cJSON* d = cJSON_AddObjectToObject(j.p, "driver");
  if (in.driver_status == KJIT_OK) {
    cJSON_AddNumberToObject(d, "version", in.driver);
    cJSON_AddStringToObject(d, "version_string", driver_text(in.driver).c_str());
  } else {
    cJSON_AddNullToObject(d, "version");
    cJSON_AddStringToObject(d, "error", in.driver_error.c_str());
  }
  cJSON_AddStringToObject(j.p, "cublaslt", in.cublaslt.c_str());
  cJSON* devs = cJSON_AddArrayToObject(j.p, "devices");
  for (size_t i = 0; i < in.devices.size(); ++i) {
    cJSON* o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", static_cast<double>(i));
    cJSON_AddStringToObject(o, "name", in.devices[i].name.c_str());
    cJSON_AddStringToObject(o, "arch", in.devices[i].arch.c_str());
    cJSON_AddItemToArray(devs, o);
  }
  if (!in.devices_error.empty())
    cJSON_AddStringToObject(j.p, "devices_error", in.devices_error.c_str());
  const kjit_cache_stats& s = in.stats;
  cJSON* c = cJSON_AddObjectToObject(j.p, "cache");
  cJSON_AddStringToObject(c, "directory", in.cache_dir.c_str());
  cJSON_AddStringToObject(c, "state", in.cache_exists ? disk_state_name(s.disk_state) : "absent");
  cJSON_AddStringToObject(c, "message", in.cache_exists ? s.message : "no cache database yet");
  cJSON_AddNumberToObject(c, "entries", static_cast<double>(s.disk_entries));
  cJSON_AddNumberToObject(c, "bytes", static_cast<double>(s.disk_bytes));
  cJSON_AddNumberToObject(c, "max_size_bytes", static_cast<double>(s.max_size_bytes));
  add_worker_json(j.p, cache);
  print_json(j.p);
}

// The built-in standard headers, wrapped to the width of the other lines.
void print_builtin_std() {
  const std::string indent(12, ' ');
  std::string line = "std headers";  // 11 columns: each name adds a space before it
  for (const kjit::BuiltinHeader& h : kjit::builtin_std_texts()) {
    if (line.size() + 1 + std::strlen(h.name) > 90) {
      std::printf("%s\n", line.c_str());
      line = indent.substr(1);
    }
    line += std::string(" ") + h.name;
  }
  std::printf("%s\n", line.c_str());
  std::printf("%s(built in, used where no file of the name is found; --no-builtin-std)\n",
              indent.c_str());
}

void print_info_text(const Info& in, kjit_cache* cache) {
  std::printf("kjit        %s (%s)\n", in.version.c_str(), in.lib_path.c_str());
  if (kjit_version() != KJIT_VERSION) {
    std::printf("            note: this tool was built against kjit headers %d.%d.%d\n",
                KJIT_VERSION_MAJOR, KJIT_VERSION_MINOR, KJIT_VERSION_PATCH);
  }
  std::printf("NVRTC       %s\n", in.nvrtc.c_str());
  const std::string toolkit = kjit_toolkit_include_path();
  std::printf("toolkit     %s\n",
              toolkit.empty() ? "no headers found (set KJIT_CUDA_HOME)" : toolkit.c_str());
  print_builtin_std();
  std::printf("CUDA driver %s\n", in.driver_status == KJIT_OK
                                      ? driver_text(in.driver).c_str()
                                      : ("unavailable: " + in.driver_error).c_str());
  std::printf("cuBLASLt    %s\n", in.cublaslt.c_str());
  if (in.devices_status != KJIT_OK) {
    std::printf("devices     none: %s\n", in.devices_error.c_str());
  } else if (in.devices.empty()) {
    std::printf("devices     none\n");
  } else {
    for (size_t i = 0; i < in.devices.size(); ++i) {
      std::printf("device %-4zu %s, %s\n", i, in.devices[i].name.c_str(),
                  in.devices[i].arch.c_str());
    }
  }
  std::printf("cache       %s\n", in.cache_dir.empty() ? "(no disk tier)" : in.cache_dir.c_str());
  const kjit_cache_stats& s = in.stats;
  if (!in.cache_exists) {
    std::printf("            absent: nothing has been stored there yet\n");
  } else {
    std::printf("            %s%s%s; %llu entries, %s of %s\n", disk_state_name(s.disk_state),
                s.message[0] ? ": " : "", s.message,
                static_cast<unsigned long long>(s.disk_entries), human_bytes(s.disk_bytes).c_str(),
                human_bytes(s.max_size_bytes).c_str());
  }
  std::printf("worker      %s\n", worker_text(cache).c_str());
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
  Info in;
  in.version = kjit_version_string();
  in.lib_path = library_path();
  // Only reads: a cache that does not exist is reported as absent, not created. An
  // existing one is opened first so that the NVRTC build probe can be cached.
  CacheHolder cache;
  cache.p = open_cache_if_present(g, &in.cache_dir);
  in.cache_exists = cache.p != nullptr;
  gather_toolchain(&in);
  if (cache.p) {
    in.stats = read_cache_stats(cache.p);
    in.cache_dir = kjit_cache_directory(cache.p);
  }
  if (g.json) {
    print_info_json(in, cache.p);
  } else {
    print_info_text(in, cache.p);
  }
  return kExitOk;
}

}  // namespace kjit_cli
