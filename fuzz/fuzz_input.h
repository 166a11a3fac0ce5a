// Shared by the fuzz targets: turns fuzzer bytes into a compile request that is safe to
// hand to kjit on any machine (no file outside a private fixture directory is read, no GPU
// driver is touched), and checks that statuses stay within the documented set.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kjit_fuzz {

// A private include directory: a.h includes b.h, c.h has a computed include.
inline const std::string& fixture_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/kjit-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    std::string out = d ? d : "/tmp";
    auto put = [&](const char* name, const char* text) {
      if (FILE* f = std::fopen((out + "/" + name).c_str(), "w")) {
        std::fputs(text, f);
        std::fclose(f);
      }
    };
    put("a.h", "#pragma once\n#include \"b.h\"\n#define A 1\n");
    put("b.h", "#pragma once\n#include <c.h>\n#define B 2\n");
    put("c.h", "#pragma once\n#define HDR \"a.h\"\n#include HDR\n");
    static const std::string* const removed_at_exit = new std::string(out);  // outlives statics
    std::atexit([] {
      for (const char* name : {"a.h", "b.h", "c.h"}) {
        std::remove((*removed_at_exit + "/" + name).c_str());
      }
      rmdir(removed_at_exit->c_str());
    });
    return out;
  }();
  return dir;
}

// Makes the fixture directory the working directory: a program whose name has no
// directory, or a pre-include, is searched for there, and a computed include makes the
// scan read the searched directories whole. In a directory other processes write to, the
// key would change between two calls (correctly, but not what the targets check).
// Corpus and artifact paths must then be absolute (tools/fuzz.sh passes them so).
inline void enter_fixture_dir() {
  if (chdir(fixture_dir().c_str()) != 0) std::abort();
}

inline void no_gpu_driver() { setenv("KJIT_CUDA_DRIVER", "/nonexistent/kjit-fuzz/libcuda.so.1", 1); }

// Input layout (lines): target, outputs, then options until a line "---", then the source.
// An option line "H:name=text" adds an in-memory header, "N:expr" a name expression.
struct Request {
  std::string target;
  unsigned outputs = 0;
  std::vector<std::string> options, exprs;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string source;
};

inline std::string no_slashes(std::string s) {
  for (char& c : s) {
    if (c == '/') c = '_';  // includes stay inside the fixture directory
  }
  return s;
}

inline Request parse(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  Request r;
  size_t pos = 0;
  auto line = [&](std::string* out) {
    if (pos > in.size()) return false;
    size_t nl = in.find('\n', pos);
    if (nl == std::string::npos) nl = in.size();
    *out = in.substr(pos, nl - pos);
    pos = nl + 1;
    return true;
  };
  std::string l;
  if (line(&l)) r.target = l == "auto" ? "sm_90" : l;  // "auto" would need a GPU
  if (line(&l) && !l.empty()) r.outputs = unsigned(static_cast<unsigned char>(l[0]) % 8);
  while (line(&l) && l != "---") {
    const size_t lead = l.find_first_not_of(" \t\r\n\v\f");
    const std::string trimmed = lead == std::string::npos ? "" : l.substr(lead);
    if (l.rfind("H:", 0) == 0) {
      const size_t eq = l.find('=');
      r.headers.emplace_back(l.substr(2, eq == std::string::npos ? std::string::npos : eq - 2),
                             no_slashes(eq == std::string::npos ? "" : l.substr(eq + 1)));
    } else if (l.rfind("N:", 0) == 0) {
      r.exprs.push_back(l.substr(2));
    } else if (trimmed.rfind("-I", 0) == 0 || trimmed.rfind("--include-path", 0) == 0) {
      r.options.push_back("-I" + fixture_dir());
    } else if (l.find('/') == std::string::npos && l.find('.') == std::string::npos) {
      r.options.push_back(l);  // no paths: "-I." or "-include=..x" would leave the fixture
    }
  }
  if (pos < in.size()) r.source = no_slashes(in.substr(pos));
  return r;
}

[[noreturn]] inline void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "kjit fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace kjit_fuzz
