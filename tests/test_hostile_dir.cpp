// Files that a user or another program leaves in the cache directory: FIFOs, devices,
// directories and links where kjit's own files go, files of absurd sizes, a deleted index,
// temporaries of dead writers, a worker that cannot start. None may hang a process, exhaust
// its memory, make it write outside the cache directory, or lose what the cache holds.
//
// What could hang or exhaust memory runs in a child process under an alarm and an address
// space limit, so that the old behaviour fails the test instead of the test program.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "key/toolkit.h"
#include "store/cache.h"
#include "store/counter_log.h"
#include "store/entry.h"
#include "store/fact_files.h"
#include "support/db.h"
#include "support/disk_tier.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/wire.h"
#include "worker/client.h"

// KJIT_HOSTILE_BEFORE_FIX: built against the code before the fix (to show that these tests
// fail there), which has no cap constants and reports nothing from an append; its hook is
// a plain function pointer in entry_files.cpp at the same place (between open and write).
#ifdef KJIT_HOSTILE_BEFORE_FIX
namespace kjit {
extern void (*pending_hook_for_test)(const std::string& log);
}
#endif

namespace {

#ifdef KJIT_HOSTILE_BEFORE_FIX
constexpr uint64_t kMaxPendingBytes = 64 * 1024;
void set_pending_hook(void (*fn)(const std::string&)) {
  kjit::pending_hook_for_test = fn;
}
bool append_counters(const kjit::EntryFiles& f, const std::string& text) {
  struct stat st;
  const std::string p = f.root().substr(0, f.root().size() - 7) + "counters/pending";
  if (::stat(p.c_str(), &st) == 0 && uint64_t(st.st_size) + text.size() > kMaxPendingBytes) {
    f.write_pending_counters(text);  // appended all the same: no cap
    return false;
  }
  f.write_pending_counters(text);
  return true;
}
#else
constexpr uint64_t kMaxPendingBytes = kjit::CounterLog::kMaxPendingBytes;
void set_pending_hook(void (*fn)(const std::string&)) {
  kjit::CounterLog::pending_hook_for_test = fn;
}
// Appends the counts of `text` (lines "name count") to the counter log of `f`'s directory.
bool append_counters(const kjit::CounterLog& f, const std::string& text) {
  kjit::CounterLog::Deltas deltas;
  std::istringstream lines(text);
  std::string name;
  for (int64_t n = 0; lines >> name >> n;) deltas.emplace_back(name, n);
  return f.append(deltas);
}
// What opening the index does with the counter log (Cache::open_index).
void add_pending(kjit::DiskTier& d) {
  if (d.counter_log.pending()) d.counters.add([&] { return d.counter_log.take_all(); });
}
static_assert(kjit::EntryFiles::kStaleTempSeconds == 3600, "the tests age files past it");
#endif
constexpr int64_t kStaleTempSeconds = 3600;

// Payload files (names of 64 hex digits) under `dir`/entries.
size_t payload_files(const std::string& dir) {
  size_t n = 0;
  for (const std::string& d :
       kjit::directory_names(dir + "/entries").value_or(std::vector<std::string>{})) {
    for (const std::string& f :
         kjit::directory_names(dir + "/entries/" + d).value_or(std::vector<std::string>{})) {
      n += f.size() == 64 && f[0] != '.';
    }
  }
  return n;
}

using kjit::test::LogCapture;
using kjit::test::read_file_or_die;
using kjit::test::TempDir;
using kjit::test::write_file;

// Runs `fn` in a child process under an alarm of `seconds` and an address space of what the
// process has now plus `extra_bytes`. "" when fn returned true; else what happened.
std::string in_child(const std::function<bool()>& fn, int seconds = 20,
                     uint64_t extra_bytes = uint64_t(1) << 30) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(unsigned(seconds));
    uint64_t vm_pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long long pages = 0;
      if (std::fscanf(f, "%llu", &pages) == 1) vm_pages = pages;
      std::fclose(f);
    }
    rlimit as{};
    as.rlim_cur = as.rlim_max = vm_pages * uint64_t(::sysconf(_SC_PAGESIZE)) + extra_bytes;
    ::setrlimit(RLIMIT_AS, &as);
    bool ok = false;
    try {
      ok = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    return "hung (no answer within " + std::to_string(seconds) + " s)";
  }
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "failed (exit " + std::to_string(WEXITSTATUS(status)) + ")";
}

std::string key_of(const std::string& tag) {
  return kjit::to_hex(kjit::sha256("hostile " + tag));
}

kjit::Entry entry(const std::string& tag, size_t ptx_bytes = 64) {
  kjit::Entry e;
  e.key = key_of(tag);
  e.target = "sm_90";
  e.ptx = std::string(ptx_bytes, 'p');
  e.kernels = {"k_" + tag};
  e.toolchain = "synthetic";
  e.program_name = "hostile.cu";
  e.compile_ms = 1;
  e.created = static_cast<int64_t>(time(nullptr));
  return e;
}

std::string payload_path(const std::string& dir, const std::string& key) {
  return dir + "/entries/" + key.substr(0, 2) + "/" + key;
}

// The file a fact is kept in (entry_files.cpp: the first 32 hex digits of its name's hash).
std::string fact_path(const std::string& dir, const std::string& name) {
  return dir + "/facts/" + kjit::to_hex(kjit::sha256(name)).substr(0, 32);
}

void make_fifo(const std::string& path) {
  kjit::make_directories(kjit::dirname_of(path), 0700);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
}

void make_link(const std::string& target, const std::string& path) {
  kjit::make_directories(kjit::dirname_of(path), 0700);
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0) << path << ": " << std::strerror(errno);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int64_t counter(kjit::DiskTier& d, const std::string& name) {
  for (const auto& [n, v] : d.counters.read()) {
    if (n == name) return v;
  }
  return 0;
}

// A cache directory holding one stored entry; returns its key.
std::string with_entry(const std::string& dir, const std::string& tag = "a") {
  kjit::test::OpenTier d(dir);
  d.entries.put(entry(tag), 0);
  return key_of(tag);
}

// A process that only hits: opens the cache, reads `key` from its payload file, closes
// (its counts go to counters/pending, or to the index past the log's cap).
bool hit_only_process(const std::string& dir, const std::string& key) {
  kjit::CacheConfig cfg;
  cfg.directory = dir;
  kjit::Cache c(cfg);
  kjit_tier tier;
  const bool hit = c.lookup(key, &tier) != nullptr && tier == KJIT_TIER_DISK;
  if (!hit) std::fprintf(stderr, "child: no disk hit\n");
  return hit;
}

// ---- 3. FIFOs and other non-regular files never block a read ---------------------------

TEST(HostileDir, FifoAtAFactFileIsNoFact) {
  TempDir t;
  kjit::make_directories(t.path() + "/facts", 0700);
  make_fifo(fact_path(t.path(), "some fact"));
  const std::string record = kjit::toolkit_record_name("");
  make_fifo(fact_path(t.path(), record));
  EXPECT_EQ(in_child([&] {
              kjit::FactFiles files(t.path());
              kjit::CacheConfig cfg;
              cfg.directory = t.path();
              kjit::Cache cache(cfg);
              return !files.read("some fact") && !cache.facts().get(record);
            }),
            "");
  // Writing the fact replaces the FIFO.
  kjit::FactFiles files(t.path());
  files.write("some fact", "value");
  EXPECT_EQ(files.read("some fact").value_or(""), "value");
}

TEST(HostileDir, DirectoryOrSocketAtAFactFileIsNoFact) {
  TempDir t;
  kjit::make_directories(fact_path(t.path(), "dir fact"), 0700);
  EXPECT_EQ(in_child([&] { return !kjit::FactFiles(t.path()).read("dir fact"); }), "");
}

TEST(HostileDir, FifoAtAPayloadPathIsAMissNotAHang) {
  TempDir t;
  const std::string key = key_of("fifo");
  make_fifo(payload_path(t.path(), key));
  EXPECT_EQ(in_child([&] {
              kjit::test::OpenTier d(t.path());
              try {
                return d.entries.get(key) == nullptr;
              } catch (const kjit::Error& e) {
                return e.status() == KJIT_ERROR_CACHE_CORRUPT;
              }
            }),
            "");
  // The store then takes its place.
  kjit::test::OpenTier d(t.path());
  kjit::Entry e = entry("fifo");
  d.entries.put(e, 0);
  kjit::EntryPtr got = d.entries.get(key);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->ptx, e.ptx);
}

TEST(HostileDir, FifoAsThePendingCountersLogDoesNotHangAHitOnlyProcess) {
  TempDir t;
  const std::string key = with_entry(t.path());
  make_fifo(t.path() + "/counters/pending");
  EXPECT_EQ(in_child([&] { return hit_only_process(t.path(), key); }), "");
  // Its counts were added to the index instead; the FIFO is cleared away by a taker.
  kjit::test::OpenTier d(t.path());
  add_pending(d);
  EXPECT_EQ(counter(d, "disk_hits"), 1);
  EXPECT_FALSE(exists(t.path() + "/counters/pending"));
}

TEST(HostileDir, FifoAsATakenCountersLogDoesNotHangTheTaker) {
  TempDir t;
  with_entry(t.path());
  make_fifo(t.path() + "/counters/taken-1-0");
  kjit::make_directories(t.path() + "/counters", 0700);
  write_file(t.path() + "/counters/pending", "disk_hits 2\n");
  EXPECT_EQ(in_child([&] {
              kjit::test::OpenTier d(t.path());
              add_pending(d);
              return counter(d, "disk_hits") == 2;
            }),
            "");
  EXPECT_FALSE(exists(t.path() + "/counters/taken-1-0"));
}

// ---- 4. Nothing unbounded is read ------------------------------------------------------

TEST(HostileDir, FactFileLinkedToDevZeroIsNoFact) {
  TempDir t;
  make_link("/dev/zero", fact_path(t.path(), "zero fact"));
  make_link("/dev/zero", fact_path(t.path(), kjit::toolkit_record_name("")));
  EXPECT_EQ(in_child(
                [&] {
                  kjit::CacheConfig cfg;
                  cfg.directory = t.path();
                  kjit::Cache cache(cfg);
                  return !kjit::FactFiles(t.path()).read("zero fact") &&
                         !cache.facts().get(kjit::toolkit_record_name(""));
                },
                20, uint64_t(512) << 20),
            "");
}

TEST(HostileDir, HugeFactFileIsNotRead) {
  TempDir t;
  const std::string p = fact_path(t.path(), "huge fact");
  kjit::make_directories(t.path() + "/facts", 0700);
  write_file(p, "x");
  ASSERT_EQ(::truncate(p.c_str(), off_t(2) << 30), 0);  // sparse: 2 GiB
  EXPECT_EQ(in_child([&] { return !kjit::FactFiles(t.path()).read("huge fact"); }, 20,
                     uint64_t(512) << 20),
            "");
}

TEST(HostileDir, TakenCountersLogLinkedToDevZeroIsNotRead) {
  TempDir t;
  with_entry(t.path());
  make_link("/dev/zero", t.path() + "/counters/taken-1-0");
  write_file(t.path() + "/counters/pending", "disk_hits 3\n");
  EXPECT_EQ(in_child(
                [&] {
                  kjit::test::OpenTier d(t.path());
                  add_pending(d);
                  return counter(d, "disk_hits") == 3;
                },
                20, uint64_t(512) << 20),
            "");
  EXPECT_FALSE(exists(t.path() + "/counters/taken-1-0"));  // the link went, not /dev/zero
}

TEST(HostileDir, HugeSparsePayloadWithAConsistentHeaderIsCorruptNotOutOfMemory) {
  TempDir t;
  const std::string key = with_entry(t.path(), "huge");
  const std::string p = payload_path(t.path(), key);
  std::string f = read_file_or_die(p);
  ASSERT_GE(f.size(), 176u);
  // The PTX part's size (header offset 80 + 8) made 3 GiB, the file extended to match.
  uint64_t sizes[4];
  uint64_t total = 176;
  for (int i = 0; i < 4; ++i) {
    sizes[i] = kjit::get_le(reinterpret_cast<const unsigned char*>(f.data()) + 80 + 8 * i, 8);
  }
  sizes[1] = uint64_t(3) << 30;
  for (int i = 0; i < 4; ++i) {
    kjit::put_le(reinterpret_cast<unsigned char*>(&f[80 + 8 * size_t(i)]), sizes[i], 8);
    total += sizes[i];
  }
  write_file(p, f.substr(0, 176 + sizes[0]));
  ASSERT_EQ(::truncate(p.c_str(), off_t(total)), 0);
  EXPECT_EQ(in_child(
                [&] {
                  kjit::test::OpenTier d(t.path());
                  try {
                    d.entries.get(key);
                  } catch (const kjit::Error& e) {
                    if (e.status() == KJIT_ERROR_CACHE_CORRUPT) return true;
                    std::fprintf(stderr, "child: %s (status %d)\n", e.what(), int(e.status()));
                  }
                  return false;
                },
                20, uint64_t(1) << 30),
            "");
}

// ---- 5. Nothing is created or appended through a link ------------------------------------

TEST(HostileDir, PendingCountersLinkedElsewhereAreNotWrittenThere) {
  TempDir t, outside;
  const std::string key = with_entry(t.path());
  const std::string victim = outside.file("passwd-copy");
  write_file(victim, "root:x:0:0:root:/root:/bin/bash\n");
  make_link(victim, t.path() + "/counters/pending");
  EXPECT_EQ(in_child([&] { return hit_only_process(t.path(), key); }), "");
  EXPECT_EQ(read_file_or_die(victim), "root:x:0:0:root:/root:/bin/bash\n");
  kjit::test::OpenTier d(t.path());
  EXPECT_EQ(counter(d, "disk_hits"), 1);  // added to the index instead
}

TEST(HostileDir, DanglingPendingLinkCreatesNothingOutside) {
  TempDir t, outside;
  const std::string key = with_entry(t.path());
  make_link(outside.file("made-by-kjit"), t.path() + "/counters/pending");
  EXPECT_EQ(in_child([&] { return hit_only_process(t.path(), key); }), "");
  EXPECT_FALSE(exists(outside.file("made-by-kjit")));
}

TEST(HostileDir, LinkedEntriesDirectoryIsNotWrittenThrough) {
  TempDir t, outside;
  const kjit::Entry e = entry("linked");
  make_link(outside.path(), t.path() + "/entries/" + e.key.substr(0, 2));
  kjit::test::OpenTier d(t.path());
  d.entries.put(e, 0);
  EXPECT_EQ(kjit::directory_names(outside.path()).value_or(std::vector<std::string>{"?"}).size(),
            0u);
  ASSERT_NE(d.entries.get(e.key), nullptr);
}

TEST(HostileDir, LinkedCountersDirectoryIsNotTakenFrom) {
  TempDir t, outside;
  with_entry(t.path());
  write_file(outside.file("pending"), "someone else's file\n");
  make_link(outside.path(), t.path() + "/counters");
  kjit::test::OpenTier d(t.path());
  add_pending(d);
  EXPECT_EQ(read_file_or_die(outside.file("pending")), "someone else's file\n");
  EXPECT_EQ(kjit::directory_names(outside.path())->size(), 1u);
}

TEST(HostileDir, ClearDoesNotRemoveFilesThroughALinkedEntriesDirectory) {
  TempDir t, outside;
  const std::string key = key_of("outside");
  write_file(outside.file(key), "not kjit's");
  write_file(outside.file(".tmp-mine"), "not kjit's either");
  make_link(outside.path(), t.path() + "/entries/" + key.substr(0, 2));
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  kjit::Cache c(cfg);
  c.clear();
  uint64_t checked = 0, bad = 0;
  c.verify(&checked, &bad);
  EXPECT_EQ(kjit::directory_names(outside.path())->size(), 2u);
}

// ---- 6. An index deleted beside its payload files --------------------------------------

TEST(HostileDir, DeletedIndexIsRebuiltFromThePayloadFiles) {
  TempDir t;
  {
    kjit::test::OpenTier d(t.path());
    for (int i = 0; i < 5; ++i) d.entries.put(entry("orphan" + std::to_string(i)), 0);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ::unlink((t.path() + "/kjit.db" + suffix).c_str());
  }
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  {
    kjit::Cache c(cfg);
    EXPECT_EQ(c.stats().disk_entries, 5u);
    uint64_t listed = 0;
    c.list([&](const kjit::EntryInfo&) { return ++listed, false; });
    EXPECT_EQ(listed, 5u);
    EXPECT_EQ(c.prune(0), 5u);
  }
  EXPECT_EQ(payload_files(t.path()), 0u);
}

// ---- 7. Counters -----------------------------------------------------------------------

TEST(HostileDir, PendingCountersLogIsCapped) {
  TempDir t;
  const std::string key = with_entry(t.path());
  // A log at its cap: the next hit-only process adds its counts to the index itself.
  const uint64_t cap = kMaxPendingBytes;
  std::string full;
  while (full.size() + 12 <= cap) full += "disk_hits 1\n";
  kjit::make_directories(t.path() + "/counters", 0700);
  write_file(t.path() + "/counters/pending", full);
  const int64_t in_log = int64_t(full.size() / 12);
  EXPECT_EQ(in_child([&] { return hit_only_process(t.path(), key); }), "");
  struct stat st;
  if (::stat((t.path() + "/counters/pending").c_str(), &st) == 0) {
    EXPECT_LE(uint64_t(st.st_size), cap);
  }
  kjit::test::OpenTier d(t.path());
  add_pending(d);
  EXPECT_EQ(counter(d, "disk_hits"), in_log + 1);

  // Appends stop at the cap.
  kjit::CounterLog files(t.path());
  int written = 0;
  while (append_counters(files, "disk_hits 1\n") && written < 100000) ++written;
  ASSERT_EQ(::stat((t.path() + "/counters/pending").c_str(), &st), 0);
  EXPECT_LE(uint64_t(st.st_size), cap);
  EXPECT_EQ(written, int(cap / 12));
}

// The log is taken (by another process adding the counts) after a process opened it and
// before it wrote: the counts must still be added, by that taker or a later one.
// The hooks act on the first open of an append only (a retry of the append is not raced).
std::string g_taker_dir;
bool g_hook_armed = false;
void take_now(const std::string&) {
  if (!g_hook_armed) return;
  g_hook_armed = false;
  kjit::test::OpenTier other(g_taker_dir);
  add_pending(other);
}

TEST(HostileDir, CountsAppendedAfterTheLogWasTakenAreNotLost) {
  TempDir t;
  with_entry(t.path());
  g_taker_dir = t.path();
  kjit::CounterLog files(t.path());
  ASSERT_TRUE(append_counters(files, "disk_hits 1\n"));
  g_hook_armed = true;
  set_pending_hook(take_now);
  const bool written = append_counters(files, "disk_hits 10\n");
  set_pending_hook(nullptr);
  EXPECT_TRUE(written);
  kjit::test::OpenTier d(t.path());
  add_pending(d);
  EXPECT_EQ(counter(d, "disk_hits"), 11);
}

// The same with the taker in another thread, racing the append from the moment the log is
// open: however the two interleave, nothing is lost and nothing counted twice.
std::vector<std::thread> g_takers;
void take_soon(const std::string&) {
  if (!g_hook_armed) return;
  g_hook_armed = false;
  g_takers.emplace_back([] {
    kjit::test::OpenTier other(g_taker_dir);
    add_pending(other);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(HostileDir, CountsAppendedWhileATakerRunsAreNotLost) {
  TempDir t;
  with_entry(t.path());
  g_taker_dir = t.path();
  kjit::CounterLog files(t.path());
  int64_t expect = 0;
  for (int round = 0; round < 20; ++round) {
    g_hook_armed = true;
    set_pending_hook(take_soon);
    ASSERT_TRUE(append_counters(files, "disk_hits 1\n"));
    set_pending_hook(nullptr);
    ++expect;
  }
  for (std::thread& th : g_takers) th.join();
  g_takers.clear();
  kjit::test::OpenTier d(t.path());
  for (int i = 0; i < 3; ++i) add_pending(d);
  EXPECT_EQ(counter(d, "disk_hits"), expect);
}

// ---- 8. Smaller cases ------------------------------------------------------------------

TEST(HostileDir, EntryLargerThanTheCacheIsNotKept) {
  TempDir t;
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  cfg.max_bytes = 64 * 1024;
  kjit::Cache c(cfg);
  const kjit::Entry big = entry("big", 1400 * 1024);
  EXPECT_FALSE(c.store(std::make_shared<kjit::Entry>(big)));
  EXPECT_FALSE(exists(payload_path(t.path(), big.key)));
  EXPECT_EQ(c.stats().disk_entries, 0u);
  kjit_tier tier;
  EXPECT_NE(c.lookup(big.key, &tier), nullptr);  // still served from memory
}

void age(const std::string& path, int64_t seconds) {
  timeval tv[2];
  tv[0].tv_sec = tv[1].tv_sec = time(nullptr) - seconds;
  tv[0].tv_usec = tv[1].tv_usec = 0;
  ASSERT_EQ(::lutimes(path.c_str(), tv), 0);
}

TEST(HostileDir, StaleTemporariesGoWhenTheIndexOpens) {
  TempDir t;
  with_entry(t.path());
  const std::string stale = t.path() + "/entries/ab/.tmp-dead-writer-1-0";
  const std::string fresh = t.path() + "/entries/ab/.tmp-live-writer-2-0";
  kjit::make_directories(t.path() + "/entries/ab", 0700);
  write_file(stale, std::string(1000, 's'));
  write_file(fresh, std::string(1000, 'f'));
  age(stale, 2 * kStaleTempSeconds);
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  kjit::Cache c(cfg);
  c.stats();  // opens the index
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(fresh));
}

TEST(HostileDir, VerifyDoesNotCountAStaleTemporaryAsCorrupt) {
  TempDir t;
  with_entry(t.path());
  const std::string stale = t.path() + "/entries/cd/.tmp-dead-writer-1-0";
  kjit::make_directories(t.path() + "/entries/cd", 0700);
  write_file(stale, "partial");
  age(stale, 2 * kStaleTempSeconds);
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  kjit::Cache c(cfg);
  uint64_t checked = 0, bad = 0;
  c.verify(&checked, &bad);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(checked, 1u);
  EXPECT_FALSE(exists(stale));
}

TEST(HostileDir, DirectoryAtAPayloadPathIsRemovedAndTheKeyStored) {
  TempDir t;
  const kjit::Entry e = entry("dir");
  const std::string p = payload_path(t.path(), e.key);
  kjit::make_directories(p + "/inner", 0700);
  write_file(p + "/inner/file", "x");
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  {
    kjit::Cache c(cfg);
    EXPECT_TRUE(c.store(std::make_shared<kjit::Entry>(e)));
    kjit::EntryPtr got = kjit::test::OpenTier(t.path()).entries.get(e.key);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->ptx, e.ptx);
  }
  // Found by verify: removed once, then gone.
  const kjit::Entry e2 = entry("dir2");
  const std::string p2 = payload_path(t.path(), e2.key);
  kjit::make_directories(p2 + "/inner", 0700);
  kjit::Cache c(cfg);
  uint64_t checked = 0, bad = 0;
  c.verify(&checked, &bad);
  EXPECT_EQ(bad, 1u);
  EXPECT_FALSE(exists(p2));
  c.verify(&checked, &bad);
  EXPECT_EQ(bad, 0u);
}

TEST(HostileDir, NothingIsRebuiltForADatabaseAlreadyAtThisSchema) {
  TempDir t;
  {
    kjit::test::OpenTier d(t.path());
    // As a second process finds it when the first created the schema after its first read.
    kjit::test::Db(t.path() + "/kjit.db")
        .exec("DELETE FROM kv WHERE ns = 'meta' AND key = 'kjit:schema'");
  }
  LogCapture log;
  kjit::test::OpenTier d(t.path());
  EXPECT_EQ(log.count("rebuilt"), 0u);
  EXPECT_EQ(d.index.integrity_problems(), "");
}

// A worker executable that reports a failure at once, counting its starts.
std::string failing_worker(const TempDir& t) {
  const std::string exe = t.file("bad-worker.sh");
  write_file(exe, "#!/bin/sh\necho start >> '" + t.file("starts") +
                      "'\necho 'cannot start: broken on purpose' >&3\nexit 1\n");
  ::chmod(exe.c_str(), 0700);
  return exe;
}

kjit::WorkerAnswer ask_worker(kjit::Cache* cache) {
  std::string why;
  const kjit::WorkerAddress addr = kjit::worker_address(cache, "test-toolchain", &why);
  EXPECT_FALSE(addr.directory.empty()) << why;
  kjit::worker::CompileRequest q;
  q.key = key_of("worker");
  q.source = "extern \"C\" __global__ void k() {}";
  q.options.name = "k.cu";
  q.norm.target = "sm_90";
  return kjit::compile_in_worker(addr, "test-toolchain", q, nullptr);
}

TEST(HostileDir, WorkerThatCannotStartIsNotStartedAgainByEveryProcess) {
  TempDir t, bin;
  const std::string exe = failing_worker(bin);
  ::setenv("KJIT_WORKER", exe.c_str(), 1);
  ::unsetenv("KJIT_WORKER_RETRY_S");
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  kjit::Cache c(cfg);
  const kjit::WorkerAnswer first = ask_worker(&c);
  EXPECT_EQ(first.kind, kjit::WorkerAnswer::Kind::Unavailable);
  EXPECT_NE(first.message.find("broken on purpose"), std::string::npos) << first.message;
  // Another process (the memory is in the cache directory, not in this process).
  EXPECT_EQ(in_child([&] {
              kjit::Cache other(cfg);
              const kjit::WorkerAnswer a = ask_worker(&other);
              std::fprintf(stderr, "child: %s\n", a.message.c_str());
              return a.kind == kjit::WorkerAnswer::Kind::Unavailable &&
                     a.message.find("failed to start") != std::string::npos &&
                     a.message.find("broken on purpose") != std::string::npos;
            }),
            "");
  EXPECT_EQ(read_file_or_die(bin.file("starts")), "start\n");
  // Not remembered when the memory is off.
  ::setenv("KJIT_WORKER_RETRY_S", "0", 1);
  ask_worker(&c);
  EXPECT_EQ(read_file_or_die(bin.file("starts")), "start\nstart\n");
  ::unsetenv("KJIT_WORKER_RETRY_S");
  ::unsetenv("KJIT_WORKER");
}

TEST(HostileDir, FifosAmongTheWorkersFilesDoNotHangAStart) {
  TempDir t, bin;
  const std::string exe = failing_worker(bin);
  ::setenv("KJIT_WORKER", exe.c_str(), 1);
  ::setenv("KJIT_WORKER_RETRY_S", "0", 1);
  ::setenv("KJIT_WORKER_PROCESSES", "2", 1);
  kjit::CacheConfig cfg;
  cfg.directory = t.path();
  kjit::Cache c(cfg);
  std::string why;
  const kjit::WorkerAddress addr = kjit::worker_address(&c, "test-toolchain", &why);
  for (const char* suffix : {".log", ".failed", ".busy", "-1.busy"}) {
    make_fifo(t.path() + "/" + addr.name + suffix);
  }
  EXPECT_EQ(in_child([&] {
              kjit::Cache other(cfg);
              kjit::WorkerSlot slot;
              kjit::take_worker(addr, nullptr, &slot);
              return ask_worker(&other).kind == kjit::WorkerAnswer::Kind::Unavailable;
            }),
            "");
  ::unsetenv("KJIT_WORKER_PROCESSES");
  ::unsetenv("KJIT_WORKER_RETRY_S");
  ::unsetenv("KJIT_WORKER");
}

TEST(HostileDir, FifoAtTheIndexDoesNotHang) {
  TempDir t;
  make_fifo(t.path() + "/kjit.db");
  EXPECT_EQ(in_child([&] {
              kjit::CacheConfig cfg;
              cfg.directory = t.path();
              kjit::Cache c(cfg);
              c.stats();
              return true;
            }),
            "");
}

}  // namespace
