// Fuzzes the export/import reader (and the record codec the remote tier shares): damaged
// files are KJIT_ERROR_CACHE_CORRUPT or rejected records, never a crash; every accepted
// entry is complete and encodes back to a record that decodes to the same entry; reading
// with a signing key never accepts more than reading without one.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "store/export.h"
#include "util/error.h"
#include "util/sha256.h"

namespace {

void check_entry(const kjit::Entry& e) {
  if (!kjit::is_hex_key(e.key)) kjit_fuzz::bug("accepted entry with a bad key", e.key);
  if (e.ptx.size() != e.recorded_sizes.ptx || e.cubin.size() != e.recorded_sizes.cubin ||
      e.ltoir.size() != e.recorded_sizes.ltoir || (e.ptx.empty() && e.cubin.empty() && e.ltoir.empty())) {
    kjit_fuzz::bug("accepted an incomplete entry", e.key);
  }
  kjit::Entry back;
  if (!kjit::decode_record(kjit::encode_record(e), &back) || back.key != e.key ||
      back.ptx != e.ptx || back.cubin != e.cubin || back.ltoir != e.ltoir ||
      back.kernels != e.kernels || back.names != e.names) {
    kjit_fuzz::bug("record round trip changed the entry", e.key);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Unsigned reading, then with a signing key: the key only ever takes records away.
  uint64_t accepted[2] = {0, 0};
  const std::string keys[2] = {"", "fuzz-signing-key-0123456789"};
  for (int k = 0; k < 2; ++k) {
    kjit::ImportReport report;
    try {
      kjit::read_export_bytes(bytes, [&](const kjit::Entry& e) {
        check_entry(e);
        ++accepted[k];
      }, keys[k], &report);
    } catch (const kjit::Error& e) {
      if (e.status() != KJIT_ERROR_CACHE_CORRUPT) kjit_fuzz::bug("unexpected status", e.message());
    }
    if (report.rejected > report.signed_records + report.unsigned_records) {
      kjit_fuzz::bug("more records rejected than read", std::to_string(report.rejected));
    }
  }
  if (accepted[1] > accepted[0]) kjit_fuzz::bug("a key accepted more records", "");
  // The same bytes as one record (what a remote tier hands back).
  kjit::Entry e;
  if (kjit::decode_record(bytes, &e)) check_entry(e);
  return 0;
}
