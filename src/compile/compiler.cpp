#include "compile/compiler.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "compile/include_scan.h"
#include "compile/nvrtc_program.h"
#include "compile/thread_pool.h"
#include "compile/toolchain.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// Length-prefixed, versioned encoding of everything that affects the output.
std::string compute_key(const std::string& source, const CompileOptions& opts,
                        const NormalisedOptions& norm, const std::string& toolchain) {
  Sha256 h;
  h.field("kjit-key");
  h.u64(kCacheFormatVersion);
  h.field(toolchain);
  h.field(norm.target);
  h.u64(norm.outputs);
  h.field(opts.name);
  h.field(source);
  auto headers = opts.headers;
  std::sort(headers.begin(), headers.end());
  h.u64(headers.size());
  for (const auto& [name, contents] : headers) {
    h.field(name);
    h.field(contents);
  }
  h.u64(norm.key.size());
  for (const auto& o : norm.key) h.field(o);
  h.u64(opts.name_expressions.size());
  for (const auto& e : opts.name_expressions) h.field(e);

  IncludeScanInput scan;
  scan.source = source;
  scan.program_dir = dirname_of(opts.name);
  scan.headers = opts.headers;
  scan.include_paths = norm.include_paths;
  scan.pre_includes = norm.pre_includes;
  scan.skip_root = toolkit_root();
  const std::vector<IncludedFile> files = find_included_files(scan);
  h.u64(files.size());
  for (const auto& f : files) {
    h.field(f.path);
    h.field(f.content);
  }
  return to_hex(h.finish());
}

}  // namespace

void validate_source(const std::string& source) {
  if (source.empty()) fail(KJIT_ERROR_INVALID_SOURCE, "source is empty");
  // UTF-8 validation (no overlongs, no surrogates, nothing above U+10FFFF).
  const auto* s = reinterpret_cast<const unsigned char*>(source.data());
  const size_t n = source.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path: eight bytes at a time while none has its high bit set.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      fail(KJIT_ERROR_INVALID_SOURCE, "source is not valid UTF-8 (byte " + std::to_string(i) + ")");
    }
    if (i + len > n) {
      fail(KJIT_ERROR_INVALID_SOURCE, "source is not valid UTF-8 (truncated at byte " +
                                          std::to_string(i) + ")");
    }
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        fail(KJIT_ERROR_INVALID_SOURCE,
             "source is not valid UTF-8 (byte " + std::to_string(i + k) + ")");
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                          (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail(KJIT_ERROR_INVALID_SOURCE, "source is not valid UTF-8 (byte " + std::to_string(i) + ")");
    }
    i += len;
  }
}

Compiler::Compiler(Cache* cache, unsigned threads)
    : cache_(cache),
      threads_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())) {}

Compiler::~Compiler() = default;  // the pool joins after finishing queued jobs

std::string Compiler::key(const std::string& source, const CompileOptions& opts) {
  validate_source(source);
  const NormalisedOptions norm = normalise(opts);
  return compute_key(source, opts, norm, toolchain());
}

Outcome Compiler::compile(const std::string& source, const CompileOptions& opts,
                          const CancelFlag& cancel) {
  validate_source(source);
  const NormalisedOptions norm = normalise(opts);
  const std::string& tool = toolchain();
  const std::string key = compute_key(source, opts, norm, tool);
  auto run = [&] { return run_nvrtc(source, opts, norm, key, tool, cancel); };
  if (!cache_) return run();
  std::function<bool()> cancelled;  // also ends a wait for another process's compile
  if (cancel) cancelled = [&cancel] { return cancel->load(std::memory_order_relaxed); };
  return cache_->get_or_compile(key, run, cancelled);
}

const std::string& Compiler::toolchain() {
  std::call_once(toolchain_once_, [this] { toolchain_ = toolchain_id(cache_); });
  return toolchain_;
}

void Compiler::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!pool_) pool_ = std::make_unique<ThreadPool>(threads_);
  pool_->submit(std::move(job));
}

}  // namespace kjit
