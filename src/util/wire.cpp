#include "util/wire.h"

#include <cstring>

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
