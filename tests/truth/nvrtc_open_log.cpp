// Compiles one program with NVRTC alone (no kjit) while the open spy is armed, so the test
// learns which files NVRTC itself opens. Usage (run in the program's working directory):
//   nvrtc_open_log SOURCE_FILE PROGRAM_NAME [HEADER_NAME HEADER_FILE]... -- [OPTION]...
// Exit status: 0 compiled, 1 compile error, 2 usage or NVRTC failure.
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string source = slurp(argv[1]);
  const char* name = argv[2];
  std::vector<std::string> header_names, header_texts;
  int i = 3;
  for (; i + 1 < argc && std::strcmp(argv[i], "--") != 0; i += 2) {
    header_names.push_back(argv[i]);
    header_texts.push_back(slurp(argv[i + 1]));
  }
  if (i >= argc || std::strcmp(argv[i], "--") != 0) return 2;
  std::vector<const char*> opts;
  for (++i; i < argc; ++i) opts.push_back(argv[i]);
  std::vector<const char*> hn, ht;
  for (size_t k = 0; k < header_names.size(); ++k) {
    hn.push_back(header_names[k].c_str());
    ht.push_back(header_texts[k].c_str());
  }
  auto arm = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "kjit_open_spy_arm"));
  if (!arm) {
    std::fprintf(stderr, "nvrtc_open_log: the open spy is not preloaded\n");
    return 2;
  }
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), name, int(hn.size()), ht.data(), hn.data()) !=
      NVRTC_SUCCESS) {
    return 2;
  }
  arm(1);
  const nvrtcResult r = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  arm(0);
  nvrtcDestroyProgram(&prog);
  if (r == NVRTC_SUCCESS) return 0;
  return r == NVRTC_ERROR_COMPILATION ? 1 : 2;
}
