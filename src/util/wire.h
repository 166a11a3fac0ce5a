// Little-endian fixed-width numbers and length-prefixed strings: the compile worker's
// messages (worker/protocol.h), the metadata of payload files (store/entry.h), the
// records of export files (store/export.h) and the GEMM plan records (blas/plan.h,
// grouped/plan.h). docs/formats.md states each format.
// The reader checks every length against what is left before it reads or allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// `bytes` (at most 8) of `v` at `p`, least significant first; and back.
void put_le(unsigned char* p, uint64_t v, int bytes);
uint64_t get_le(const unsigned char* p, int bytes);

// What the reader throws for input that does not hold what is asked of it.
struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class WireWriter {
 public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void f64(double v);  // its bits, as u64
  void str(std::string_view s);
  void strs(const std::vector<std::string>& v);
  void raw(std::string_view s) { out_.append(s); }  // no length: the reader knows it
  // Appends the SHA-256 of everything written so far (32 bytes; with a u64 length first
  // when `s` is Seal::Prefixed).
  enum class Seal { Raw, Prefixed };
  void seal(Seal s);
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

// Reads `in`, which must outlive it. Each call throws WireError when `in` is too short.
class WireReader {
 public:
  explicit WireReader(std::string_view in) : in_(in) {}
  uint32_t u32();
  uint64_t u64();
  double f64();
  std::string str();
  std::vector<std::string> strs();
  std::string raw(size_t n);  // `n` bytes as they are
  // A count of items that take at least 8 bytes each: never more than what is left can hold.
  size_t count();
  bool boolean() { return u32() != 0; }
  void finish() const;                        // throws unless every byte was read
  size_t size() const { return in_.size(); }  // of the whole input

 private:
  void need(uint64_t n) const;
  std::string_view in_;
  size_t pos_ = 0;
};

// The body of a record sealed by WireWriter::seal(s): `record` less its digest, or
// nullopt when it is too short for one or the digest does not match.
std::optional<std::string_view> unseal(std::string_view record, WireWriter::Seal s);

}  // namespace kjit
