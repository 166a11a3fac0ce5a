// Payload files of a cache directory read, written and damaged by hand. The layout of
// src/store/entry_files.cpp is spelled out again here, so that the tests check it rather
// than reuse it: magic "kjitent\n", u32 layout version (2: binary metadata, 1: JSON
// metadata), u32 header size 176, the key (64 bytes), u64 size of each part (metadata, PTX,
// CUBIN, LTO-IR), each part's 16-byte entry_checksum; then the parts. Little-endian.
#pragma once

#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "store/entry.h"

namespace kjit::test {

struct RawEntry {
  uint32_t layout = 2;  // the metadata part is Entry::metadata_binary() (2) or JSON (1)
  std::string key;
  std::string parts[4];  // metadata, PTX, CUBIN, LTO-IR
  // The part each checksum is computed as (0 metadata, 1 PTX, 2 CUBIN, 4 LTO-IR) and the
  // key it is bound to ("" = `key`): set them to forge a relabelled or moved part.
  int sum_as[4] = {0, 1, 2, 4};
  std::string sum_key;
};

inline std::string entry_file_path(const std::string& cache_dir, const std::string& key) {
  return cache_dir + "/entries/" + key.substr(0, 2) + "/" + key;
}

// The parts of a payload file's bytes (no check: the tests damage them on purpose).
inline RawEntry parse_raw_entry(const std::string& f) {
  if (f.size() < 176) throw std::runtime_error("not an entry file");
  RawEntry r;
  r.layout = 0;
  for (int b = 3; b >= 0; --b) r.layout = (r.layout << 8) | static_cast<unsigned char>(f[8 + b]);
  r.key = f.substr(16, 64);
  size_t at = 176;
  for (int i = 0; i < 4; ++i) {
    uint64_t n = 0;
    for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(f[80 + 8 * i + b]);
    r.parts[i] = f.substr(at, n);
    at += n;
  }
  return r;
}

// The bytes of a payload file holding `r`, checksums as r.sum_as and r.sum_key say.
inline std::string raw_entry_bytes(const RawEntry& r) {
  std::string h(176, '\0');
  std::memcpy(&h[0], "kjitent\n", 8);
  const uint32_t version = r.layout, header = 176;
  for (int b = 0; b < 4; ++b) {
    h[8 + b] = char(version >> (8 * b));
    h[12 + b] = char(header >> (8 * b));
  }
  h.replace(16, 64, r.key.substr(0, 64));
  std::string body;
  for (int i = 0; i < 4; ++i) {
    for (int b = 0; b < 8; ++b) h[80 + 8 * i + b] = char(uint64_t(r.parts[i].size()) >> (8 * b));
    const Checksum sum = entry_checksum(r.sum_key.empty() ? r.key : r.sum_key,
                                        static_cast<EntryPart>(r.sum_as[i]), r.parts[i]);
    std::memcpy(&h[112 + 16 * i], sum.data(), 16);
    body += r.parts[i];
  }
  return h + body;
}

// `r` as layout 1 wrote it: the same entry, its metadata as JSON.
inline void to_json_layout(RawEntry* r) {
  if (r->layout == 1) return;
  Entry e;
  e.load_metadata_binary(r->parts[0]);
  e.ptx = r->parts[1];
  e.cubin = r->parts[2];
  e.ltoir = r->parts[3];
  r->parts[0] = e.metadata_json();
  r->layout = 1;
}

// Where a payload file lives relative to its cache directory.
inline std::string entry_file_relative(const std::string& key) {
  return "entries/" + key.substr(0, 2) + "/" + key;
}

inline RawEntry read_raw_entry(const std::string& cache_dir, const std::string& key) {
  std::ifstream in(entry_file_path(cache_dir, key), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_raw_entry(ss.str());
}

inline void write_raw_entry(const std::string& cache_dir, const RawEntry& r) {
  const std::string dir = cache_dir + "/entries/" + r.key.substr(0, 2);
  ::mkdir((cache_dir + "/entries").c_str(), 0700);
  ::mkdir(dir.c_str(), 0700);
  std::ofstream out(entry_file_path(cache_dir, r.key), std::ios::binary | std::ios::trunc);
  out << raw_entry_bytes(r);
}

// Every payload file of the cache directory (not temporaries).
inline std::vector<std::string> entry_files(const std::string& cache_dir) {
  std::vector<std::string> out;
  const std::string root = cache_dir + "/entries";
  DIR* d = ::opendir(root.c_str());
  if (!d) return out;
  while (dirent* sub = ::readdir(d)) {
    if (std::strlen(sub->d_name) != 2 || sub->d_name[0] == '.') continue;
    DIR* s = ::opendir((root + "/" + sub->d_name).c_str());
    if (!s) continue;
    while (dirent* f = ::readdir(s)) {
      if (f->d_name[0] != '.') out.push_back(root + "/" + sub->d_name + "/" + f->d_name);
    }
    ::closedir(s);
  }
  ::closedir(d);
  return out;
}

}  // namespace kjit::test
