// The one policy for public structs that start with `uint32_t struct_size` (docs/api.md,
// "ABI and versioned structs"). Used by the C shims only: the core never sees a caller's
// struct, only a full-size copy of it (inputs) or its own C++ structs (outputs).
//
//  - struct_size must be at least the size of the struct as released in 0.1.0 (a frozen
//    constant below) and at most kMaxStructSize; otherwise KJIT_ERROR_INVALID_ARGUMENT.
//  - Inputs: the caller's struct is copied into a full-size struct holding the defaults,
//    reading only min(struct_size, sizeof) bytes, so fields the caller does not know keep
//    their defaults. A larger struct (a caller built against a newer kjit) is accepted when
//    every byte this library does not know is zero, else KJIT_ERROR_UNSUPPORTED.
//  - Outputs: struct_size is checked before any work; then only min(struct_size, sizeof)
//    bytes are written, struct_size keeps the caller's value, and bytes this library does
//    not know (up to the caller's size) are set to zero. Nothing past struct_size is read
//    or written.
//  - Init: defaults are written within the size the caller states, never past it.
//  - Fields appended after 0.1.0 take zero as their default, so that an older caller's
//    missing fields and a newer caller's zeroed ones mean the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "kjit/kjit.h"
#include "util/error.h"

namespace kjit::api {

// Larger struct_size values are refused: an uninitialised struct_size would otherwise make
// kjit read or write far past the caller's struct.
constexpr size_t kMaxStructSize = 4096;

constexpr size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

// Size of the 0.1.0 layout of T: the end of its last 0.1.0 member, rounded up to T's
// alignment (members are only ever appended, so that end never moves).
#define KJIT_V0_1_SIZE(T, last_member) \
  ::kjit::api::round_up(offsetof(T, last_member) + sizeof(T::last_member), alignof(T))

// For every versioned struct: its name, the frozen size of its first released layout, and
// its defaults (what KJIT_<X>_INIT gives; a static object, so its padding bytes are zero
// and what kjit writes into a caller's struct is the same byte for byte every time).
template <typename T>
struct Versioned;

template <>
struct Versioned<kjit_cache_options> {
  static constexpr const char* name = "kjit_cache_options";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_cache_options, remote_read_only);
  static const kjit_cache_options& defaults() {
    static const kjit_cache_options d = KJIT_CACHE_OPTIONS_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_cache_stats> {
  static constexpr const char* name = "kjit_cache_stats";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_cache_stats, remote_state);
  static const kjit_cache_stats& defaults() {
    static const kjit_cache_stats d = KJIT_CACHE_STATS_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_gemm_desc> {
  static constexpr const char* name = "kjit_gemm_desc";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_gemm_desc, d_scale);
  static const kjit_gemm_desc& defaults() {
    static const kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_gemm_options> {
  static constexpr const char* name = "kjit_gemm_options";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_gemm_options, max_workspace_bytes);
  static const kjit_gemm_options& defaults() {
    static const kjit_gemm_options d = KJIT_GEMM_OPTIONS_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_gemm_stats> {
  static constexpr const char* name = "kjit_gemm_stats";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_gemm_stats, workspace_bytes);
  static const kjit_gemm_stats& defaults() {
    static const kjit_gemm_stats d = KJIT_GEMM_STATS_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_launch_config> {
  static constexpr const char* name = "kjit_launch_config";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_launch_config, cooperative);
  static const kjit_launch_config& defaults() {
    static const kjit_launch_config d = KJIT_LAUNCH_CONFIG_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_kernel_attributes> {
  static constexpr const char* name = "kjit_kernel_attributes";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_kernel_attributes, binary_version);
  static const kjit_kernel_attributes& defaults() {
    static const kjit_kernel_attributes d = KJIT_KERNEL_ATTRIBUTES_INIT;
    return d;
  }
};

// Structs added after 0.1.0: v0_1 is the size of their first released layout.
template <>
struct Versioned<kjit_worker_info> {
  static constexpr const char* name = "kjit_worker_info";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_worker_info, rss_bytes);  // 0.2
  static const kjit_worker_info& defaults() {
    static const kjit_worker_info d = KJIT_WORKER_INFO_INIT;
    return d;
  }
};

// First released in 0.2: v0_1 is the size of that first layout.
template <>
struct Versioned<kjit_grouped_gemm_desc> {
  static constexpr const char* name = "kjit_grouped_gemm_desc";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_grouped_gemm_desc, beta);  // 0.2
  static const kjit_grouped_gemm_desc& defaults() {
    static const kjit_grouped_gemm_desc d = KJIT_GROUPED_GEMM_DESC_INIT;
    return d;
  }
};

template <>
struct Versioned<kjit_grouped_gemm_options> {
  static constexpr const char* name = "kjit_grouped_gemm_options";
  static constexpr size_t v0_1 = KJIT_V0_1_SIZE(kjit_grouped_gemm_options, schedule);  // 0.2
  static const kjit_grouped_gemm_options& defaults() {
    static const kjit_grouped_gemm_options d = KJIT_GROUPED_GEMM_OPTIONS_INIT;
    return d;
  }
};

#undef KJIT_V0_1_SIZE

// The 0.1.0 sizes on LP64 Linux, as recorded in abi/libkjit.abi: a change here is an ABI
// break.
static_assert(sizeof(void*) != 8 || Versioned<kjit_cache_options>::v0_1 == 56, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_cache_stats>::v0_1 == 496, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_gemm_desc>::v0_1 == 192, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_gemm_options>::v0_1 == 32, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_gemm_stats>::v0_1 == 96, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_launch_config>::v0_1 == 56, "0.1.0 layout");
static_assert(sizeof(void*) != 8 || Versioned<kjit_kernel_attributes>::v0_1 == 36,
              "0.1.0 layout");

// Checks a struct size for struct T; `what` and `field` name it for the message
// ("kjit_cache_open: opts", "->struct_size"). Returns KJIT_OK or
// KJIT_ERROR_INVALID_ARGUMENT with kjit_last_error() set. No allocation unless it fails
// (launches call it).
template <typename T>
kjit_status check_size(size_t size, const char* what, const char* field) {
  using V = Versioned<T>;
  if (size >= V::v0_1 && size <= kMaxStructSize) return KJIT_OK;
  std::string m = std::string(what) + field + " is " + std::to_string(size) + ", ";
  if (size == 0) {
    m += "not set";
  } else if (size < V::v0_1) {
    m += "smaller than any released " + std::string(V::name) + " (at least " +
         std::to_string(V::v0_1) + ")";
  } else {
    m += "larger than " + std::to_string(kMaxStructSize) + " (uninitialised?)";
  }
  m += "; initialise the struct with " + std::string(V::name) + "_init() or its INIT macro";
  set_last_error(m);
  return KJIT_ERROR_INVALID_ARGUMENT;
}

template <typename T>
kjit_status read_in_checked(const T* in, T* out, const char* what);

// Input struct: validates `in` (not NULL) and fills *out with the defaults overlaid by the
// first min(in->struct_size, sizeof(T)) bytes of *in. out->struct_size is sizeof(T). A
// struct of this very version (every call from code built against this kjit) is copied
// inline; every other case is read_in_checked's.
template <typename T>
inline kjit_status read_in(const T* in, T* out, const char* what) {
  if (in && in->struct_size == sizeof(T)) {
    std::memcpy(static_cast<void*>(out), in, sizeof(T));
    return KJIT_OK;
  }
  return read_in_checked(in, out, what);
}

// read_in for NULL, a size out of range, an older struct (completed with the defaults) or
// a newer one (whose bytes beyond this version's must be zero).
template <typename T>
kjit_status read_in_checked(const T* in, T* out, const char* what) {
  if (!in) {
    set_last_error(std::string(what) + " is NULL");
    return KJIT_ERROR_INVALID_ARGUMENT;
  }
  const size_t size = in->struct_size;
  if (kjit_status s = check_size<T>(size, what, "->struct_size")) return s;
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (bytes[i] != 0) {
      set_last_error(std::string(what) + "->struct_size is " + std::to_string(size) +
                     ", larger than this kjit's " + Versioned<T>::name + " (" +
                     std::to_string(sizeof(T)) + "), and byte " + std::to_string(i) +
                     " beyond it is set: the caller was built against a newer kjit and uses "
                     "a field this library does not know");
      return KJIT_ERROR_UNSUPPORTED;
    }
  }
  std::memcpy(static_cast<void*>(out), &Versioned<T>::defaults(), sizeof(T));
  std::memcpy(static_cast<void*>(out), in, size < sizeof(T) ? size : sizeof(T));
  out->struct_size = sizeof(T);
  return KJIT_OK;
}

// Output struct, step 1 (before any work): validates `out` and its struct_size, which is
// returned in *size.
template <typename T>
kjit_status check_out(const T* out, size_t* size, const char* what) {
  if (!out) {
    set_last_error(std::string(what) + " is NULL");
    return KJIT_ERROR_INVALID_ARGUMENT;
  }
  *size = out->struct_size;
  return check_size<T>(*size, what, "->struct_size");
}

// A full-size output struct holding the defaults, padding included, for the shims to fill
// field by field before write_out().
template <typename T>
T blank() {
  T t;
  std::memcpy(static_cast<void*>(&t), &Versioned<T>::defaults(), sizeof(T));
  return t;
}

// Output struct, step 2: writes `full` into the caller's struct of `size` bytes (from
// check_out): the known prefix, the caller's struct_size, zeros for the rest.
template <typename T>
void write_out(T* out, size_t size, const T& full) {
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(bytes, &full, n);
  if (size > sizeof(T)) std::memset(bytes + sizeof(T), 0, size - sizeof(T));
  const uint32_t caller_size = static_cast<uint32_t>(size);
  std::memcpy(bytes + offsetof(T, struct_size), &caller_size, sizeof caller_size);
}

// kjit_<x>_init_sized(): the defaults, written within `size` bytes only; struct_size = size.
template <typename T>
kjit_status init_sized(T* p, size_t size, const char* fn) {
  if (!p) {
    set_last_error(std::string(fn) + ": the struct pointer is NULL");
    return KJIT_ERROR_INVALID_ARGUMENT;
  }
  if (kjit_status s = check_size<T>(size, fn, ": size")) return s;
  write_out(p, size, Versioned<T>::defaults());
  return KJIT_OK;
}

// The kjit_<x>_init() symbols of 0.1.0, kept for binaries built against it: they write
// exactly the 0.1.0 size, whatever sizeof(T) has become since.
template <typename T>
void init_v0_1(T* p) {
  if (p) write_out(p, Versioned<T>::v0_1, Versioned<T>::defaults());
}

}  // namespace kjit::api
