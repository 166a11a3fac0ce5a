// Fuzzes the #include scanner: every reported target is a piece of one line of the text,
// and following includes through in-memory headers and a fixture directory terminates.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "key/include_scan.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kjit_fuzz::enter_fixture_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<kjit::IncludeRef> found = kjit::scan_directives(text).refs;
  for (const kjit::IncludeRef& r : found) {
    if (r.name.find('\n') != std::string::npos) {
      kjit_fuzz::bug("scan_directives returned a name across lines", r.name);
    }
  }
  // The text split in two: a source and an in-memory header it may include.
  const size_t half = size / 2;
  kjit::IncludeScanInput in;
  in.source = kjit_fuzz::no_slashes(text.substr(0, half));
  in.program_name = kjit_fuzz::fixture_dir() + "/kernel.cu";
  in.headers = {{"m.h", kjit_fuzz::no_slashes(text.substr(half))}, {"a.h", "#include \"m.h\"\n"}};
  in.include_paths = {kjit_fuzz::fixture_dir()};
  const kjit::IncludeScan scan = kjit::scan_includes(in);
  for (const auto& f : scan.files) {
    if (f.path.rfind(kjit_fuzz::fixture_dir(), 0) != 0) {
      kjit_fuzz::bug("scan_includes left the include path", f.path);
    }
  }
  return 0;
}
