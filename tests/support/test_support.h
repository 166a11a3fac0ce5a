// Shared helpers for the test programs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kjit::test {

// A fresh directory under $TMPDIR removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The messages the library logs (every level) while it lives, through
// kjit_set_log_callback (one at a time).
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // How many messages contain `needle`.
  size_t count(const std::string& needle) const;
  std::vector<std::string> messages;
};

// The working directory is `dir` while it lives (a failed change is a test failure).
class Cwd {
 public:
  explicit Cwd(const std::string& dir);
  ~Cwd();
  Cwd(const Cwd&) = delete;
  Cwd& operator=(const Cwd&) = delete;

 private:
  std::string old_;
};

void write_file(const std::string& path, const std::string& contents);
std::string read_file_or_die(const std::string& path);

// Sample kernels used across tests and benchmarks.
extern const char* const
    kSaxpySource;  // extern "C" __global__ void saxpy(float a, const float* x, float* y, int n)
extern const char* const
    kTemplateSource;  // template<typename T, int N> __global__ void scale(T*, T, int)
extern const char* const
    kCubReduceSource;  // extern "C" __global__ void block_sum(const float*, float*, int)

// Include directory holding CUB (the toolkit's CCCL headers).
std::string cub_include_dir();

// Non-empty reason when no usable CUDA driver/device is present (for GTEST_SKIP).
std::string gpu_unavailable_reason();

}  // namespace kjit::test
