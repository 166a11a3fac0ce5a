// Device memory for the GPU tests: one cuMemAlloc in the calling thread's current context,
// freed on destruction, with typed and byte-wise copies. A failed call throws kjit::Error
// (the test fails with the driver's message).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/driver.h"

namespace kjit::test {

class DeviceBuffer {
 public:
  // `bytes` 0 allocates 16, so that an empty buffer still has an address.
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes ? bytes : 16) {
    cuda::check(cuda::driver().cuMemAlloc(&ptr_, bytes_), "cuMemAlloc");
  }
  ~DeviceBuffer() {
    if (ptr_) cuda::driver().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(ptr_); }
  void* ptr() const { return get(); }
  size_t bytes() const { return bytes_; }

  template <typename T>
  void put(const std::vector<T>& v) const {
    if (!v.empty())
      cuda::check(cuda::driver().cuMemcpyHtoD(ptr_, v.data(), v.size() * sizeof(T)),
                  "cuMemcpyHtoD");
  }
  template <typename T>
  std::vector<T> get(size_t n) const {
    std::vector<T> v(n);
    if (n) cuda::check(cuda::driver().cuMemcpyDtoH(v.data(), ptr_, n * sizeof(T)), "cuMemcpyDtoH");
    return v;
  }
  void upload(const std::vector<uint8_t>& h) const { put(h); }
  std::vector<uint8_t> download(size_t n) const { return get<uint8_t>(n); }
  // Every byte 0xff.
  void poison() const { cuda::check(cuda::driver().cuMemsetD8(ptr_, 0xff, bytes_), "cuMemsetD8"); }

 private:
  size_t bytes_;
  CUdeviceptr ptr_ = 0;
};

}  // namespace kjit::test
