#include "compile/device_target.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "cuda/device.h"
#include "cuda/device_record.h"
#include "store/cache.h"

namespace kjit {
namespace {

// Answers already found in this process, by device and the environment the fingerprint
// reads: a compile for target "auto" pays the fingerprint (files under /proc and /dev, tens
// of microseconds) once, not at every hit.
struct Known {
  std::mutex mu;
  std::map<std::string, DeviceTarget> by_device;
};

Known& known() {
  static Known* k = new Known;  // never destroyed: compiles may run during exit
  return *k;
}

std::string memo_key(int device) {
  std::string key = std::to_string(device);
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MPS_PIPE_DIRECTORY",
                           "KJIT_CUDA_DRIVER"}) {
    const char* v = std::getenv(name);
    key += v ? '\n' + std::string(v) : std::string("\n-");
  }
  return key;
}

DeviceTarget find(Cache* cache, int device, const std::string& root) {
  const std::string fingerprint =
      cache && !cuda::driver_loaded() ? cuda::device_fingerprint(device, root) : std::string();
  const std::string fact = "device-arch/" + fingerprint;
  if (!fingerprint.empty()) {
    const std::optional<std::string> recorded = cache->facts().get(fact);
    if (recorded && cuda::is_device_arch(*recorded)) return {*recorded, true};
  }
  DeviceTarget t{cuda::device_arch(device), false};
  // Fingerprinted before the driver was loaded: the driver saw the same environment.
  if (!fingerprint.empty() && cuda::is_device_arch(t.arch)) cache->facts().set(fact, t.arch);
  return t;
}

}  // namespace

DeviceTarget device_target(Cache* cache, int device, const std::string& root) {
  if (!root.empty()) return find(cache, device, root);  // an invented machine (tests)
  Known& k = known();
  const std::string key = memo_key(device);
  {
    std::lock_guard<std::mutex> lock(k.mu);
    auto it = k.by_device.find(key);
    if (it != k.by_device.end()) return it->second;
  }
  const DeviceTarget t = find(cache, device, root);
  std::lock_guard<std::mutex> lock(k.mu);
  k.by_device.emplace(key, t);
  return t;
}

}  // namespace kjit
