// Fuzzes the #include scanner: every reported target is a piece of one line of the text,
// and following includes through in-memory headers and a fixture directory terminates.
#include <cstdint>
#include <string>

#include "compile/include_scan.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kjit_fuzz::fixture_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> found = kjit::scan_include_directives(text);
  for (const std::string& t : found) {
    if (t.find('\n') != std::string::npos || (!t.empty() && text.find(t) == std::string::npos)) {
      kjit_fuzz::bug("scan_include_directives returned what the text does not hold", t);
    }
  }
  // The text split in two: a source and an in-memory header it may include.
  const size_t half = size / 2;
  kjit::IncludeScanInput in;
  in.source = kjit_fuzz::no_slashes(text.substr(0, half));
  in.headers = {{"m.h", kjit_fuzz::no_slashes(text.substr(half))}, {"a.h", "#include \"m.h\"\n"}};
  in.include_paths = {kjit_fuzz::fixture_dir()};
  const std::vector<kjit::IncludedFile> files = kjit::find_included_files(in);
  for (const auto& f : files) {
    if (f.path.rfind(kjit_fuzz::fixture_dir(), 0) != 0) {
      kjit_fuzz::bug("find_included_files left the include path", f.path);
    }
  }
  return 0;
}
