#include "key/toolchain.h"

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <vector>

#include "cuda/nvrtc_lib.h"
#include "store/facts.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/wire.h"

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

std::mutex g_toolchain_mu;  // held while the facts are learnt, not to read them
// The facts learnt (nullptr: not yet). A reset leaves the facts it forgets allocated, so
// that references handed out stay valid.
std::atomic<const ToolchainFacts*> g_toolchain_facts{nullptr};

std::string record_name() {
  const std::string lib = nvrtc_library_as_named();
  const std::string identity = lib.empty() ? "" : file_identity(lib);
  return identity.empty() ? "" : "toolchain-4:" + identity;
}

// The facts, read once per process (again after reset_toolchain_facts()): from `store` when
// it holds a record for the library file, else by opening NVRTC and probing it (then
// recorded in `store`). The record is named by the file's identity (device, inode, size,
// times: stat() follows the path's links to the file itself), so the path need not be
// resolved first.
const ToolchainFacts& facts(Facts* store) {
  if (const ToolchainFacts* known = g_toolchain_facts.load(std::memory_order_acquire)) return *known;
  std::lock_guard<std::mutex> lock(g_toolchain_mu);
  if (const ToolchainFacts* known = g_toolchain_facts.load(std::memory_order_acquire)) return *known;
  const std::string memo = record_name();
  auto learnt = std::make_unique<ToolchainFacts>();
  std::optional<std::string> v;
  if (store && !memo.empty()) v = store->get(memo);
  if (!v || !decode_toolchain_record(*v, learnt.get())) {
    *learnt = probe_toolchain();
    log_debug("NVRTC toolchain: " + learnt->id + " (" + nvrtc_library_as_named() + ")");
    if (store && !memo.empty()) store->set(memo, encode_toolchain_record(*learnt));
  }
  g_toolchain_facts.store(learnt.get(), std::memory_order_release);
  return *learnt.release();
}

}  // namespace

std::string encode_toolchain_record(const ToolchainFacts& f) {
  WireWriter w;
  w.str(kToolchainMagic);
  w.u32(kToolchainRecordVersion);
  w.str(f.id);
  w.str(f.version);
  w.u64(f.archs.size());
  for (int a : f.archs) w.u64(uint64_t(a));
  return std::move(w.bytes());
}

bool decode_toolchain_record(const std::string& record, ToolchainFacts* f) {
  try {
    WireReader r(record);
    if (r.str() != kToolchainMagic || r.u32() != kToolchainRecordVersion) return false;
    ToolchainFacts got;
    got.id = r.str();
    got.version = r.str();
    got.archs.resize(r.count());
    for (int& a : got.archs) {
      const uint64_t v = r.u64();
      if (v == 0 || v > 10000) return false;
      a = int(v);
    }
    r.finish();
    if (got.id.empty() || got.archs.empty()) return false;
    *f = std::move(got);
    return true;
  } catch (const WireError&) {
    return false;
  }
}

std::string toolchain_record_name() {
  return record_name();
}

void record_toolchain_facts(Facts* store) {
  const ToolchainFacts* known = g_toolchain_facts.load(std::memory_order_acquire);
  const std::string name = record_name();
  if (!known || !store || name.empty()) return;
  ToolchainFacts there;
  const std::optional<std::string> v = store->get(name);
  if (v && decode_toolchain_record(*v, &there)) return;  // a record stands: never rewritten
  store->set(name, encode_toolchain_record(*known));
}

void reset_toolchain_facts() {
  g_toolchain_facts.store(nullptr, std::memory_order_release);
}

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
