// What decides a CUDA device's architecture on this machine, read without initialising the
// CUDA driver (cuInit costs 15-50 ms, most of a compile-only process's time on a hit): the
// kernel driver's version, the GPUs it lists, the device nodes, and the environment that
// orders and filters devices. Equal fingerprints mean the driver would enumerate the same
// devices in the same order, so an architecture recorded for one (a fact in the cache,
// nvrtc/device_target) answers for the other; any change gives another fingerprint and the
// driver is asked again.
#pragma once

#include <string>

namespace kjit::cuda {

// The fingerprint of device `device` (hex), or "" where the machine cannot vouch for itself:
// no NVIDIA kernel driver information under `root`/proc/driver/nvidia (not Linux, a driver
// that does not publish it, a container that hides it), no GPU listed, an unreadable file.
// `root` prefixes every path ("" for the machine itself; tests pass a directory tree).
std::string device_fingerprint(int device, const std::string& root = "");

// Whether a CUDA driver library is loaded in this process already (by kjit or anyone else).
// Its devices were then enumerated with the environment of that time, which the
// fingerprint cannot see: such a process asks its driver.
bool driver_loaded();

// Whether `arch` has the form of a device architecture ("sm_" and two or three digits).
bool is_device_arch(const std::string& arch);

}  // namespace kjit::cuda
