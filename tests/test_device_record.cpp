// The record of a device's architecture (cuda/device_record, nvrtc/device_target): what
// the machine's fingerprint covers, and when the cache's record answers instead of the CUDA
// driver. The machine is an invented tree (proc/driver/nvidia, dev) under a temporary
// directory, so these run without a GPU; where a driver exists, its answer is compared too.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "cuda/device.h"
#include "cuda/device_record.h"
#include "nvrtc/device_target.h"
#include "store/cache.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fs.h"

namespace {

using kjit::test::TempDir;
using kjit::test::write_file;

const char* const kInfo =
    "Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nGPU UUID: \t GPU-1111\n"
    "Bus Location: \t 0000:19:00.0\nDevice Minor: \t 0\n";

// An invented machine with one GPU.
struct Machine {
  TempDir dir;
  Machine() {
    kjit::make_directories(dir.path() + "/proc/driver/nvidia/gpus/0000:19:00.0", 0755);
    kjit::make_directories(dir.path() + "/dev", 0755);
    write_file(dir.path() + "/proc/driver/nvidia/version",
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\n");
    write_file(dir.path() + "/proc/driver/nvidia/gpus/0000:19:00.0/information", kInfo);
    write_file(dir.path() + "/dev/nvidia0", "");
    write_file(dir.path() + "/dev/nvidiactl", "");
  }
  std::string root() const { return dir.path(); }
  std::string fingerprint(int device = 0) const {
    return kjit::cuda::device_fingerprint(device, root());
  }
};

// Sets (or unsets, for nullptr) an environment variable for its lifetime.
class Env {
 public:
  Env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~Env() { had_ ? ::setenv(name_.c_str(), old_.c_str(), 1) : ::unsetenv(name_.c_str()); }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(DeviceRecord, NoFingerprintWhereTheMachineCannotVouch) {
  TempDir empty;
  EXPECT_EQ(kjit::cuda::device_fingerprint(0, empty.path()), "") << "no /proc/driver/nvidia";
  Machine m;
  EXPECT_EQ(m.fingerprint(-1), "");
  ::unlink((m.root() + "/proc/driver/nvidia/gpus/0000:19:00.0/information").c_str());
  EXPECT_EQ(m.fingerprint(), "") << "a GPU listed without its information";
  Machine none;
  ::unlink((none.root() + "/proc/driver/nvidia/gpus/0000:19:00.0/information").c_str());
  ::rmdir((none.root() + "/proc/driver/nvidia/gpus/0000:19:00.0").c_str());
  EXPECT_EQ(none.fingerprint(), "") << "no GPU listed";
}

TEST(DeviceRecord, FingerprintChangesWithEverythingThatDecidesTheDevice) {
  Env a("CUDA_VISIBLE_DEVICES", nullptr), b("CUDA_DEVICE_ORDER", nullptr),
      c("CUDA_MPS_PIPE_DIRECTORY", nullptr), d("KJIT_CUDA_DRIVER", nullptr);
  Machine m;
  const std::string base = m.fingerprint();
  ASSERT_EQ(base.size(), 64u);
  EXPECT_EQ(m.fingerprint(), base) << "stable";
  std::set<std::string> seen{base};
  auto differs = [&](const std::string& what, const std::function<void()>& change,
                     const std::function<void()>& undo) {
    change();
    const std::string f = m.fingerprint();
    EXPECT_FALSE(f.empty()) << what;
    EXPECT_TRUE(seen.insert(f).second) << what << ": the fingerprint did not change";
    undo();
    EXPECT_EQ(m.fingerprint(), base) << what << ": undone";
  };
  const std::string nv = m.root() + "/proc/driver/nvidia";
  const std::string info = nv + "/gpus/0000:19:00.0/information";
  EXPECT_NE(m.fingerprint(1), base) << "another device ordinal";
  differs(
      "another driver version",
      [&] { write_file(nv + "/version", "NVRM version: NVIDIA UNIX Kernel Module 590.1\n"); },
      [&] {
        write_file(nv + "/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\n");
      });
  differs(
      "another GPU in the slot",
      [&] { write_file(info, std::string(kInfo).replace(15, 4, "H100")); },
      [&] { write_file(info, kInfo); });
  differs(
      "a second GPU",
      [&] {
        kjit::make_directories(nv + "/gpus/0000:1a:00.0", 0755);
        write_file(nv + "/gpus/0000:1a:00.0/information", kInfo);
      },
      [&] {
        ::unlink((nv + "/gpus/0000:1a:00.0/information").c_str());
        ::rmdir((nv + "/gpus/0000:1a:00.0").c_str());
      });
  differs(
      "another device node", [&] { write_file(m.root() + "/dev/nvidia1", ""); },
      [&] { ::unlink((m.root() + "/dev/nvidia1").c_str()); });
  for (const char* var : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "KJIT_CUDA_DRIVER"}) {
    differs(
        std::string(var) + " set", [&] { ::setenv(var, "1", 1); }, [&] { ::unsetenv(var); });
    differs(
        std::string(var) + " empty", [&] { ::setenv(var, "", 1); }, [&] { ::unsetenv(var); });
  }
  // The MPS pipe directory as the machine names it (under the invented root here).
  kjit::make_directories(m.root() + "/mps", 0755);
  differs(
      "another MPS pipe directory", [&] { ::setenv("CUDA_MPS_PIPE_DIRECTORY", "/mps", 1); },
      [&] { ::unsetenv("CUDA_MPS_PIPE_DIRECTORY"); });
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", "/mps", 1);
  const std::string with_dir = m.fingerprint();
  write_file(m.root() + "/mps/control", "");
  EXPECT_NE(m.fingerprint(), with_dir) << "an MPS server started";
  ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_EQ(m.fingerprint(), base);
}

TEST(DeviceRecord, DeviceArchForm) {
  for (const char* good : {"sm_90", "sm_100", "sm_75"})
    EXPECT_TRUE(kjit::cuda::is_device_arch(good));
  for (const char* bad : {"", "sm_", "sm_9", "sm_90a", "compute_90", "sm_1000", "SM_90", "sm_9x"})
    EXPECT_FALSE(kjit::cuda::is_device_arch(bad)) << bad;
}

// The driver's answer for `device`, or "" without one.
std::string driver_arch(int device) {
  try {
    return kjit::cuda::device_arch(device);
  } catch (const kjit::Error&) {
    return "";
  }
}

// device_target() where the record must not answer: the driver's answer, or its error.
void expect_driver_answers(kjit::Cache* cache, int device, const std::string& root,
                           const std::string& why) {
  const std::string expected = driver_arch(device);
  if (expected.empty()) {
    EXPECT_THROW(kjit::device_target(cache, device, root), kjit::Error) << why;
    return;
  }
  const kjit::DeviceTarget t = kjit::device_target(cache, device, root);
  EXPECT_FALSE(t.from_record) << why;
  EXPECT_EQ(t.arch, expected) << why;
}

TEST(DeviceRecord, RecordAnswersForTheSameMachineOnly) {
  TempDir dir;
  kjit::CacheConfig cfg;
  cfg.directory = dir.path();
  kjit::Cache cache(cfg);
  Machine m;
  const std::string fact = "device-arch/" + m.fingerprint();
  cache.facts().set(fact, "sm_87");  // an invented device
  if (kjit::cuda::driver_loaded()) {
    expect_driver_answers(&cache, 0, m.root(), "a driver loaded in this process answers");
  } else {
    const kjit::DeviceTarget t = kjit::device_target(&cache, 0, m.root());
    EXPECT_TRUE(t.from_record);
    EXPECT_EQ(t.arch, "sm_87");
  }
  expect_driver_answers(nullptr, 0, m.root(), "no cache");
  cache.facts().set("device-arch/" + m.fingerprint(1), "compute_87");
  expect_driver_answers(&cache, 1, m.root(), "a record not of the form");

  write_file(m.root() + "/dev/nvidia1", "");  // the machine changed
  const std::string changed = "device-arch/" + m.fingerprint();
  const bool loaded = kjit::cuda::driver_loaded();
  expect_driver_answers(&cache, 0, m.root(), "another machine");
  const std::optional<std::string> recorded = cache.facts().get(changed);
  if (driver_arch(0).empty()) {
    EXPECT_FALSE(recorded) << "a failed query records nothing";
  } else if (!loaded) {
    EXPECT_EQ(recorded.value_or(""), driver_arch(0)) << "the driver's answer is recorded";
  }
  EXPECT_EQ(cache.facts().get(fact).value_or(""), "sm_87") << "the earlier record stays";
}

}  // namespace
