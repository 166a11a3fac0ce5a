// Fuzzes the public compile entry: kjit_options_* with arbitrary values, kjit_compute_key
// (source validation, option normalisation, include scanning, key) on every input, and
// kjit_compile through a memory-only cache, so NVRTC itself, when the input is small
// (at most kMaxNvrtcInput bytes; larger inputs would spend the run inside NVRTC) and has
// no name expressions (see below).
// Every status must be one kjit_compile documents; a successful compile must hit the
// second time with the same bytes.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_input.h"
#include "kjit/kjit.h"
#include "util/sha256.h"

namespace {

constexpr size_t kMaxNvrtcInput = 160;

kjit_cache* g_cache = nullptr;
kjit_compiler* g_compiler = nullptr;

bool documented(kjit_status s) {
  switch (s) {
    case KJIT_OK: case KJIT_ERROR_INVALID_ARGUMENT: case KJIT_ERROR_INVALID_SOURCE:
    case KJIT_ERROR_COMPILE: case KJIT_ERROR_INVALID_OPTION: case KJIT_ERROR_UNSUPPORTED_TARGET:
    case KJIT_ERROR_NAME_NOT_FOUND: case KJIT_ERROR_CUDA_UNAVAILABLE: case KJIT_ERROR_NVRTC:
      return true;
    default:
      return false;
  }
}

std::string data_of(const kjit_binary* b, int kind) {
  size_t n = 0;
  const void* p = kjit_binary_data(b, kind, &n);
  return p ? std::string(static_cast<const char*>(p), n) : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kjit_fuzz::no_gpu_driver();
  kjit_fuzz::enter_fixture_dir();
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  if (kjit_cache_open(&o, &g_cache) != KJIT_OK) std::abort();
  if (kjit_compiler_create(g_cache, 1, &g_compiler) != KJIT_OK) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kjit_fuzz::Request r = kjit_fuzz::parse(data, size);
  kjit_options* o = nullptr;
  if (kjit_options_create(&o) != KJIT_OK) std::abort();
  // Without the toolkit's headers: an input that includes CUB would spend seconds in NVRTC
  // parsing it, which tests NVRTC, not kjit's handling of the input.
  if (kjit_options_set_toolkit(o, "") != KJIT_OK) std::abort();
  // Setters either accept a value or reject it with a documented status.
  const kjit_status t = kjit_options_set_target(o, r.target.empty() ? "sm_90" : r.target.c_str());
  if (t != KJIT_OK) {
    if (t != KJIT_ERROR_INVALID_ARGUMENT) kjit_fuzz::bug("set_target", kjit_last_error());
    kjit_options_set_target(o, "sm_90");
  }
  if (kjit_options_set_outputs(o, r.outputs) != KJIT_OK &&
      kjit_options_set_outputs(o, 0) != KJIT_OK) {
    kjit_fuzz::bug("set_outputs", kjit_last_error());
  }
  kjit_options_set_name(o, (kjit_fuzz::fixture_dir() + "/fuzz.cu").c_str());
  for (const auto& opt : r.options) kjit_options_add(o, opt.c_str());
  for (const auto& [n, c] : r.headers) kjit_options_add_header(o, n.c_str(), c.c_str());
  for (const auto& e : r.exprs) kjit_options_add_name_expression(o, e.c_str());

  char key[65] = {};
  const kjit_status ks = kjit_compute_key(r.source.c_str(), o, key);
  if (!documented(ks)) kjit_fuzz::bug("kjit_compute_key status", std::to_string(ks) + " " + kjit_last_error());
  if (ks == KJIT_OK && !kjit::is_hex_key(key)) kjit_fuzz::bug("kjit_compute_key gave", key);

  // No name expressions with NVRTC: NVRTC 13.0 itself crashes (SIGSEGV inside
  // nvrtcCompileProgram) on a malformed template given a name expression, e.g.
  // "template <typename ~> __global__ void t(T* p) {}" with "t<int>" (fuzz/nvrtc-crash/).
  if (ks == KJIT_OK && size <= kMaxNvrtcInput && r.exprs.empty()) {
    kjit_binary* b = nullptr;
    const kjit_status st = kjit_compile(g_compiler, r.source.c_str(), o, &b);
    if (!documented(st)) kjit_fuzz::bug("kjit_compile status", std::to_string(st) + " " + kjit_last_error());
    if ((st == KJIT_OK || st == KJIT_ERROR_COMPILE) != (b != nullptr)) {
      kjit_fuzz::bug("kjit_compile binary", std::to_string(st));
    }
    if (b) {
      if (std::strcmp(kjit_binary_key(b), key) != 0) kjit_fuzz::bug("key differs", kjit_binary_key(b));
      (void)kjit_binary_log(b);
      (void)kjit_binary_metadata_json(b);
      for (size_t i = 0; i < kjit_binary_kernel_count(b); ++i) (void)kjit_binary_kernel_name(b, i);
      for (size_t i = 0; i < kjit_binary_name_count(b); ++i) {
        (void)kjit_binary_lowered_name(b, kjit_binary_name_expression(b, i));
      }
    }
    if (st == KJIT_OK) {
      kjit_binary* again = nullptr;
      if (kjit_compile(g_compiler, r.source.c_str(), o, &again) != KJIT_OK ||
          kjit_binary_tier(again) != KJIT_TIER_MEMORY ||
          data_of(again, KJIT_OUTPUT_PTX) != data_of(b, KJIT_OUTPUT_PTX) ||
          data_of(again, KJIT_OUTPUT_CUBIN) != data_of(b, KJIT_OUTPUT_CUBIN)) {
        kjit_fuzz::bug("second compile was not an identical hit", key);
      }
      kjit_binary_destroy(again);
    }
    kjit_binary_destroy(b);
  }
  kjit_options_destroy(o);
  return 0;
}
