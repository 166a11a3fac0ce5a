#include "cuda/device_record.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <vector>

#include "util/dl.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit::cuda {
namespace {

// The optional environment variable `name` as a field: whether it is set, and its value.
void env_field(Sha256& h, const char* name) {
  const char* v = std::getenv(name);
  h.field(name);
  h.u64(v ? 1 : 0);
  h.field(v ? v : "");
}

// "nvidia0", "nvidia1", ...: the per-GPU device nodes.
bool is_gpu_node(const std::string& n) {
  if (n.size() <= 6 || n.compare(0, 6, "nvidia") != 0) return false;
  return std::all_of(n.begin() + 6, n.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

std::string device_fingerprint(int device, const std::string& root) {
  if (device < 0) return "";
  const std::string proc = root + "/proc/driver/nvidia";
  const std::optional<std::string> version = read_file(proc + "/version");
  if (!version || version->empty()) return "";
  const std::optional<std::vector<std::string>> gpus = directory_names(proc + "/gpus");
  if (!gpus || gpus->empty()) return "";
  Sha256 h;
  h.field("kjit-device-fingerprint-1");
  h.u64(uint64_t(device));
  h.field(*version);  // the kernel driver's version and build
  h.u64(gpus->size());
  for (const std::string& bus : *gpus) {  // each GPU: its bus location, model, UUID, minor
    const std::optional<std::string> info = read_file(proc + "/gpus/" + bus + "/information");
    if (!info || info->empty()) return "";
    h.field(bus);
    h.field(*info);
  }
  // The device nodes this process can see (a container may be given some of them).
  const std::optional<std::vector<std::string>> dev = directory_names(root + "/dev");
  if (!dev) return "";
  for (const std::string& n : *dev) {
    if (!is_gpu_node(n)) continue;
    struct stat st;
    if (::stat((root + "/dev/" + n).c_str(), &st) != 0) return "";
    h.field(n);
    h.u64(uint64_t(st.st_rdev));
  }
  // What orders and filters the devices the driver enumerates.
  env_field(h, "CUDA_VISIBLE_DEVICES");
  env_field(h, "CUDA_DEVICE_ORDER");
  env_field(h, "KJIT_CUDA_DRIVER");  // another driver library
  // An MPS server (which may have been started with devices of its own) serves this
  // process when its control pipe exists.
  env_field(h, "CUDA_MPS_PIPE_DIRECTORY");
  const char* mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  struct stat st;
  h.u64(::stat((root + (mps && *mps ? mps : "/tmp/nvidia-mps") + "/control").c_str(), &st) == 0);
  return to_hex(h.finish());
}

bool driver_loaded() {
  const char* env = std::getenv("KJIT_CUDA_DRIVER");
  for (const char* name : {"libcuda.so.1", "libcuda.so", env}) {
    if (!name || !*name) continue;
    if (loader_has(name)) return true;
  }
  return false;
}

bool is_device_arch(const std::string& arch) {
  if (arch.size() < 5 || arch.size() > 6 || arch.compare(0, 3, "sm_") != 0) return false;
  return std::all_of(arch.begin() + 3, arch.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace kjit::cuda
