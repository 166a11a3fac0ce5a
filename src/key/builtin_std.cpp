#include "key/builtin_std.h"

#include <map>

#include "key/request.h"
#include "util/sha256.h"

namespace kjit {
namespace {

// Raised by hand when the meaning of the set changes without its texts changing (the
// digest below covers every text).
constexpr int kBuiltinStdRevision = 1;

}  // namespace

const std::string_view* builtin_std_header(const std::string& name) {
  static const std::map<std::string, std::string_view> by_name = [] {
    std::map<std::string, std::string_view> m;
    for (const BuiltinHeader& h : builtin_std_texts()) m.emplace(h.name, h.text);
    return m;
  }();
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &it->second;
}

const std::string& builtin_std_version() {
  static const std::string version = [] {
    Sha256 h;
    h.field("kjit-builtin-std");
    h.u64(builtin_std_texts().size());
    for (const BuiltinHeader& b : builtin_std_texts()) {
      h.field(b.name);
      h.field(b.text);
    }
    return std::to_string(kBuiltinStdRevision) + ":" + to_hex(h.finish()).substr(0, 16);
  }();
  return version;
}

std::string builtin_std_marker(const std::vector<std::string>& names) {
  Sha256 h;
  h.field(builtin_std_version());
  h.u64(names.size());
  for (const std::string& name : names) h.field(name);
  return "-D__KJIT_BUILTIN_STD=0x" + to_hex(h.finish()).substr(0, 16);
}

CompileOptions with_builtin_std(const CompileOptions& opts, const std::vector<std::string>& names) {
  CompileOptions out = opts;
  for (const std::string& name : names) {
    if (const std::string_view* text = builtin_std_header(name)) {
      out.add_header(name, std::string(*text));
    }
  }
  return out;
}

}  // namespace kjit
