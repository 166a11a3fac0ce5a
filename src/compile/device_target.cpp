#include "compile/device_target.h"

#include <optional>

#include "cuda/device.h"
#include "cuda/device_record.h"
#include "store/cache.h"

namespace kjit {

DeviceTarget device_target(Cache* cache, int device, const std::string& root) {
  const std::string fingerprint =
      cache && !cuda::driver_loaded() ? cuda::device_fingerprint(device, root) : std::string();
  const std::string fact = "device-arch/" + fingerprint;
  if (!fingerprint.empty()) {
    const std::optional<std::string> known = cache->facts().get(fact);
    if (known && cuda::is_device_arch(*known)) return {*known, true};
  }
  DeviceTarget t{cuda::device_arch(device), false};
  // Fingerprinted before the driver was loaded: the driver saw the same environment.
  if (!fingerprint.empty() && cuda::is_device_arch(t.arch)) cache->facts().set(fact, t.arch);
  return t;
}

}  // namespace kjit
