// Small persistent facts kept in the cache directory beside the entries, so that later
// processes need not learn them again: NVRTC's identity and architectures (toolchain.h),
// toolkit discoveries (toolkit.h), nvJitLink's identity, and named values in namespaces
// (tuned GEMM plans). Not entries: no key coverage, no eviction, no stats.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace kjit {

class FactFiles;
class NamedValues;

class Facts {
 public:
  // Facts are read and written through `files` (the cache's disk tier without its index:
  // fact files, read once), named values through `values` (which opens the index);
  // either may give nullptr (no disk tier). A failure is passed to `failed` (the cache
  // degrades its disk tier as for any other failure) and reads as nothing.
  using Failed = std::function<void(const std::exception&, const char* during)>;
  using Files = std::function<const FactFiles*()>;
  using Values = std::function<NamedValues*()>;
  Facts(Files files, Values values, Failed failed)
      : files_(std::move(files)), values_(std::move(values)), failed_(std::move(failed)) {}

  // A fact by name; nullopt without a disk tier or when none is recorded.
  std::optional<std::string> get(const std::string& name);
  // Records a fact (no-op without a disk tier).
  void set(const std::string& name, const std::string& value);
  // A value in namespace `ns`; put_value() is a no-op on a read-only disk tier.
  std::optional<std::string> get_value(const std::string& ns, const std::string& key);
  void put_value(const std::string& ns, const std::string& key, const std::string& value);

 private:
  Files files_;
  Values values_;
  Failed failed_;
};

}  // namespace kjit
