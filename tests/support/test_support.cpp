#include "support/test_support.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "kjit/kjit.h"

namespace kjit::test {

LogCapture::LogCapture() {
  kjit_set_log_callback(
      [](int, const char* m, void* user) {
        static_cast<LogCapture*>(user)->messages.emplace_back(m);
      },
      this);
}

LogCapture::~LogCapture() {
  kjit_set_log_callback(nullptr, nullptr);
}

size_t LogCapture::count(const std::string& needle) const {
  size_t n = 0;
  for (const auto& m : messages) n += m.find(needle) != std::string::npos;
  return n;
}

Cwd::Cwd(const std::string& dir) {
  char buf[4096];
  old_ = getcwd(buf, sizeof buf) ? buf : "/";
  EXPECT_EQ(chdir(dir.c_str()), 0) << dir;
}

Cwd::~Cwd() {
  (void)!chdir(old_.c_str());
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/kjit-test-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  const std::string cmd = "chmod -R u+rwx '" + path_ + "' 2>/dev/null; rm -rf '" + path_ + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file_or_die(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* const kSaxpySource = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

const char* const kTemplateSource = R"(
template <typename T, int N>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * factor + T(N);
}
)";

const char* const kCubReduceSource = R"(
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  using BlockReduce = cub::BlockReduce<float, 256>;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  float sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";

std::string cub_include_dir() {
  return std::string(KJIT_CUDA_INCLUDE_DIR) + "/cccl";
}

std::string gpu_unavailable_reason() {
  int count = 0;
  const kjit_status st = kjit_device_count(&count);
  if (st != KJIT_OK) return std::string("no CUDA driver: ") + kjit_last_error();
  if (count == 0) return "no CUDA device";
  return "";
}

}  // namespace kjit::test
