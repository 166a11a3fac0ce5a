// Fact files: small facts kept beside the entries so that later processes need not learn
// them again (toolchain identity, toolkit discovery, nvJitLink's identity; facts.h says who
// asks), one file per fact under <cache>/facts/, named by the hash of the fact's name. A
// fresh process reads them without opening the index. Format: docs/formats.md.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace kjit {

class FactFiles {
 public:
  // A fact file past this size reads as no fact (never allocated); a fact that would not
  // fit is refused.
  static constexpr size_t kMaxFactBytes = size_t(1) << 20;

  // The facts of the cache directory `cache_dir`; `read_only`: write() does nothing.
  explicit FactFiles(const std::string& cache_dir, bool read_only = false);

  // A fact by name, nullopt when none is recorded or its file does not verify (a damaged,
  // foreign or oversized file, or anything but a regular file there). Never throws for a
  // damaged file. Thread-safe.
  std::optional<std::string> read(const std::string& name) const;
  // Records a fact (temporary file, then rename: readers see the old value or the new).
  // Throws Error(KJIT_ERROR_CACHE). Thread-safe.
  void write(const std::string& name, const std::string& value) const;

 private:
  std::string dir_;
  bool read_only_;
};

}  // namespace kjit
