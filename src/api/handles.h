// The structs behind the public opaque handles, shared by the C shims. Each starts with a
// magic number so that NULL, destroyed and foreign pointers are caught in most cases.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "blas/gemm.h"
#include "compile/async.h"
#include "compile/compiler.h"
#include "grouped/grouped.h"
#include "kernel/kernel.h"
#include "kjit/kjit.h"
#include "link/linker.h"
#include "nvrtc/options.h"
#include "store/cache.h"
#include "util/error.h"

namespace kjit::api {

enum Magic : uint32_t {
  kCacheMagic = 0x4b4a4341,     // KJCA
  kOptionsMagic = 0x4b4a4f50,   // KJOP
  kCompilerMagic = 0x4b4a434f,  // KJCO
  kBinaryMagic = 0x4b4a4249,    // KJBI
  kFutureMagic = 0x4b4a4655,    // KJFU
  kKernelMagic = 0x4b4a4b45,    // KJKE
  kGemmMagic = 0x4b4a4745,      // KJGE
  kLinkerMagic = 0x4b4a4c49,    // KJLI
  kGroupedMagic = 0x4b4a4752,   // KJGR
  kSourceMagic = 0x4b4a534f,    // KJSO
  kDeadMagic = 0xdeadbeef
};

template <uint32_t M>
struct Handle {
  uint32_t magic = M;
  bool valid() const { return magic == M; }
  ~Handle() { magic = kDeadMagic; }
};

}  // namespace kjit::api

struct kjit_cache : kjit::api::Handle<kjit::api::kCacheMagic> {
  std::unique_ptr<kjit::Cache> cache;
};

struct kjit_options : kjit::api::Handle<kjit::api::kOptionsMagic> {
  kjit::CompileOptions opts;
};

struct kjit_source : kjit::api::Handle<kjit::api::kSourceMagic> {
  explicit kjit_source(std::string text) : source(std::move(text)) {}
  kjit::SourceObject source;
};

struct kjit_compiler : kjit::api::Handle<kjit::api::kCompilerMagic> {
  std::unique_ptr<kjit::Compiler> compiler;  // its pool finishes queued jobs on destruction
};

struct kjit_binary : kjit::api::Handle<kjit::api::kBinaryMagic> {
  kjit_status status = KJIT_OK;  // KJIT_OK, KJIT_ERROR_COMPILE or KJIT_ERROR_NAME_NOT_FOUND
  kjit::EntryPtr entry;
  kjit_tier tier = KJIT_TIER_COMPILED;
  std::string not_stored;  // why the compiled result was not stored (Outcome::not_stored)
  std::string metadata;    // built on first request
  std::once_flag metadata_once;
  std::vector<std::string> advisories;  // from the log, on first request
  std::once_flag advisories_once;
};

struct kjit_future : kjit::api::Handle<kjit::api::kFutureMagic> {
  std::shared_ptr<kjit::CompileFuture> state;  // shared with the job on the pool
};

struct kjit_kernel : kjit::api::Handle<kjit::api::kKernelMagic> {
  std::unique_ptr<kjit::Kernel> kernel;
};

struct kjit_gemm : kjit::api::Handle<kjit::api::kGemmMagic> {
  std::unique_ptr<kjit::blas::Gemm> gemm;
};

struct kjit_grouped_gemm : kjit::api::Handle<kjit::api::kGroupedMagic> {
  std::unique_ptr<kjit::grouped::GroupedGemm> gg;
};

struct kjit_linker : kjit::api::Handle<kjit::api::kLinkerMagic> {
  kjit::Cache* cache = nullptr;
  kjit::link::LinkRequest request;
};

namespace kjit::api {

// Wraps an outcome's entry in a new binary handle.
kjit_binary* make_binary(const Outcome& o);

// Runs `fn`, mapping exceptions to statuses and recording kjit_last_error(). Every
// entry point goes through this so no exception crosses the C boundary.
template <typename Fn>
kjit_status guard(Fn&& fn) noexcept {
  try {
    clear_last_error();
    return fn();
  } catch (...) {
    std::string message;
    const kjit_status status = status_of(std::current_exception(), &message);
    set_last_error(std::move(message));  // a move: does not allocate
    return status;
  }
}

// Returns a status with a message (for argument checks in shims).
inline kjit_status error(kjit_status s, const std::string& message) {
  set_last_error(message);
  return s;
}

template <typename H>
bool ok(const H* h) {
  return h && h->valid();
}

}  // namespace kjit::api
