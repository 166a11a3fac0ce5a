// NVRTC is opened on the first compile, not when kjit is loaded: a process that only gets
// hits from the cache never maps libnvrtc (cuda/nvrtc_lib.h). The facts kjit needs
// from it on the way to a hit (its identity and architectures) come from the cache's fact
// files, recorded by the process that compiled; its file is found without opening it, in
// the loader's cache too (util/dl.h).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/nvrtc_lib.h"
#include "kjit/kjit.h"
#include "support/test_support.h"
#include "util/dl.h"

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

// A loader cache in glibc's current format: the header, then one entry per (soname, path,
// hwcap), then the strings (offsets from the start of the file).
std::string loader_cache(const std::vector<std::tuple<std::string, std::string, uint64_t>>& libs) {
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> at;
  const size_t strings_at = 48 + 24 * libs.size();
  for (const auto& [name, path, hwcap] : libs) {
    const uint32_t k = uint32_t(strings_at + strings.size());
    strings += name + '\0';
    const uint32_t v = uint32_t(strings_at + strings.size());
    strings += path + '\0';
    at.emplace_back(k, v);
  }
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  std::string out = "glibc-ld.so.cache1.1" + u32(uint32_t(libs.size())) +
                    u32(uint32_t(strings.size())) +
                    std::string(20, '\0');  // to the 48-byte header's end
  for (size_t i = 0; i < libs.size(); ++i) {
    const uint64_t hwcap = std::get<2>(libs[i]);
    out += u32(0x0303) + u32(at[i].first) + u32(at[i].second) + u32(0) +
           std::string(reinterpret_cast<const char*>(&hwcap), 8);
  }
  return out + strings;
}

TEST(LoaderCache, OneEntryOfTheRightKindNamesItsFile) {
  TempDir d;
  char exe[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  const std::string self = exe, other = d.file("other");
  kjit::test::write_file(other, std::string("\x7f"
                                            "ELF",
                                            4) +
                                    std::string(60, '\1'));  // another machine
  const std::string cache = d.file("ld.so.cache");
  auto find = [&](const std::vector<std::tuple<std::string, std::string, uint64_t>>& libs) {
    kjit::test::write_file(cache, loader_cache(libs));
    return kjit::find_in_loader_cache("libx.so.1", cache);
  };
  EXPECT_EQ(find({{"liby.so.1", other, 0}, {"libx.so.1", self, 0}}), self);
  EXPECT_EQ(find({{"liby.so.1", self, 0}}), "") << "not in the cache";
  EXPECT_EQ(find({{"libx.so.1", self, 0}, {"libx.so.1", self, 0}}), "") << "two entries";
  EXPECT_EQ(find({{"libx.so.1", self, 1}}), "") << "specific to hardware capabilities";
  EXPECT_EQ(find({{"libx.so.1", d.file("missing"), 0}}), "") << "no such file";
  EXPECT_EQ(find({{"libx.so.1", other, 0}}), "") << "another machine's library";
  std::string bytes = loader_cache({{"libx.so.1", self, 0}});
  kjit::test::write_file(cache, bytes.substr(0, 60));
  EXPECT_EQ(kjit::find_in_loader_cache("libx.so.1", cache), "") << "truncated";
  bytes[0] = 'G';
  kjit::test::write_file(cache, bytes);
  EXPECT_EQ(kjit::find_in_loader_cache("libx.so.1", cache), "") << "another format";
  EXPECT_EQ(kjit::find_in_loader_cache("libx.so.1", d.file("none")), "");
}

// Where the system's cache names a library this process loaded through it, both agree.
TEST(LoaderCache, AgreesWithTheLoaderOnThisMachine) {
  int compared = 0;
  for (const char* so : {"libsqlite3.so.0", "libz.so.1", "libcjson.so.1"}) {
    const std::string named = kjit::find_in_loader_cache(so);
    const std::string earlier = kjit::search_before_loader_cache(so);
    if (named.empty() || (!earlier.empty() && earlier != named)) continue;
    void* h = dlopen(so, RTLD_LAZY);
    ASSERT_NE(h, nullptr) << so;
    EXPECT_EQ(kjit::loaded_library_path(h), named) << so;
    dlclose(h);
    ++compared;
  }
  std::printf("libraries compared with the loader: %d\n", compared);
}

// already_loaded() reads the process's objects instead of asking the loader: both agree,
// for libraries in the process, libraries not in it, and one loaded from a copy under
// another file name (found by its soname).
TEST(LoadedLibraries, AlreadyLoadedAgreesWithTheLoader) {
  auto loader = [](const char* so) {
    void* h = dlopen(so, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return std::string();
    std::string p = kjit::loaded_library_path(h);
    dlclose(h);
    return p;
  };
  int loaded = 0;
  for (const char* so : {"libc.so.6", "libm.so.6", "libsqlite3.so.0", "libcjson.so.1",
                         "libstdc++.so.6", KJIT_TEST_NVRTC_SONAME, "libkjit-no-such.so.7"}) {
    const std::string expected = loader(so);
    EXPECT_EQ(kjit::already_loaded(so), expected) << so;
    loaded += expected.empty() ? 0 : 1;
  }
  EXPECT_GE(loaded, 3) << "libc, libsqlite3 and libcjson are in this process";
  // A library not in the process yet, loaded from a copy of its file under another name.
  for (const char* so : {"libz.so.1", "liblzma.so.5", "libbz2.so.1.0", "libexpat.so.1"}) {
    const std::string file = kjit::find_in_loader_cache(so);
    if (file.empty() || !loader(so).empty()) continue;
    TempDir d;
    const std::string copy = d.file("renamed-copy.so");
    ASSERT_EQ(std::system(("cp '" + file + "' '" + copy + "'").c_str()), 0);
    EXPECT_EQ(kjit::already_loaded(so), "") << so;
    void* h = dlopen(copy.c_str(), RTLD_LAZY | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    EXPECT_EQ(loader(so), kjit::loaded_library_path(h)) << "the loader finds it by its soname";
    EXPECT_EQ(kjit::already_loaded(so), kjit::loaded_library_path(h)) << so;
    return;
  }
  GTEST_SKIP() << "none of the candidate libraries is in the loader's cache and not loaded";
}

}  // namespace
