// NVRTC is opened on the first compile, not when kjit is loaded: a process that only gets
// hits from the cache never maps libnvrtc (nvrtc/nvrtc_lib.h). The facts kjit needs
// from it on the way to a hit (its identity and architectures) come from the cache
// database, recorded by the process that compiled.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "kjit/kjit.h"
#include "nvrtc/nvrtc_lib.h"
#include "support/test_support.h"

namespace {

using kjit::test::TempDir;

const char* kSource = "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n";

bool nvrtc_mapped() {
  void* h = dlopen(KJIT_TEST_NVRTC_SONAME, RTLD_LAZY | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// Compiles `source` through a cache in `dir`; the tier it came from, or -1.
int compile(const std::string& dir, const char* source) {
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  if (kjit_cache_open(&co, &cache) != KJIT_OK) return -1;
  kjit_compiler* c = nullptr;
  kjit_compiler_create(cache, 1, &c);
  kjit_compiler_set_compile_mode(c, KJIT_COMPILE_MODE_INPROCESS);
  kjit_options* o = nullptr;
  kjit_options_create(&o);
  kjit_options_add(o, "-arch=sm_90");
  kjit_binary* b = nullptr;
  const int tier = kjit_compile(c, source, o, &b) == KJIT_OK ? int(kjit_binary_tier(b)) : -1;
  kjit_binary_destroy(b);
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
  return tier;
}

TEST(LazyNvrtc, AProcessThatOnlyHitsNeverOpensNvrtcAndTheFirstCompileDoes) {
  ASSERT_FALSE(nvrtc_mapped()) << "the test program must not link libnvrtc itself";
  TempDir d;
  // Another process compiles (and records the toolchain's facts).
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(compile(d.path(), kSource) == KJIT_TIER_COMPILED && nvrtc_mapped() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the compiling child failed";

  EXPECT_EQ(compile(d.path(), kSource), KJIT_TIER_DISK);
  EXPECT_FALSE(nvrtc_mapped()) << "a disk hit opened libnvrtc";
  EXPECT_FALSE(kjit::nvrtc_loaded());
  EXPECT_FALSE(kjit::nvrtc_library_file().empty()) << "the file is named without opening it";
  EXPECT_FALSE(nvrtc_mapped());

  // The first miss opens it: the very file that was named.
  const std::string named = kjit::nvrtc_library_file();
  EXPECT_EQ(compile(d.path(), "extern \"C\" __global__ void other() {}\n"), KJIT_TIER_COMPILED);
  EXPECT_TRUE(nvrtc_mapped());
  EXPECT_TRUE(kjit::nvrtc_loaded());
  EXPECT_EQ(kjit::nvrtc().library, named);
}

}  // namespace
