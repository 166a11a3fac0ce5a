// Fuzzes option normalisation and the cache key encoding: normalise() must either reject a
// request with a documented status or produce a concrete target and NVRTC arguments, and
// the key must be 64 hex digits, identical when computed twice.
#include <cstdint>

#include "compile/compiler.h"
#include "fuzz_input.h"
#include "kjit/kjit.h"
#include "nvrtc/options.h"
#include "util/error.h"
#include "util/sha256.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kjit_fuzz::no_gpu_driver();
  kjit_fuzz::enter_fixture_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kjit_fuzz::Request r = kjit_fuzz::parse(data, size);
  kjit::CompileOptions opts;
  opts.target = r.target.empty() ? "sm_90" : r.target;
  opts.outputs = r.outputs;
  // In the fixture directory: a computed include makes the scan read the program's
  // directory, which must not be wherever the fuzzer runs.
  opts.name = kjit_fuzz::fixture_dir() + "/fuzz.cu";
  opts.raw = r.options;
  for (const auto& [n, c] : r.headers) opts.add_header(n, c);
  for (const auto& e : r.exprs) opts.add_name_expression(e);

  kjit::NormalisedOptions n;
  try {
    n = kjit::normalise(opts, kjit::machine_facts(opts, true));
  } catch (const kjit::Error& e) {
    if (e.status() != KJIT_ERROR_INVALID_OPTION && e.status() != KJIT_ERROR_UNSUPPORTED_TARGET &&
        e.status() != KJIT_ERROR_CUDA_UNAVAILABLE) {
      kjit_fuzz::bug("normalise: unexpected status", e.message());
    }
    return 0;
  }
  if (n.target.empty() || n.target == "auto" || n.nvrtc.empty() ||
      n.nvrtc[0] != "-arch=" + n.target) {
    kjit_fuzz::bug("normalise: inconsistent result", n.target);
  }
  if (n.outputs == 0 || (n.outputs & ~7u) || ((n.outputs & KJIT_OUTPUT_CUBIN) && !n.real_target)) {
    kjit_fuzz::bug("normalise: bad outputs", std::to_string(n.outputs));
  }
  if (!kjit::is_valid_target_syntax(n.target)) kjit_fuzz::bug("normalise: bad target", n.target);

  // Key encoding: deterministic, 64 hex digits, and the public option hash agrees with itself.
  kjit::Compiler compiler(nullptr, 1);
  std::string source = r.source.empty() ? "x" : r.source;
  try {
    const std::string k1 = compiler.request_hash(source, opts);
    const std::string k2 = compiler.request_hash(source, opts);
    if (!kjit::is_hex_key(k1) || k1 != k2) kjit_fuzz::bug("key", k1 + " / " + k2);
  } catch (const kjit::Error& e) {
    // Invalid UTF-8 or a NUL byte: in the source or a header's contents, or in a name.
    if (e.status() != KJIT_ERROR_INVALID_SOURCE && e.status() != KJIT_ERROR_INVALID_ARGUMENT) {
      kjit_fuzz::bug("key: unexpected status", e.message());
    }
  }
  std::vector<const char*> raw;
  for (const auto& o : n.key) raw.push_back(o.c_str());
  char hex[65];
  if (kjit_hash_options(raw.data(), raw.size(), hex) != KJIT_OK || !kjit::is_hex_key(hex)) {
    kjit_fuzz::bug("kjit_hash_options", kjit_last_error());
  }
  return 0;
}
