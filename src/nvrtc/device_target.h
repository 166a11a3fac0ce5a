// A device's architecture for target "auto" without initialising the CUDA driver where the
// cache already knows it for this machine (cuda/device_record.h).
#pragma once

#include <string>

namespace kjit {

class Cache;

struct DeviceTarget {
  std::string arch;          // "sm_90"
  bool from_record = false;  // answered by the cache's record, not by the driver
};

// Device `device`'s architecture. Where no CUDA driver is loaded in this process and the
// machine's fingerprint is readable, the fact recorded in `cache` for that fingerprint
// answers; otherwise the driver is asked (cuda::device_arch, which throws kjit::Error as
// it does) and its answer is recorded for the next process. `cache` may be null. An answer
// is kept for the rest of the process, per device (as the driver, once initialised, keeps
// the devices it enumerated). `root` prefixes the paths the fingerprint reads (tests;
// nothing is kept then). Thread-safe.
DeviceTarget device_target(Cache* cache, int device, const std::string& root = "");

}  // namespace kjit
