#include "store/export.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit {
namespace {

constexpr char kExportMagic[8] = {'K', 'J', 'I', 'T', 'E', 'X', 'P', '\x01'};

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool u64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= uint64_t(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
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

constexpr EntryPart kExportParts[4] = {EntryPart::Metadata, EntryPart::Ptx, EntryPart::Cubin,
                                       EntryPart::LtoIr};

// HMAC-SHA256 of a record under the fleet secret.
Digest record_signature(const std::string& key, const std::string& rec) {
  HmacSha256 h(key);
  h.field("kjit export record");
  h.update(rec);
  return h.finish();
}

std::string records_of(uint64_t n, const std::string& path) {
  return std::to_string(n) + (n == 1 ? " record of " : " records of ") + path;
}

// What an import of `path` found, for whoever reads the log (the kjit tool prints it).
void log_import(const std::string& path, const std::string& key, const ImportReport& r) {
  const uint64_t unsigned_rejected = key.empty() ? 0 : r.unsigned_records;
  if (unsigned_rejected) {
    log_warn(records_of(unsigned_rejected, path) +
             " rejected: unsigned, and with KJIT_EXPORT_KEY set every record must carry a "
             "valid signature");
  }
  if (r.bad_signatures) {
    log_warn(records_of(r.bad_signatures, path) +
             " rejected: the signature does not verify with KJIT_EXPORT_KEY (signed with "
             "another key, or altered)");
  }
  if (r.inconsistent) {
    log_warn(records_of(r.inconsistent, path) + " rejected: damaged or inconsistent");
  }
  if (key.empty() && r.unsigned_records) {
    log_warn(path +
             " is unsigned: its records were checked for damage and consistency, not "
             "for who wrote them (importing an export file runs its author's code; set "
             "KJIT_EXPORT_KEY to require signed records)");
  }
  if (key.empty() && r.signed_records) {
    log_warn(path +
             " is signed, but KJIT_EXPORT_KEY is not set: its signatures were not "
             "checked");
  }
}

}  // namespace

std::string encode_record(const Entry& e) {
  const std::string meta = e.metadata_json();
  const std::string_view bytes[4] = {meta, e.ptx, e.cubin, e.ltoir};
  WireWriter rec;
  rec.str(e.key);
  for (std::string_view b : bytes) rec.str(b);
  std::string sums;
  for (int i = 0; i < 4; ++i) {
    const Checksum c = entry_checksum(e.key, kExportParts[i], bytes[i]);
    sums.append(reinterpret_cast<const char*>(c.data()), c.size());
  }
  rec.str(sums);
  return std::move(rec.bytes());
}

bool decode_record(const std::string& bytes, Entry* out) {
  Reader fields(bytes);
  Entry e;
  std::string meta, ptx, cubin, ltoir, sums;
  if (!fields.field(&e.key) || !fields.field(&meta) || !fields.field(&ptx) ||
      !fields.field(&cubin) || !fields.field(&ltoir) || !fields.field(&sums) || !fields.done() ||
      !is_hex_key(e.key) || sums.size() != 4 * sizeof(Checksum)) {
    return false;
  }
  e.ptx = ptx;
  e.cubin = cubin;
  e.ltoir = ltoir;
  const std::string* parts[4] = {&meta, &ptx, &cubin, &ltoir};
  for (int i = 0; i < 4; ++i) {
    const std::string_view stored(sums.data() + i * sizeof(Checksum), sizeof(Checksum));
    if (!checksum_equals(stored, entry_checksum(e.key, kExportParts[i], *parts[i]))) return false;
  }
  try {
    e.load_metadata(meta);
  } catch (const Error&) {
    return false;
  }
  if (*e.parts_problem()) return false;
  *out = std::move(e);
  return true;
}

std::string export_key_from_environment() {
  const char* v = std::getenv("KJIT_EXPORT_KEY");
  const std::string key = v ? v : "";
  if (!key.empty() && key.size() < kMinExportKeyBytes) {
    fail(KJIT_ERROR_INVALID_ARGUMENT,
         "KJIT_EXPORT_KEY is " + std::to_string(key.size()) +
             " bytes; a signing key must be at "
             "least " +
             std::to_string(kMinExportKeyBytes) +
             " bytes (a random secret shared by the "
             "machines that exchange export files, e.g. the output of 'openssl rand -hex 32')");
  }
  return key;
}

uint64_t write_export(const std::string& path, const std::function<bool(Entry*)>& next,
                      const std::string& signing_key) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(KJIT_ERROR_IO, "cannot create " + tmp + ": " + std::strerror(errno));
  WireWriter head;
  head.bytes().assign(kExportMagic, sizeof kExportMagic);
  head.u64(kCacheFormatVersion);
  bool ok = std::fwrite(head.bytes().data(), 1, head.bytes().size(), f) == head.bytes().size();
  uint64_t count = 0;
  Entry e;
  while (ok && next(&e)) {
    const std::string rec = encode_record(e);
    WireWriter frame;
    frame.str(rec);
    const Digest d = sha256(rec);
    frame.bytes().append(reinterpret_cast<const char*>(d.data()), d.size());
    if (signing_key.empty()) {
      frame.u64(0);
    } else {
      const Digest sig = record_signature(signing_key, rec);
      frame.str(std::string_view(reinterpret_cast<const char*>(sig.data()), sig.size()));
    }
    ok = std::fwrite(frame.bytes().data(), 1, frame.bytes().size(), f) == frame.bytes().size();
    ++count;
  }
  WireWriter tail;
  tail.u64(0);
  ok = ok && std::fwrite(tail.bytes().data(), 1, 8, f) == 8;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(KJIT_ERROR_IO, "cannot write " + path + ": " + std::strerror(errno));
  }
  return count;
}

void read_export_bytes(const std::string& bytes, const std::function<void(const Entry&)>& accept,
                       const std::string& key, ImportReport* report) {
  Reader r(bytes);
  std::string magic;
  uint64_t version = 0;
  if (!r.bytes(sizeof kExportMagic, &magic) ||
      std::memcmp(magic.data(), kExportMagic, sizeof kExportMagic) != 0) {
    fail(KJIT_ERROR_CACHE_CORRUPT, "not a kjit export file (bad magic)");
  }
  if (!r.u64(&version)) fail(KJIT_ERROR_CACHE_CORRUPT, "export file is truncated");
  if (version != uint64_t(kCacheFormatVersion)) {
    // Keys hash the format version: entries of another version never match a compile here
    // (and those of version 1 had checksums that were not bound to their keys).
    fail(KJIT_ERROR_CACHE_CORRUPT,
         "export file has format version " + std::to_string(version) + ", this kjit reads " +
             std::to_string(kCacheFormatVersion) +
             " only (its keys could never match this kjit's compiles); export it again with "
             "this kjit");
  }
  for (uint64_t index = 0;; ++index) {
    uint64_t len = 0;
    if (!r.u64(&len)) fail(KJIT_ERROR_CACHE_CORRUPT, "export file is truncated");
    if (len == 0) break;
    std::string rec, sum, sig;
    if (!r.bytes(len, &rec) || !r.bytes(32, &sum) || !r.field(&sig)) {
      fail(KJIT_ERROR_CACHE_CORRUPT, "export file is truncated in record " + std::to_string(index));
    }
    ++(sig.empty() ? report->unsigned_records : report->signed_records);
    const Digest d = sha256(rec);
    if (std::memcmp(d.data(), sum.data(), d.size()) != 0) {
      ++report->rejected;
      ++report->inconsistent;
      continue;
    }
    if (!key.empty()) {
      // With a key every record must be signed with it: unsigned ones are refused too.
      if (sig.empty()) {
        ++report->rejected;
        continue;
      }
      if (!digest_equals(record_signature(key, rec), sig.data(), sig.size())) {
        ++report->rejected;
        ++report->bad_signatures;
        continue;
      }
    }
    Entry e;
    if (!decode_record(rec, &e)) {
      ++report->rejected;
      ++report->inconsistent;
      continue;
    }
    accept(e);
  }
  if (!r.done()) fail(KJIT_ERROR_CACHE_CORRUPT, "export file has trailing bytes");
}

void read_export(const std::string& path, const std::function<void(const Entry&)>& accept,
                 const std::string& key, ImportReport* report) {
  auto bytes = read_file(path);
  if (!bytes) fail(KJIT_ERROR_IO, "cannot read " + path + ": " + std::strerror(errno));
  try {
    read_export_bytes(*bytes, accept, key, report);
  } catch (const Error&) {
    log_import(path, key, *report);
    throw;
  }
  log_import(path, key, *report);
}

}  // namespace kjit
