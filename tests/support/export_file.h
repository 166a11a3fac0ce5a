// Export files and records taken apart and put together again, the way someone with a hex
// editor and the layout of store/export.h would (tests/store/test_cache_*export.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/entry.h"
#include "util/checksum.h"
#include "util/sha256.h"

namespace kjit::test::capi {

inline uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

inline std::string u64_bytes(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// The frames of an export file (see store/export.h for the layout).
struct Frame {
  std::string record, signature;  // signature: "" when unsigned
};
struct ExportFile {
  std::string header;  // magic and version
  std::vector<Frame> frames;
};

inline ExportFile split_export(const std::string& bytes) {
  ExportFile f;
  f.header = bytes.substr(0, 16);
  size_t at = 16;
  auto fits = [&](uint64_t n) { return at <= bytes.size() && n <= bytes.size() - at; };
  for (;;) {
    if (!fits(8)) break;
    const uint64_t len = get_u64(bytes, at);
    at += 8;
    if (len == 0) break;
    if (!fits(len + 40)) break;
    Frame fr;
    fr.record = bytes.substr(at, len);
    at += len + 32;  // the record and its SHA-256
    const uint64_t sig = get_u64(bytes, at);
    at += 8;
    if (!fits(sig)) break;
    fr.signature = bytes.substr(at, sig);
    at += sig;
    f.frames.push_back(fr);
  }
  EXPECT_EQ(at, bytes.size()) << "not an export file of this layout";
  return f;
}

// Writes the frames back, each one's SHA-256 recomputed.
inline std::string join_export(const ExportFile& f) {
  std::string out = f.header;
  for (const Frame& fr : f.frames) {
    const kjit::Digest d = kjit::sha256(fr.record);
    out += u64_bytes(fr.record.size()) + fr.record +
           std::string(reinterpret_cast<const char*>(d.data()), 32) +
           u64_bytes(fr.signature.size()) + fr.signature;
  }
  return out + u64_bytes(0);
}

inline std::string record_key(const std::string& rec) {
  return rec.substr(8, 64);
}

inline kjit::Entry sample_entry() {
  kjit::Entry e;
  e.key = std::string(64, 'c');
  e.target = "sm_90";
  e.ptx = ".version 9.0\n.target sm_90\n";
  e.cubin = std::string(
                "\x7f"
                "ELF",
                4) +
            std::string(100, '\1');
  e.kernels = {"k"};
  e.toolchain = "test";
  return e;
}

// A record built by hand (key, `meta`, the blobs of `e`, checksums made to match), as a
// forger who knows the layout would.
inline std::string record_for(const kjit::Entry& e, const std::string& meta) {
  const std::string_view parts[4] = {meta, e.ptx, e.cubin, e.ltoir};
  const kjit::EntryPart kinds[4] = {kjit::EntryPart::Metadata, kjit::EntryPart::Ptx,
                                    kjit::EntryPart::Cubin, kjit::EntryPart::LtoIr};
  std::string r = u64_bytes(e.key.size()) + e.key, sums;
  for (int i = 0; i < 4; ++i) {
    r += u64_bytes(parts[i].size()) + std::string(parts[i]);
    const kjit::Checksum c = kjit::entry_checksum(e.key, kinds[i], parts[i]);
    sums.append(reinterpret_cast<const char*>(c.data()), c.size());
  }
  return r + u64_bytes(sums.size()) + sums;
}

}  // namespace kjit::test::capi
