// Fuzzes the reading of a payload file (store/entry_files.h): any bytes in an entry's file
// are Missing, Ok or Corrupt, never a crash or an exception other than kjit::Error; what
// reads as Ok is written back and reads the same (the layout round-trips).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_input.h"
#include "store/entry_files.h"
#include "util/error.h"
#include "util/fs.h"

namespace {

// One private cache directory for the whole run.
const std::string& cache_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/kjit-fuzz-entries-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

const std::string kKey(64, 'a');

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kjit::EntryFiles files(cache_dir());
  const std::string path = files.path(kKey);
  kjit::make_directories(kjit::dirname_of(path), 0700);
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  kjit::Entry e;
  e.key = kKey;
  std::string why;
  kjit::EntryFiles::Read read = kjit::EntryFiles::Read::Missing;
  try {
    read = files.read(kKey, &e, false, &why);
  } catch (const kjit::Error& err) {
    kjit_fuzz::bug("reading a damaged file threw", err.message());
  }
  if (read == kjit::EntryFiles::Read::Missing)
    kjit_fuzz::bug("a file that exists read as missing", "");
  if (read == kjit::EntryFiles::Read::Corrupt) {
    if (why.empty()) kjit_fuzz::bug("corrupt without a reason", "");
    return 0;
  }
  // Sound: written back, it reads the same.
  files.install(files.write_temp(e, e.created), kKey);
  kjit::Entry again;
  again.key = kKey;
  if (files.read(kKey, &again, false, &why) != kjit::EntryFiles::Read::Ok || again.ptx != e.ptx ||
      again.cubin != e.cubin || again.ltoir != e.ltoir || again.names != e.names ||
      again.kernels != e.kernels || again.log != e.log || again.created != e.created) {
    kjit_fuzz::bug("a sound entry did not round-trip", why);
  }
  return 0;
}
