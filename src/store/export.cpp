#include "store/export.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kjit {
namespace {

constexpr char kMagic[8] = {'K', 'J', 'I', 'T', 'E', 'X', 'P', '\x01'};

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_field(std::string* out, const std::string& s) {
  put_u64(out, s.size());
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool u64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return true;
  }
  bool bytes(uint64_t n, std::string* out) {
    if (data_.size() - pos_ < n) return false;
    out->assign(data_, pos_, n);
    pos_ += n;
    return true;
  }
  bool field(std::string* out) {
    uint64_t n;
    return u64(&n) && bytes(n, out);
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  const std::string& data_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_record(const Entry& e) {
  std::string rec;
  put_field(&rec, e.key);
  put_field(&rec, e.metadata_json());
  put_field(&rec, e.ptx);
  put_field(&rec, e.cubin);
  put_field(&rec, e.ltoir);
  return rec;
}

bool decode_record(const std::string& bytes, Entry* out) {
  Reader fields(bytes);
  Entry e;
  std::string meta;
  if (!fields.field(&e.key) || !fields.field(&meta) || !fields.field(&e.ptx) ||
      !fields.field(&e.cubin) || !fields.field(&e.ltoir) || !fields.done() ||
      !is_hex_key(e.key)) {
    return false;
  }
  try {
    e.load_metadata(meta);
  } catch (const Error&) {
    return false;
  }
  if (e.ptx.size() != e.recorded_sizes.ptx || e.cubin.size() != e.recorded_sizes.cubin ||
      e.ltoir.size() != e.recorded_sizes.ltoir ||
      (e.ptx.empty() && e.cubin.empty() && e.ltoir.empty())) {
    return false;
  }
  *out = std::move(e);
  return true;
}

uint64_t write_export(const std::string& path, const std::function<bool(Entry*)>& next) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(KJIT_ERROR_IO, "cannot create " + tmp + ": " + std::strerror(errno));
  std::string head(kMagic, sizeof kMagic);
  put_u64(&head, kCacheFormatVersion);
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  uint64_t count = 0;
  Entry e;
  while (ok && next(&e)) {
    const std::string rec = encode_record(e);
    std::string frame;
    put_u64(&frame, rec.size());
    const Digest d = sha256(rec);
    ok = std::fwrite(frame.data(), 1, frame.size(), f) == frame.size() &&
         std::fwrite(rec.data(), 1, rec.size(), f) == rec.size() &&
         std::fwrite(d.data(), 1, d.size(), f) == d.size();
    ++count;
  }
  std::string tail;
  put_u64(&tail, 0);
  ok = ok && std::fwrite(tail.data(), 1, tail.size(), f) == tail.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(KJIT_ERROR_IO, "cannot write " + path + ": " + std::strerror(errno));
  }
  return count;
}

void read_export_bytes(const std::string& bytes, const std::function<void(const Entry&)>& accept,
                       uint64_t* rejected) {
  Reader r(bytes);
  std::string magic;
  uint64_t version = 0;
  if (!r.bytes(sizeof kMagic, &magic) || std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) {
    fail(KJIT_ERROR_CACHE_CORRUPT, "not a kjit export file (bad magic)");
  }
  if (!r.u64(&version) || version != uint64_t(kCacheFormatVersion)) {
    fail(KJIT_ERROR_CACHE_CORRUPT, "export file has format version " + std::to_string(version) +
                                       ", this kjit reads " + std::to_string(kCacheFormatVersion));
  }
  for (uint64_t index = 0;; ++index) {
    uint64_t len = 0;
    if (!r.u64(&len)) fail(KJIT_ERROR_CACHE_CORRUPT, "export file is truncated");
    if (len == 0) break;
    std::string rec, sum;
    if (!r.bytes(len, &rec) || !r.bytes(32, &sum)) {
      fail(KJIT_ERROR_CACHE_CORRUPT,
           "export file is truncated in record " + std::to_string(index));
    }
    const Digest d = sha256(rec);
    if (std::memcmp(d.data(), sum.data(), d.size()) != 0) {
      ++*rejected;
      continue;
    }
    Entry e;
    if (!decode_record(rec, &e)) {
      ++*rejected;
      continue;
    }
    accept(e);
  }
  if (!r.done()) fail(KJIT_ERROR_CACHE_CORRUPT, "export file has trailing bytes");
}

void read_export(const std::string& path, const std::function<void(const Entry&)>& accept,
                 uint64_t* rejected) {
  auto bytes = read_file(path);
  if (!bytes) fail(KJIT_ERROR_IO, "cannot read " + path + ": " + std::strerror(errno));
  read_export_bytes(*bytes, accept, rejected);
}

}  // namespace kjit
