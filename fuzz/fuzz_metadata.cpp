// Fuzzes the decoding of an entry's JSON metadata: anything that is not valid metadata is
// KJIT_ERROR_CACHE_CORRUPT, and what decodes encodes back to metadata that decodes the same.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "store/entry.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  kjit::Entry e;
  try {
    e.load_metadata(json);
  } catch (const kjit::Error& err) {
    if (err.status() != KJIT_ERROR_CACHE_CORRUPT) kjit_fuzz::bug("unexpected status", err.message());
    return 0;
  }
  // Round trip. (Blob sizes are taken from the blobs when encoding, so set them.)
  e.ptx.assign(size_t(e.recorded_sizes.ptx % 4096), 'p');
  e.cubin.assign(size_t(e.recorded_sizes.cubin % 4096), 'c');
  e.ltoir.assign(size_t(e.recorded_sizes.ltoir % 4096), 'l');
  const std::string again = e.metadata_json();
  kjit::Entry f;
  try {
    f.load_metadata(again);
  } catch (const kjit::Error& err) {
    kjit_fuzz::bug("re-encoded metadata does not decode", err.message() + ": " + again);
  }
  if (f.target != e.target || f.options != e.options || f.kernels != e.kernels ||
      f.names != e.names || f.log != e.log || f.toolchain != e.toolchain ||
      f.recorded_sizes.ptx != e.ptx.size() || f.recorded_sizes.cubin != e.cubin.size() ||
      f.created != e.created) {
    kjit_fuzz::bug("metadata round trip changed it", again);
  }
  return 0;
}
