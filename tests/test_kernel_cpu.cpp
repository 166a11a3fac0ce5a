// Kernel, device and launch entry points without a usable CUDA driver, and their argument
// and handle checks. The driver path is pointed at a file that does not exist before
// anything loads it, so these tests behave the same on machines with and without a GPU.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kjit/kjit.h"
#include "support/test_support.h"

namespace {

constexpr const char* kMissingDriver = "/nonexistent/kjit-test/libcuda.so.1";

// Runs before main(): the driver is opened lazily, so this decides what it will find.
const bool g_driver_env_set = [] {
  setenv("KJIT_CUDA_DRIVER", kMissingDriver, 1);
  return true;
}();

std::string last_error() {
  return kjit_last_error();
}

void expect_unavailable(kjit_status st, const char* call) {
  EXPECT_EQ(st, KJIT_ERROR_CUDA_UNAVAILABLE) << call << ": " << kjit_status_string(st);
  const std::string msg = last_error();
  EXPECT_NE(msg.find("(the CUDA driver) cannot be used"), std::string::npos) << call << ": " << msg;
  EXPECT_NE(msg.find(kMissingDriver), std::string::npos) << call << ": " << msg;
}

// The parts of "<status string>: <message>" (how the bindings and most programs print a
// failure), split at ": ".
std::vector<std::string> segments(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(": ", pos);
    out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) return out;
    pos = at + 2;
  }
}

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Each layer says its part once: no segment of the printed failure repeats another, and the
// driver's path and the status's words appear once.
void expect_said_once(kjit_status st, const std::string& message) {
  const std::string full = std::string(kjit_status_string(st)) + ": " + message;
  const std::vector<std::string> parts = segments(full);
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t j = i + 1; j < parts.size(); ++j) {
      EXPECT_NE(parts[i], parts[j]) << "repeated segment in: " << full;
    }
  }
  EXPECT_EQ(occurrences(full, "CUDA driver not available"), 1u) << full;
  EXPECT_EQ(occurrences(full, "libcuda.so.1"), 1u) << full;
  EXPECT_EQ(occurrences(full, "cannot open"), 1u) << full;
}

// A pointer to readable memory that is not a kjit handle.
struct Junk {
  alignas(64) unsigned char bytes[512];
  Junk() { std::memset(bytes, 0x5a, sizeof bytes); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(bytes);
  }
};

class KernelCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(g_driver_env_set);
    ASSERT_EQ(kjit_compiler_create(nullptr, 1, &compiler_), KJIT_OK) << last_error();
    ASSERT_EQ(kjit_options_create(&opts_), KJIT_OK);
    ASSERT_EQ(kjit_options_set_target(opts_, "sm_80"), KJIT_OK);
  }
  void TearDown() override {
    kjit_options_destroy(opts_);
    kjit_compiler_destroy(compiler_);
  }

  // A compiled binary (explicit target: compiling needs no driver).
  kjit_binary* compile_saxpy() {
    kjit_binary* bin = nullptr;
    EXPECT_EQ(kjit_compile(compiler_, kjit::test::kSaxpySource, opts_, &bin), KJIT_OK)
        << last_error();
    return bin;
  }

  kjit_compiler* compiler_ = nullptr;
  kjit_options* opts_ = nullptr;
};

TEST_F(KernelCpu, DeviceQueriesReportDriverUnavailable) {
  int count = 42;
  expect_unavailable(kjit_device_count(&count), "kjit_device_count");
  EXPECT_EQ(count, 42) << "out-parameter written on failure";

  char buf[64] = "untouched";
  expect_unavailable(kjit_device_arch(0, buf, sizeof buf), "kjit_device_arch");
  EXPECT_STREQ(buf, "untouched");
  expect_unavailable(kjit_device_name(0, buf, sizeof buf), "kjit_device_name");
  EXPECT_STREQ(buf, "untouched");

  int version = 7;
  expect_unavailable(kjit_driver_version(&version), "kjit_driver_version");
  EXPECT_EQ(version, 7);
}

TEST_F(KernelCpu, SameAnswerOnEveryCallAndThread) {
  std::vector<std::thread> threads;
  std::vector<int> statuses(8, -1);
  std::vector<std::string> messages(8);
  for (size_t i = 0; i < statuses.size(); ++i) {
    threads.emplace_back([&, i] {
      int count = 0;
      statuses[i] = kjit_device_count(&count);
      messages[i] = kjit_last_error();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i], KJIT_ERROR_CUDA_UNAVAILABLE);
    EXPECT_EQ(messages[i], messages[0]);
  }
  int count = 0;
  expect_unavailable(kjit_device_count(&count), "second call");
}

TEST_F(KernelCpu, KernelCreateReportsDriverUnavailable) {
  kjit_kernel* k = reinterpret_cast<kjit_kernel*>(0x1);
  kjit_binary* log = reinterpret_cast<kjit_binary*>(0x1);
  expect_unavailable(kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", opts_, 0,
                                        KJIT_KERNEL_DEFAULT, &k, &log),
                     "kjit_kernel_create");
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(log, nullptr);

  // Without options and with a name expression: same answer, nothing compiled first.
  k = nullptr;
  expect_unavailable(kjit_kernel_create(compiler_, kjit::test::kTemplateSource, "scale<float, 2>",
                                        nullptr, 0, KJIT_KERNEL_NO_RELOAD, &k, nullptr),
                     "kjit_kernel_create(template)");
  EXPECT_EQ(k, nullptr);
}

TEST_F(KernelCpu, KernelFromBinaryReportsDriverUnavailable) {
  kjit_binary* bin = compile_saxpy();
  ASSERT_NE(bin, nullptr);
  kjit_kernel* k = reinterpret_cast<kjit_kernel*>(0x1);
  expect_unavailable(kjit_kernel_from_binary(bin, "saxpy", 0, KJIT_KERNEL_DEFAULT, &k),
                     "kjit_kernel_from_binary");
  EXPECT_EQ(k, nullptr);
  expect_unavailable(kjit_kernel_from_binary(bin, "saxpy", 0, KJIT_KERNEL_FORCE_PTX, &k),
                     "kjit_kernel_from_binary(FORCE_PTX)");
  kjit_binary_destroy(bin);
}

TEST_F(KernelCpu, DeviceArgumentChecks) {
  EXPECT_EQ(kjit_device_count(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("NULL"), std::string::npos) << last_error();
  char small[8];
  EXPECT_EQ(kjit_device_arch(0, small, sizeof small), KJIT_ERROR_BUFFER_TOO_SMALL);
  EXPECT_NE(last_error().find("16"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_device_arch(0, nullptr, 64), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_device_name(0, nullptr, 64), KJIT_ERROR_INVALID_ARGUMENT);
  char one[1];
  EXPECT_EQ(kjit_device_name(0, one, 0), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_driver_version(nullptr), KJIT_ERROR_INVALID_ARGUMENT);
}

TEST_F(KernelCpu, CreateArgumentChecks) {
  kjit_kernel* k = nullptr;
  const char* src = kjit::test::kSaxpySource;
  Junk junk;

  EXPECT_EQ(kjit_kernel_create(nullptr, src, "saxpy", opts_, 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("compiler"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_create(junk.as<kjit_compiler>(), src, "saxpy", opts_, 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_kernel_create(compiler_, src, "saxpy", junk.as<kjit_options>(), 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_HANDLE);
  EXPECT_NE(last_error().find("options"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_create(compiler_, nullptr, "saxpy", opts_, 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("source"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_create(compiler_, src, nullptr, opts_, 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_create(compiler_, src, "", opts_, 0, 0, &k, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("name"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_create(compiler_, src, "saxpy", opts_, 0, 0, nullptr, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_create(compiler_, src, "saxpy", opts_, -1, 0, &k, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("-1"), std::string::npos) << last_error();
  EXPECT_EQ(kjit_kernel_create(compiler_, src, "saxpy", opts_, 0, 0x100, &k, nullptr),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("flags"), std::string::npos) << last_error();
  EXPECT_EQ(k, nullptr);
}

TEST_F(KernelCpu, FromBinaryArgumentChecks) {
  kjit_kernel* k = nullptr;
  Junk junk;
  EXPECT_EQ(kjit_kernel_from_binary(nullptr, "saxpy", 0, 0, &k), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(kjit_kernel_from_binary(junk.as<kjit_binary>(), "saxpy", 0, 0, &k),
            KJIT_ERROR_INVALID_HANDLE);

  kjit_binary* bin = compile_saxpy();
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(kjit_kernel_from_binary(bin, nullptr, 0, 0, &k), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_from_binary(bin, "", 0, 0, &k), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_from_binary(bin, "saxpy", 0, 0, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_from_binary(bin, "saxpy", -3, 0, &k), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_kernel_from_binary(bin, "saxpy", 0, 0xf0, &k), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_binary_destroy(bin);

  // A failed compile's binary holds only a log: nothing to load.
  kjit_binary* failed = nullptr;
  ASSERT_EQ(kjit_compile(compiler_, "extern \"C\" __global__ void f() { oops; }", opts_, &failed),
            KJIT_ERROR_COMPILE);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(kjit_kernel_from_binary(failed, "f", 0, 0, &k), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("failed compile"), std::string::npos) << last_error();
  kjit_binary_destroy(failed);
  EXPECT_EQ(k, nullptr);
}

TEST_F(KernelCpu, BadKernelHandlesAreRejected) {
  Junk junk;
  for (kjit_kernel* k : {static_cast<kjit_kernel*>(nullptr), junk.as<kjit_kernel>()}) {
    size_t n = 99, off = 99, size = 99;
    EXPECT_EQ(kjit_kernel_load_path(k), -1);
    EXPECT_EQ(kjit_kernel_symbol(k), nullptr);
    EXPECT_EQ(kjit_kernel_param_count(k, &n), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(kjit_kernel_param_info(k, 0, &off, &size), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(kjit_kernel_param_buffer_size(k, &size), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(n, 99u);
    EXPECT_EQ(off, 99u);
    EXPECT_EQ(size, 99u);
    kjit_kernel_attributes attrs{};
    attrs.struct_size = sizeof attrs;
    EXPECT_EQ(kjit_kernel_get_attributes(k, &attrs), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(kjit_kernel_set_max_dynamic_shared(k, 1024), KJIT_ERROR_INVALID_HANDLE);
    int blocks = 0, grid = 0, block = 0;
    EXPECT_EQ(kjit_kernel_occupancy(k, 128, 0, &blocks), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(kjit_kernel_suggest_block_size(k, 0, &grid, &block), KJIT_ERROR_INVALID_HANDLE);
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    float a = 1;
    void* args[] = {&a};
    size_t sizes[] = {sizeof a};
    EXPECT_EQ(kjit_kernel_launch(k, &cfg, args, 1), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_NE(last_error().find("kjit_kernel"), std::string::npos) << last_error();
    EXPECT_EQ(kjit_kernel_launch_sized(k, &cfg, args, sizes, 1), KJIT_ERROR_INVALID_HANDLE);
    EXPECT_EQ(kjit_kernel_launch_packed(k, &cfg, &a, sizeof a), KJIT_ERROR_INVALID_HANDLE);
    kjit_kernel_destroy(k);  // no-op, no crash
  }
  // The junk was not modified by destroy.
  EXPECT_EQ(junk.bytes[0], 0x5a);
  EXPECT_EQ(junk.bytes[sizeof junk.bytes - 1], 0x5a);
}

TEST_F(KernelCpu, LaunchConfigInit) {
  kjit_launch_config cfg;
  std::memset(&cfg, 0xff, sizeof cfg);
  kjit_launch_config_init(&cfg);
  EXPECT_EQ(cfg.struct_size, sizeof(kjit_launch_config));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cfg.grid[i], 1u);
    EXPECT_EQ(cfg.block[i], 1u);
    EXPECT_EQ(cfg.cluster[i], 0u);
  }
  EXPECT_EQ(cfg.shared_bytes, 0u);
  EXPECT_EQ(cfg.stream, nullptr);
  EXPECT_EQ(cfg.cooperative, 0);

  const kjit_launch_config macro = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(std::memcmp(&macro.grid, &cfg.grid, sizeof cfg.grid), 0);
  EXPECT_EQ(macro.struct_size, cfg.struct_size);
  (kjit_launch_config_init)(nullptr);  // the 0.1.0 function: no-op, no crash
}

// Each case runs in a fresh process (the driver is opened once per process).
class KernelCpuDeath : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(KernelCpu, MissingDriverMessageSaysEachThingOnce) {
  int count = -1;
  const kjit_status st = kjit_device_count(&count);
  ASSERT_EQ(st, KJIT_ERROR_CUDA_UNAVAILABLE);
  expect_said_once(st, last_error());
  // The same for every entry point that needs the driver, first call or not.
  kjit_kernel* k = nullptr;
  const kjit_status st2 =
      kjit_kernel_create(compiler_, kjit::test::kSaxpySource, "saxpy", opts_, 0, 0, &k, nullptr);
  ASSERT_EQ(st2, KJIT_ERROR_CUDA_UNAVAILABLE);
  expect_said_once(st2, last_error());
}

// The driver this machine's loader finds by default (none on a machine without a GPU):
// whatever dlopen says, the printed failure says each thing once.
void default_driver_child() {
  unsetenv("KJIT_CUDA_DRIVER");
  int count = 0;
  const kjit_status st = kjit_device_count(&count);
  if (st == KJIT_OK) {
    fprintf(stderr, "driver loaded\n");
    _exit(0);
  }
  const std::string full = std::string(kjit_status_string(st)) + ": " + kjit_last_error();
  const std::vector<std::string> parts = segments(full);
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t j = i + 1; j < parts.size(); ++j) {
      if (parts[i] == parts[j]) {
        fprintf(stderr, "repeated segment: %s\n", full.c_str());
        _exit(1);
      }
    }
  }
  fprintf(stderr, "said once: %s\n", full.c_str());
  _exit(occurrences(full, "CUDA driver not available") == 1 ? 0 : 2);
}

void stub_driver_child(const std::string& stub) {
  setenv("KJIT_CUDA_DRIVER", stub.c_str(), 1);
  int count = 0;
  const kjit_status st = kjit_device_count(&count);
  fprintf(stderr, "status=%d message=%s\n", st, kjit_last_error());
  _exit(st == KJIT_ERROR_CUDA_UNAVAILABLE ? 0 : 1);
}

void not_a_library_child(const std::string& fake) {
  setenv("KJIT_CUDA_DRIVER", fake.c_str(), 1);
  int count = 0;
  const kjit_status st = kjit_device_count(&count);
  fprintf(stderr, "status=%d message=%s\n", st, kjit_last_error());
  _exit(st == KJIT_ERROR_CUDA_UNAVAILABLE ? 0 : 1);
}

void compile_without_driver_child() {
  int count = 0;
  if (kjit_device_count(&count) != KJIT_ERROR_CUDA_UNAVAILABLE) _exit(2);
  kjit_compiler* c = nullptr;
  kjit_options* o = nullptr;
  kjit_binary* b = nullptr;
  if (kjit_compiler_create(nullptr, 1, &c) != KJIT_OK) _exit(3);
  kjit_options_create(&o);
  kjit_options_set_target(o, "sm_80");
  const kjit_status st = kjit_compile(c, kjit::test::kSaxpySource, o, &b);
  fprintf(stderr, "compile status=%d %s\n", st, kjit_last_error());
  size_t size = 0;
  const bool has_cubin = b && kjit_binary_data(b, KJIT_OUTPUT_CUBIN, &size) && size > 0;
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  _exit(st == KJIT_OK && has_cubin ? 0 : 4);
}

TEST_F(KernelCpuDeath, NotALibraryIsUnavailableWithDlerror) {
  kjit::test::TempDir dir;
  const std::string fake = dir.file("libcuda.so.1");
  kjit::test::write_file(fake, "this is not an ELF file\n");
  EXPECT_EXIT(not_a_library_child(fake), ::testing::ExitedWithCode(0),
              "message=/.*/libcuda.so.1 \\(the CUDA driver\\) cannot be used: file too short");
}

TEST_F(KernelCpuDeath, DefaultDriverMessageSaysEachThingOnce) {
  EXPECT_EXIT(default_driver_child(), ::testing::ExitedWithCode(0), "said once|driver loaded");
}

// The toolkit's link stub is named as such, not as a driver missing every entry point.
TEST_F(KernelCpuDeath, ToolkitStubIsNamed) {
  const std::string stub = std::string(KJIT_CUDA_INCLUDE_DIR) + "/../lib64/stubs/libcuda.so";
  if (access(stub.c_str(), R_OK) != 0) GTEST_SKIP() << "no link stub at " << stub;
  EXPECT_EXIT(stub_driver_child(stub), ::testing::ExitedWithCode(0),
              "libcuda.so \\(the CUDA driver\\) cannot be used: it is the CUDA toolkit's link "
              "stub, not a driver");
}

TEST_F(KernelCpuDeath, MissingDriverKeepsCompilingWorking) {
  EXPECT_EXIT(compile_without_driver_child(), ::testing::ExitedWithCode(0), "compile status=0");
}

}  // namespace
