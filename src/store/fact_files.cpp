// Fact files (fact_files.h): one checksummed file per fact.
#include "store/fact_files.h"

#include <string_view>

#include "store/entry.h"
#include "store/file_put.h"
#include "util/checksum.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/safe_file.h"
#include "util/sha256.h"
#include "util/wire.h"

namespace kjit {
namespace {

// The checksum of a fact file's contents before the checksum itself.
Checksum fact_sum(std::string_view body) {
  ChecksumStream h;
  h.field("kjit fact");
  h.field(body);
  return h.finish();
}

std::string fact_file_name(const std::string& name) {
  return to_hex(sha256(name)).substr(0, 32);
}

}  // namespace

FactFiles::FactFiles(const std::string& cache_dir, bool read_only)
    : dir_(join_path(cache_dir, "facts")), read_only_(read_only) {}

std::optional<std::string> FactFiles::read(const std::string& name) const {
  const std::string file = join_path(dir_, fact_file_name(name));
  std::string why;
  // Only a regular file of a fact's size is read: a FIFO, a device or a link there (to
  // /dev/zero, say) is no fact, and never blocks or fills the process.
  const std::optional<std::string> text = read_regular_file(file, kMaxFactBytes, false, &why);
  if (!text && !why.empty()) log_debug("cache fact file " + file + " ignored: " + why);
  // 8-byte name length, the name, the value, then the 16-byte checksum of what precedes it.
  if (!text || text->size() < 24) return std::nullopt;
  const std::string_view body(text->data(), text->size() - 16);
  const uint64_t name_len = get_le(reinterpret_cast<const unsigned char*>(text->data()), 8);
  if (!checksum_equals(std::string_view(*text).substr(body.size()), fact_sum(body)) ||
      name_len != name.size() || body.size() < 8 + name_len ||
      body.compare(8, name_len, name) != 0) {
    return std::nullopt;
  }
  return std::string(body.substr(8 + name_len));
}

void FactFiles::write(const std::string& name, const std::string& value) const {
  if (read_only_) return;
  if (name.size() + value.size() + 24 > kMaxFactBytes) {
    fail(KJIT_ERROR_CACHE, "cache fact " + name + " is larger than a fact file may be");
  }
  unsigned char len[8];
  put_le(len, name.size(), 8);
  std::string body(reinterpret_cast<const char*>(len), 8);
  body += name;
  body += value;
  const Checksum sum = fact_sum(body);
  const std::string file = fact_file_name(name);
  const std::string temp = write_new_file(
      dir_, file, {body, std::string_view(reinterpret_cast<const char*>(sum.data()), 16)});
  move_into_place(temp, join_path(dir_, file));
}

}  // namespace kjit
