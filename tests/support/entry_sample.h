// An entry with every field set to a value unlike its default and unlike every other
// field's, and small helpers to show encoded bytes: what the tests of the entry's
// encodings (payload metadata, JSON, export records, the worker's reply) encode and pin.
#pragma once

#include <string>

#include "store/entry.h"

namespace kjit::test {

inline Entry entry_with_distinct_fields() {
  Entry e;
  e.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  e.target = "sm_90a";
  e.ptx = "// ptx\n.entry k1 (";
  e.cubin = std::string(
      "\x7f"
      "ELF\0\x01",
      6);
  e.ltoir = std::string("lto\0ir\xff", 7);
  e.log = "ptxas info    : Potential Performance Loss: wgmma serialized\nwarning: \"x\"\n";
  e.names = {{"scale<float, 2>", "_Z5scaleIfLi2EEvPT_"}, {"g", ""}};
  e.kernels = {"_Z5scaleIfLi2EEvPT_", "k2"};
  e.options = {"-arch=sm_90a", "", "-DX=\"a b\""};
  e.toolchain = "nvrtc 13.0.88 CL-36424714";
  e.program_name = "fused.cu";
  e.compile_ms = 12.375;
  e.pch = PchOutcome::Used;
  e.manifest = "{\"records\":[]}";
  e.created = 1790000000;
  e.last_used = 1790000123;
  e.recorded_sizes = {18, 6, 7};
  return e;
}

// `bytes` as lowercase hex digits.
inline std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace kjit::test
