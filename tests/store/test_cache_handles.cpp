// The persistent cache through the public C API: memory-only and disabled caches, the
// default location, untrusted and read-only directories, raw access for tools, pruning,
// clearing and bad arguments.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kjit/kjit.h"
#include "support/cache_api.h"
#include "support/test_support.h"

namespace {

using namespace kjit::test::capi;

TEST(Cache, MemoryOnlyAndDisabled) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  kjit_cache* c = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &c), KJIT_OK);
  EXPECT_EQ(compile(c, kSaxpySource).tier, KJIT_TIER_COMPILED);
  EXPECT_EQ(compile(c, kSaxpySource).tier, KJIT_TIER_MEMORY);
  kjit_cache_stats s{};
  s.struct_size = sizeof s;
  kjit_cache_stats_get(c, &s);
  EXPECT_EQ(s.disk_state, KJIT_DISK_DISABLED);
  kjit_cache_close(c);

  TempDir dir;
  setenv("KJIT_CACHE_DISABLE", "1", 1);
  {
    Cache disabled(dir.path());
    EXPECT_EQ(disabled.stats().disk_state, KJIT_DISK_DISABLED);
  }
  unsetenv("KJIT_CACHE_DISABLE");
  struct stat st;
  EXPECT_NE(stat(db_path(dir).c_str(), &st), 0) << "no database was created";
}

TEST(Cache, DefaultLocationFromEnvironment) {
  TempDir dir;
  setenv("KJIT_CACHE_DIR", dir.file("from-env").c_str(), 1);
  kjit_cache* c = nullptr;
  ASSERT_EQ(kjit_cache_open(nullptr, &c), KJIT_OK);
  EXPECT_EQ(std::string(kjit_cache_directory(c)), dir.file("from-env"));
  kjit_cache_close(c);
  unsetenv("KJIT_CACHE_DIR");
  const char* old_xdg = getenv("XDG_CACHE_HOME");
  std::string saved = old_xdg ? old_xdg : "";
  setenv("XDG_CACHE_HOME", dir.file("xdg").c_str(), 1);
  ASSERT_EQ(kjit_cache_open(nullptr, &c), KJIT_OK);
  EXPECT_EQ(std::string(kjit_cache_directory(c)), dir.file("xdg") + "/kjit");
  kjit_cache_close(c);
  if (old_xdg)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}

TEST(Cache, UntrustedDatabaseIsNotUsed) {
  TempDir dir;
  {
    Cache cache(dir.path());
    compile(cache.c, kSaxpySource);
  }
  chmod(db_path(dir).c_str(), 0666);
  Cache cache(dir.path());
  kjit_cache_stats s = cache.stats();
  EXPECT_EQ(s.disk_state, KJIT_DISK_UNAVAILABLE);
  EXPECT_NE(std::string(s.message).find("writable by group or others"), std::string::npos)
      << s.message;
  Result r = compile(cache.c, kSaxpySource);
  EXPECT_EQ(r.status, KJIT_OK) << "compilation works without the disk tier";
  EXPECT_EQ(r.tier, KJIT_TIER_COMPILED);
}

// Runs `body` in a child process as an unprivileged user when we are root (root ignores
// permission bits), so that a read-only directory is really read-only.
int in_child_as_user(const std::string& dir, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0) {
      if (chown(dir.c_str(), 65534, 65534) != 0) _exit(90);
      if (system(("chown -R 65534:65534 '" + dir + "'").c_str()) != 0) _exit(91);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(92);
    }
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(Cache, ReadOnlyDirectoryStillCompilesAndHits) {
  TempDir root;
  const std::string dir = root.file("ro");
  mkdir(dir.c_str(), 0700);
  chmod(root.path().c_str(), 0755);
  const int rc = in_child_as_user(dir, [&] {
    {
      Cache cache(dir);
      if (compile(cache.c, kSaxpySource).status != KJIT_OK) return 1;
    }
    if (chmod(dir.c_str(), 0500) != 0) return 2;
    Cache cache(dir);
    kjit_cache_stats s = cache.stats();
    if (s.disk_state != KJIT_DISK_READ_ONLY && s.disk_state != KJIT_DISK_UNAVAILABLE) return 3;
    Result hit = compile(cache.c, kSaxpySource);
    if (hit.status != KJIT_OK) return 4;
    Result other = compile(cache.c, kTemplateSource, "sm_80", {}, {}, {"scale<int, 1>"});
    if (other.status != KJIT_OK) return 5;
    if (cache.stats().store_failures != 0) return 6;  // read-only: no attempted writes
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(Cache, RawAccessForTools) {
  TempDir a_dir, b_dir;
  Cache a(a_dir.path()), b(b_dir.path());
  Result r = compile(a.c, kSaxpySource);
  kjit_binary* bin = nullptr;
  ASSERT_EQ(kjit_cache_get(a.c, r.key.c_str(), &bin), KJIT_OK);
  EXPECT_EQ(kjit_cache_put(b.c, bin), KJIT_OK);
  kjit_binary_destroy(bin);
  EXPECT_EQ(compile(b.c, kSaxpySource).tier, KJIT_TIER_MEMORY);
  EXPECT_EQ(kjit_cache_get(a.c, "zz", &bin), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_cache_get(a.c, std::string(64, 'a').c_str(), &bin), KJIT_ERROR_NOT_FOUND);
  int rows = 0;
  ASSERT_EQ(
      kjit_cache_list(
          a.c,
          [](const kjit_cache_entry_info* i, void* u) {
            ++*static_cast<int*>(u);
            return std::string(i->target) == "sm_90" && std::string(i->kernels) == "saxpy" ? 0 : 1;
          },
          &rows),
      KJIT_OK);
  EXPECT_EQ(rows, 1);
  uint64_t checked = 0, bad = 0;
  ASSERT_EQ(kjit_cache_verify(a.c, &checked, &bad), KJIT_OK);
  EXPECT_EQ(checked, 1u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(kjit_cache_remove(a.c, r.key.c_str()), KJIT_OK);
  EXPECT_EQ(kjit_cache_remove(a.c, r.key.c_str()), KJIT_ERROR_NOT_FOUND);
  EXPECT_EQ(a.stats().disk_entries, 0u);
}

TEST(Cache, PruneAndBoundedSize) {
  TempDir dir;
  // Each saxpy variant is ~9 KB; bound the cache to ~40 KB.
  Cache cache(dir.path(), false, 40 * 1024);
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    Result r = compile(cache.c, std::string(kSaxpySource) + "// v" + std::to_string(i) + "\n");
    ASSERT_EQ(r.status, KJIT_OK);
    keys.push_back(r.key);
  }
  kjit_cache_stats s = cache.stats();
  EXPECT_LE(s.disk_bytes, 40u * 1024);
  EXPECT_GT(s.evictions, 0u);
  // The most recent entry survived.
  kjit_binary* b = nullptr;
  ASSERT_EQ(kjit_cache_clear_memory(cache.c), KJIT_OK);
  EXPECT_EQ(kjit_cache_get(cache.c, keys.back().c_str(), &b), KJIT_OK);
  kjit_binary_destroy(b);
  EXPECT_EQ(kjit_cache_get(cache.c, keys.front().c_str(), &b), KJIT_ERROR_NOT_FOUND);
  uint64_t removed = 0;
  ASSERT_EQ(kjit_cache_prune(cache.c, 0, &removed), KJIT_OK);
  EXPECT_GT(removed, 0u);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
}

TEST(Cache, ClearRemovesEverything) {
  TempDir dir;
  Cache cache(dir.path());
  compile(cache.c, kSaxpySource);
  ASSERT_EQ(kjit_cache_clear(cache.c), KJIT_OK);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  EXPECT_EQ(compile(cache.c, kSaxpySource).tier, KJIT_TIER_COMPILED);
}

TEST(Cache, ReadOnlyOptionNeverWrites) {
  TempDir dir;
  {
    Cache cache(dir.path());
    compile(cache.c, kSaxpySource);
  }
  Cache ro(dir.path(), true);
  EXPECT_EQ(ro.stats().disk_state, KJIT_DISK_READ_ONLY);
  EXPECT_EQ(compile(ro.c, kSaxpySource).tier, KJIT_TIER_DISK);
  EXPECT_EQ(compile(ro.c, kTemplateSource, "sm_80", {}, {}, {"scale<int, 1>"}).status, KJIT_OK);
  EXPECT_EQ(ro.stats().disk_entries, 1u);
  EXPECT_EQ(kjit_cache_clear(ro.c), KJIT_ERROR_READ_ONLY);
}

TEST(Cache, BadArguments) {
  EXPECT_EQ(kjit_cache_open(nullptr, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.struct_size = 4;
  kjit_cache* c = nullptr;
  EXPECT_EQ(kjit_cache_open(&o, &c), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kjit_cache_clear(nullptr), KJIT_ERROR_INVALID_HANDLE);
  kjit_cache_stats s = KJIT_CACHE_STATS_INIT;
  EXPECT_EQ(kjit_cache_stats_get(nullptr, &s), KJIT_ERROR_INVALID_HANDLE);
  kjit_compiler* comp = nullptr;
  alignas(16) unsigned char garbage[128];
  std::memset(garbage, 0x11, sizeof garbage);
  EXPECT_EQ(kjit_compiler_create(reinterpret_cast<kjit_cache*>(garbage), 0, &comp),
            KJIT_ERROR_INVALID_HANDLE);
}

}  // namespace
