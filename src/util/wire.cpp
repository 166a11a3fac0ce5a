#include "util/wire.h"

#include <cstring>

#include "util/sha256.h"

namespace kjit {

void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

void WireWriter::u32(uint32_t v) {
  unsigned char b[4];
  put_le(b, v, 4);
  out_.append(reinterpret_cast<const char*>(b), 4);
}

void WireWriter::u64(uint64_t v) {
  unsigned char b[8];
  put_le(b, v, 8);
  out_.append(reinterpret_cast<const char*>(b), 8);
}

void WireWriter::f64(double v) {
  uint64_t bits;
  static_assert(sizeof bits == sizeof v, "double is not 64 bits");
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}

void WireWriter::str(std::string_view s) {
  u64(s.size());
  out_.append(s);
}

void WireWriter::strs(const std::vector<std::string>& v) {
  u64(v.size());
  for (const std::string& s : v) str(s);
}

void WireWriter::seal(Seal s) {
  const Digest sum = sha256(out_);
  const std::string_view d(reinterpret_cast<const char*>(sum.data()), sum.size());
  if (s == Seal::Prefixed)
    str(d);
  else
    raw(d);
}

std::optional<std::string_view> unseal(std::string_view record, WireWriter::Seal s) {
  const size_t prefix = s == WireWriter::Seal::Prefixed ? 8 : 0;
  constexpr size_t kSum = sizeof(Digest);
  if (record.size() < prefix + kSum) return std::nullopt;
  const std::string_view body = record.substr(0, record.size() - prefix - kSum);
  const std::string_view trailer = record.substr(body.size());
  if (prefix && get_le(reinterpret_cast<const unsigned char*>(trailer.data()), 8) != kSum)
    return std::nullopt;
  const Digest want = sha256(body);
  if (std::memcmp(trailer.data() + prefix, want.data(), kSum) != 0) return std::nullopt;
  return body;
}

void WireReader::need(uint64_t n) const {
  if (n > in_.size() - pos_) throw WireError("truncated message");
}

uint32_t WireReader::u32() {
  need(4);
  const auto v = uint32_t(get_le(reinterpret_cast<const unsigned char*>(in_.data()) + pos_, 4));
  pos_ += 4;
  return v;
}

uint64_t WireReader::u64() {
  need(8);
  const uint64_t v = get_le(reinterpret_cast<const unsigned char*>(in_.data()) + pos_, 8);
  pos_ += 8;
  return v;
}

double WireReader::f64() {
  const uint64_t bits = u64();
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::string WireReader::str() {
  const uint64_t n = u64();
  need(n);
  std::string s(in_.substr(pos_, size_t(n)));
  pos_ += size_t(n);
  return s;
}

std::string WireReader::raw(size_t n) {
  need(n);
  std::string s(in_.substr(pos_, n));
  pos_ += n;
  return s;
}

size_t WireReader::count() {
  const uint64_t n = u64();
  if (n > (in_.size() - pos_) / 8) throw WireError("count larger than the message");
  return size_t(n);
}

std::vector<std::string> WireReader::strs() {
  std::vector<std::string> v(count());
  for (std::string& s : v) s = str();
  return v;
}

void WireReader::finish() const {
  if (pos_ != in_.size()) throw WireError("unexpected bytes at the end of a message");
}

}  // namespace kjit
