#include "compile/toolchain.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <vector>

#include "store/cache.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit {
namespace {

const std::vector<int>& supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    std::vector<int> out;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      out.resize(size_t(n));
      if (nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
    }
    return out;
  }();
  return archs;
}

// Compiles a tiny program to PTX and reads the build number and compiler build id.
std::string probe_toolchain() {
  const char* src =
      "__device__ unsigned kjit_build = __CUDACC_VER_BUILD__ + 1000000u;\n";
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src, "kjit_probe.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    fail(KJIT_ERROR_NVRTC, std::string("NVRTC probe: nvrtcCreateProgram failed: ") +
                               nvrtcGetErrorString(r));
  }
  const std::vector<int>& archs = supported_archs();
  const std::string arch = "-arch=compute_" + std::to_string(archs.empty() ? 75 : archs.front());
  const char* opts[] = {arch.c_str()};
  r = nvrtcCompileProgram(prog, 1, opts);
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetPTXSize(prog, &size);
    ptx.resize(size);
    nvrtcGetPTX(prog, ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    fail(KJIT_ERROR_NVRTC, std::string("NVRTC probe compile failed: ") + nvrtcGetErrorString(r));
  }
  auto value = [&](const char* var) -> std::string {
    std::smatch m;
    const std::regex re(std::string(var) + " = ([0-9]+);");
    return std::regex_search(ptx, m, re) ? m[1].str() : "?";
  };
  // The build number is stored offset so that it is never zero (zero-initialised
  // variables have no initialiser in PTX).
  const std::string build = value("kjit_build");
  std::string id = "nvrtc " + nvrtc_version_short() + "." +
                   (build == "?" ? build : std::to_string(std::stoul(build) - 1000000u));
  std::smatch m;
  if (std::regex_search(ptx, m, std::regex("Compiler Build ID: (CL-[0-9]+)"))) {
    id += " " + m[1].str();
  }
  return id;
}

}  // namespace

std::string nvrtc_version_short() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_library_path() {
  static const std::string path = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) == 0 || !info.dli_fname) {
      return std::string();
    }
    char buf[PATH_MAX];
    return std::string(realpath(info.dli_fname, buf) ? buf : info.dli_fname);
  }();
  return path;
}

std::string toolkit_root() {
  static const std::string root = [] {
    std::string lib = nvrtc_library_path();
    if (lib.empty()) return std::string();
    const size_t targets = lib.find("/targets/");
    if (targets != std::string::npos) return lib.substr(0, targets);
    // <root>/lib64/libnvrtc.so -> <root>
    return dirname_of(dirname_of(lib));
  }();
  return root;
}

std::string toolchain_id(Cache* cache) {
  static std::mutex mu;
  static std::string id;
  std::lock_guard<std::mutex> lock(mu);
  if (!id.empty()) return id;
  const std::string lib = nvrtc_library_path();
  const std::string memo = "toolchain:" + lib + ":" + file_identity(lib);
  if (cache && !lib.empty()) {
    if (auto v = cache->get_meta(memo)) {
      id = *v;
      return id;
    }
  }
  id = probe_toolchain();
  log_debug("NVRTC toolchain: " + id + " (" + lib + ")");
  if (cache && !lib.empty()) cache->set_meta(memo, id);
  return id;
}

bool arch_supported(int arch) {
  for (int a : supported_archs()) {
    if (a == arch) return true;
  }
  return false;
}

std::string supported_archs_text() {
  std::string out;
  for (int a : supported_archs()) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return out.empty() ? "(none reported by NVRTC)" : out;
}

}  // namespace kjit
