#include "key/toolchain.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <vector>

#include "cuda/nvrtc_lib.h"
#include "store/facts.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"

namespace kjit {
namespace {

std::vector<int> archs_from_nvrtc() {
  const Nvrtc& api = nvrtc();
  int n = 0;
  std::vector<int> out;
  if (api.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    out.resize(size_t(n));
    if (api.nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
  }
  return out;
}

std::string version_from_nvrtc() {
  int major = 0, minor = 0;
  nvrtc().nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

// Compiles a tiny program to PTX and reads the build number and compiler build id.
ToolchainFacts probe_toolchain() {
  const Nvrtc& api = nvrtc();
  ToolchainFacts f;
  f.version = version_from_nvrtc();
  f.archs = archs_from_nvrtc();
  const char* src = "__device__ unsigned kjit_build = __CUDACC_VER_BUILD__ + 1000000u;\n";
  nvrtcProgram prog;
  nvrtcResult r = api.nvrtcCreateProgram(&prog, src, "kjit_probe.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    fail(KJIT_ERROR_NVRTC,
         std::string("NVRTC probe: nvrtcCreateProgram failed: ") + api.nvrtcGetErrorString(r));
  }
  const std::string arch =
      "-arch=compute_" + std::to_string(f.archs.empty() ? 75 : f.archs.front());
  const char* opts[] = {arch.c_str()};
  r = api.nvrtcCompileProgram(prog, 1, opts);
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    size_t size = 0;
    api.nvrtcGetPTXSize(prog, &size);
    ptx.resize(size);
    api.nvrtcGetPTX(prog, ptx.data());
  }
  api.nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    fail(KJIT_ERROR_NVRTC,
         std::string("NVRTC probe compile failed: ") + api.nvrtcGetErrorString(r));
  }
  auto value = [&](const char* var) -> std::string {
    std::smatch m;
    const std::regex re(std::string(var) + " = ([0-9]+);");
    return std::regex_search(ptx, m, re) ? m[1].str() : "?";
  };
  // The build number is stored offset so that it is never zero (zero-initialised
  // variables have no initialiser in PTX).
  const std::string build = value("kjit_build");
  std::string id = "nvrtc " + f.version + "." +
                   (build == "?" ? build : std::to_string(std::stoul(build) - 1000000u));
  std::smatch m;
  if (std::regex_search(ptx, m, std::regex("Compiler Build ID: (CL-[0-9]+)"))) {
    id += " " + m[1].str();
  }
  f.id = id;
  return f;
}

// The record kept in the cache database: "kjit-toolchain-2", then the identity, the
// version and the architectures, one per line.
std::string encode(const ToolchainFacts& f) {
  std::string out = "kjit-toolchain-2\n" + f.id + "\n" + f.version + "\n";
  for (int a : f.archs) out += std::to_string(a) + " ";
  return out;
}

bool decode(const std::string& text, ToolchainFacts* f) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  lines.push_back(text.substr(start));
  if (lines.size() != 4 || lines[0] != "kjit-toolchain-2" || lines[1].empty()) return false;
  f->id = lines[1];
  f->version = lines[2];
  f->archs.clear();
  const char* p = lines[3].c_str();
  char* end = nullptr;
  for (long a; (a = std::strtol(p, &end, 10)), end != p; p = end) {
    if (a <= 0 || a > 10000) return false;
    f->archs.push_back(int(a));
  }
  return !f->archs.empty();
}

std::mutex g_mu;
bool g_known = false;
ToolchainFacts g_facts;

// The facts, read once per process: from `store` when it holds a record for the library
// file, else by opening NVRTC and probing it (then recorded in `store`). The record is named
// by the file's identity (device, inode, size, times: stat() follows the path's links to the
// file itself), so the path need not be resolved first.
const ToolchainFacts& facts(Facts* store) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_known) return g_facts;
  const std::string lib = nvrtc_library_as_named();
  const std::string identity = lib.empty() ? "" : file_identity(lib);
  const std::string memo = "toolchain-3:" + identity;
  if (store && !identity.empty()) {
    if (auto v = store->get(memo)) {
      if (decode(*v, &g_facts)) {
        g_known = true;
        return g_facts;
      }
    }
  }
  g_facts = probe_toolchain();
  g_known = true;
  log_debug("NVRTC toolchain: " + g_facts.id + " (" + lib + ")");
  if (store && !identity.empty()) store->set(memo, encode(g_facts));
  return g_facts;
}

}  // namespace

std::string nvrtc_library_path() {
  return nvrtc_library_file();
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

const ToolchainFacts& toolchain_facts(Facts* store) {
  return facts(store);
}

std::string toolchain_id(Facts* store) {
  return facts(store).id;
}

bool arch_supported(const ToolchainFacts& f, int arch) {
  for (int a : f.archs) {
    if (a == arch) return true;
  }
  return false;
}

std::string supported_archs_text(const ToolchainFacts& f) {
  std::string out;
  for (int a : f.archs) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return out.empty() ? "(none reported by NVRTC)" : out;
}

}  // namespace kjit
