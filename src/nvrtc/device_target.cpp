#include "nvrtc/device_target.h"

#include <map>
#include <mutex>
#include <optional>

#include "cuda/device.h"
#include "cuda/device_record.h"
#include "store/cache.h"

namespace kjit {
namespace {

// Answers already found in this process, by device: kept for the rest of it, as the
// driver, once initialised, keeps the devices it enumerated (cuda::device_arch does the
// same). A compile for target "auto" pays the fingerprint (files under /proc and /dev, tens
// of microseconds) once, not at every hit.
struct Known {
  std::mutex mu;
  std::map<int, DeviceTarget> by_device;
};

Known& known() {
  static Known* k = new Known;  // never destroyed: compiles may run during exit
  return *k;
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
  {
    std::lock_guard<std::mutex> lock(k.mu);
    auto it = k.by_device.find(device);
    if (it != k.by_device.end()) return it->second;
  }
  const DeviceTarget t = find(cache, device, root);
  std::lock_guard<std::mutex> lock(k.mu);
  k.by_device.emplace(device, t);
  return t;
}

}  // namespace kjit
