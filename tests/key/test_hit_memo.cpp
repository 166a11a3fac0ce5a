// The hit path's memos: the compiler's memo of keys (key/key_memo.h), trusted only
// while every path its include scan looked at stats the same, and the toolkit discovery
// kept in the cache database (key/toolkit.h). Each thing the memos trust is changed
// in turn, and the change must be seen.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "key/include_scan.h"
#include "key/key.h"
#include "key/key_memo.h"
#include "key/toolkit.h"
#include "kjit/kjit.h"
#include "nvrtc/options.h"
#include "store/cache.h"
#include "support/test_support.h"
#include "util/text_equal.h"

namespace {

using kjit::test::TempDir;
using kjit::test::write_file;

// Files last changed more than kRacySeconds (2 s) ago, as most headers are: only those
// are trusted by their stamps.
void let_settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
}

kjit::IncludeScan scan(const std::string& source, const kjit::CompileOptions& o) {
  return kjit::scan_for(source, o, kjit::normalise(o, kjit::machine_facts(o, true)));
}

// A memo holding (source, o) with the key "k", from a scan made now.
struct Remembered {
  kjit::KeyMemo memo;
  std::string source;
  kjit::CompileOptions opts;
  bool remembered = false;

  Remembered(std::string src, kjit::CompileOptions o) : source(std::move(src)), opts(std::move(o)) {
    const kjit::IncludeScan s = scan(source, opts);
    remembered = s.rememberable();
    memo.remember(source, opts, "k", s);
  }
  bool found() {
    std::string key;
    return memo.find(source, opts, &key) && key == "k";
  }
};

kjit::CompileOptions with_include(const std::string& dir, const std::string& name = "kernel.cu") {
  kjit::CompileOptions o;
  o.target = "sm_90";
  o.name = name;
  o.toolkit_headers = false;
  o.raw = {"-I" + dir};
  return o;
}

void run(const std::string& cmd) {
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(KeyMemo, EveryChangeItTrustsStampsForIsSeen) {
  TempDir d;
  // One directory per case, so that the cases do not disturb each other.
  for (const char* c : {"edit", "rename", "shadow", "chmod", "same", "other", "link"}) {
    run("mkdir -p " + d.file(c) + "/inc " + d.file(c) + "/prog");
    write_file(d.file(c) + "/inc/h.h", "#pragma once\n#define V 1\n");
  }
  // A symlinked directory below an include path whose two targets share a hard-linked
  // header but differ in the file that header includes from its own directory (which the
  // scan resolves through the link).
  run("mkdir -p " + d.file("v1") + " " + d.file("v2") + " " + d.file("top"));
  write_file(d.file("v1/h.h"), "#include \"g.h\"\n");
  run("ln " + d.file("v1/h.h") + " " + d.file("v2/h.h"));
  write_file(d.file("v1/g.h"), "#define G 1\n");
  write_file(d.file("v2/g.h"), "#define G 2\n");
  run("ln -s ../v1 " + d.file("top/sub"));
  let_settle();

  const std::string src = "#include \"h.h\"\n__global__ void k() {}\n";
  auto in = [&](const char* c) {
    return with_include(d.file(c) + "/inc", d.file(c) + "/prog/kernel.cu");
  };

  Remembered same(src, in("same"));
  ASSERT_TRUE(same.remembered);
  EXPECT_TRUE(same.found()) << "nothing changed";

  Remembered edit(src, in("edit"));
  ASSERT_TRUE(edit.found());
  write_file(d.file("edit") + "/inc/h.h", "#pragma once\n#define V 2\n");  // same size
  EXPECT_FALSE(edit.found()) << "edited in place, same size";

  Remembered renamed(src, in("rename"));
  ASSERT_TRUE(renamed.found());
  write_file(d.file("rename") + "/inc/h.h.new", "#pragma once\n#define V 3\n");
  run("touch -r " + d.file("rename") + "/inc/h.h " + d.file("rename") + "/inc/h.h.new");
  run("mv " + d.file("rename") + "/inc/h.h.new " + d.file("rename") + "/inc/h.h");
  EXPECT_FALSE(renamed.found()) << "replaced by a rename, same size and mtime";

  Remembered shadow(src, in("shadow"));
  ASSERT_TRUE(shadow.found());
  write_file(d.file("shadow") + "/prog/h.h", "#define V 4\n");  // found before -I now
  EXPECT_FALSE(shadow.found()) << "a file made earlier in the search";

  Remembered chmod(src, in("chmod"));
  ASSERT_TRUE(chmod.found());
  ASSERT_EQ(::chmod((d.file("chmod") + "/inc/h.h").c_str(), 0600), 0);
  EXPECT_FALSE(chmod.found()) << "its change time moved";

  Remembered linked("#include \"sub/h.h\"\n",
                    with_include(d.file("top"), d.file("same") + "/prog/k.cu"));
  ASSERT_TRUE(linked.found());
  run("ln -sfn ../v2 " + d.file("top/sub.new") + " && mv -T " + d.file("top/sub.new") + " " +
      d.file("top/sub"));
  EXPECT_FALSE(linked.found()) << "a directory link on the way now points elsewhere";

  // Exactly the same request only: other bytes or other options are other requests.
  Remembered other(src, in("other"));
  std::string key;
  EXPECT_FALSE(other.memo.find(src + " ", other.opts, &key));
  kjit::CompileOptions more = other.opts;
  more.raw.push_back("-DX=1");
  EXPECT_FALSE(other.memo.find(src, more, &key));
  EXPECT_TRUE(other.found());
}

TEST(KeyMemo, WorkingDirectoryAndRecentFilesAndListingsAreNotTrusted) {
  TempDir d;
  run("mkdir -p " + d.file("a") + " " + d.file("b") + " " + d.file("inc"));
  write_file(d.file("a/h.h"), "#define V 1\n");
  write_file(d.file("b/h.h"), "#define V 2\n");
  write_file(d.file("inc/x.h"), "#define X 1\n");
  let_settle();
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);

  // A program name without a directory is searched from the working directory.
  kjit::CompileOptions o;
  o.target = "sm_90";
  o.toolkit_headers = false;
  ASSERT_EQ(chdir(d.file("a").c_str()), 0);
  Remembered by_cwd("#include \"h.h\"\n", o);
  EXPECT_TRUE(by_cwd.found());
  ASSERT_EQ(chdir(d.file("b").c_str()), 0);
  EXPECT_FALSE(by_cwd.found()) << "another working directory";
  ASSERT_EQ(chdir(cwd), 0);

  // A header written just now is read again at every scan, never trusted by its stamp.
  write_file(d.file("inc/fresh.h"), "#define F 1\n");
  Remembered fresh("#include <fresh.h>\n", with_include(d.file("inc")));
  EXPECT_FALSE(fresh.remembered);
  EXPECT_FALSE(fresh.found());

  // A computed include no macro explains reads the searched directories whole.
  Remembered computed("#include HEADER\n", with_include(d.file("inc")));
  EXPECT_FALSE(computed.remembered);
  EXPECT_FALSE(computed.found());
}

// Large sources are bucketed by a sample of their bytes: ones that differ only between
// the samples, or only in their size, still get their own keys.
TEST(KeyMemo, LargeSourcesThatDifferAnywhereAreDifferentRequests) {
  kjit::KeyMemo memo;
  kjit::CompileOptions o;
  o.target = "sm_90";
  const kjit::IncludeScan nothing_read;  // a source without includes reads no file
  std::string base(65000, 'x');
  std::vector<std::string> sources;
  for (size_t at : {size_t(1500), size_t(2100), size_t(33333), size_t(63000)}) {
    std::string s = base;
    s[at] = 'y';
    sources.push_back(s);
  }
  sources.push_back(base + "x");
  sources.push_back(base);
  for (size_t i = 0; i < sources.size(); ++i) {
    memo.remember(sources[i], o, "k" + std::to_string(i), nothing_read);
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string key;
    ASSERT_TRUE(memo.find(sources[i], o, &key)) << i;
    EXPECT_EQ(key, "k" + std::to_string(i));
  }
  std::string key;
  std::string unseen = base;
  unseen[40000] = 'z';
  EXPECT_FALSE(memo.find(unseen, o, &key));
  // The same through the C string lookup, which measures a source while comparing it.
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_TRUE(memo.find(sources[i].c_str(), o, &key)) << i;
    EXPECT_EQ(key, "k" + std::to_string(i));
  }
  EXPECT_FALSE(memo.find(unseen.c_str(), o, &key));
}

TEST(KeyMemo, OneLargeSourceOfItsBucketIsComparedWhileItsEndIsFound) {
  kjit::KeyMemo memo;
  kjit::CompileOptions o;
  o.target = "sm_90";
  const kjit::IncludeScan nothing_read;
  std::string base;
  for (int i = 0; base.size() < 65000; ++i) base += "// line " + std::to_string(i) + "\n";
  memo.remember(base, o, "k", nothing_read);
  std::string key;
  ASSERT_TRUE(memo.find(base.c_str(), o, &key));
  EXPECT_EQ(key, "k");
  std::vector<std::string> others{base + "x", base.substr(0, base.size() - 1),
                                  base.substr(0, 5000)};
  for (size_t at : {size_t(4096), size_t(4097), size_t(30000), base.size() - 1}) {
    std::string s = base;
    s[at] = '#';
    others.push_back(s);
  }
  for (const std::string& s : others) {
    EXPECT_FALSE(memo.find(s.c_str(), o, &key)) << s.size();
    EXPECT_FALSE(memo.find(s, o, &key)) << s.size();
  }
  kjit::CompileOptions other = o;
  other.target = "sm_80";
  EXPECT_FALSE(memo.find(base.c_str(), other, &key)) << "the options are compared too";
}

// The one-pass comparison (util/text_equal.h) against the obvious one, at every alignment
// of the caller's string and around every block boundary.
TEST(TextEqual, AgreesWithAPlainComparison) {
  std::string text;
  for (int i = 0; text.size() < 5000; ++i) text += char('a' + i % 26);
  std::vector<char> buf(text.size() + 256);
  for (size_t n :
       {0, 1, 2, 15, 16, 17, 31, 47, 63, 64, 65, 127, 128, 129, 200, 4095, 4096, 4097, 4999}) {
    std::string ref = text.substr(0, n);
    std::string padded = ref + std::string(kjit::kTextPadding, '\0');
    std::vector<std::string> tries{ref, ref + "a", ref + "ab"};
    if (n > 0) tries.push_back(ref.substr(0, n - 1));
    if (n > 3) tries.push_back(ref.substr(0, n - 3));
    for (size_t at : {size_t(0), n / 2, n > 0 ? n - 1 : 0}) {
      if (at < n) {
        std::string t = ref;
        t[at] = '#';
        tries.push_back(t);
      }
    }
    for (const std::string& t : tries) {
      for (size_t align = 0; align < 64; ++align) {
        std::memcpy(buf.data() + align, t.c_str(), t.size() + 1);
        EXPECT_EQ(kjit::cstr_equals(buf.data() + align, padded.data(), n), t == ref)
            << "n=" << n << " tried " << t.size() << " bytes at alignment " << align;
      }
    }
  }
}

TEST(TextEqual, NeverReadsPastThePageOfTheTerminator) {
  const long page = sysconf(_SC_PAGESIZE);
  char* map = static_cast<char*>(
      mmap(nullptr, size_t(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(mprotect(map + page, size_t(page), PROT_NONE), 0);  // the next page faults
  const auto text = [](size_t n) {
    return std::string(n, 'q') + std::string(kjit::kTextPadding, '\0');
  };
  const std::string longer = text(299);
  for (size_t len = 0; len < 300; ++len) {
    char* s = map + page - 1 - len;  // its terminator is the page's last byte
    std::memset(s, 'q', len);
    s[len] = '\0';
    EXPECT_TRUE(kjit::cstr_equals(s, text(len).data(), len));
    EXPECT_EQ(kjit::cstr_equals(s, longer.data(), 299), len == 299);
    if (len > 0) {
      EXPECT_FALSE(kjit::cstr_equals(s, text(len - 1).data(), len - 1));
    }
  }
  munmap(map, size_t(2 * page));
}

// A name probed and not found is covered by one stamp of its directory (with the
// directory's times) when the directory had settled; otherwise by its own absence. Either
// way a file made there later is seen.
TEST(KeyMemo, AbsentNamesAreCoveredByTheirDirectoryOnlyWhenItHadSettled) {
  TempDir d;
  run("mkdir -p " + d.file("old/prog") + " " + d.file("old/inc") + " " + d.file("new/prog") + " " +
      d.file("new/inc"));
  for (const char* c : {"old", "new"}) {
    write_file(d.file(c) + "/inc/a.h", "#pragma once\n#define A 1\n");
    write_file(d.file(c) + "/inc/b.h", "#pragma once\n#define B 1\n");
  }
  let_settle();
  write_file(d.file("new/prog/unrelated.txt"), "made just now\n");  // prog's times are recent

  const std::string src = "#include \"a.h\"\n#include \"b.h\"\n__global__ void k() {}\n";
  auto in = [&](const char* c) {
    return with_include(d.file(c) + "/inc", d.file(c) + "/prog/kernel.cu");
  };
  auto absent_stamps = [](const kjit::IncludeScan& s) {
    int n = 0;
    for (const kjit::PathStamp& p : s.looked) n += p.kind == 0;
    return n;
  };
  auto covers = [](const kjit::IncludeScan& s, const std::string& dir) {
    for (const kjit::PathStamp& p : s.looked) {
      if (p.path == dir && p.kind == 2 && p.listing) return true;
    }
    return false;
  };

  const kjit::IncludeScan settled = scan(src, in("old"));
  EXPECT_EQ(absent_stamps(settled), 0) << "prog/a.h and prog/b.h: covered by prog";
  EXPECT_TRUE(covers(settled, d.file("old/prog")));
  const kjit::IncludeScan recent = scan(src, in("new"));
  EXPECT_EQ(absent_stamps(recent), 2) << "a directory changed just now vouches for nothing";
  EXPECT_FALSE(covers(recent, d.file("new/prog")));

  for (const char* c : {"old", "new"}) {
    Remembered r(src, in(c));
    ASSERT_TRUE(r.remembered) << c;
    ASSERT_TRUE(r.found()) << c;
    write_file(d.file(c) + "/prog/b.h", "#define B 2\n");  // shadows inc/b.h at once
    EXPECT_FALSE(r.found()) << c << ": a file made in a directory searched first";
  }
  // The working directory, searched first for a program without a directory, vouches
  // the same way (checked through "." while the process stays in it).
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(d.file("old/inc").c_str()), 0);
  run("mkdir -p " + d.file("old/work"));
  let_settle();
  ASSERT_EQ(chdir(d.file("old/work").c_str()), 0);
  Remembered here(src, with_include(d.file("old/inc")));
  const bool here_remembered = here.remembered, here_found = here.found();
  write_file(d.file("old/work/a.h"), "#define A 2\n");
  const bool found_after_shadow = here.found();
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_TRUE(here_remembered);
  EXPECT_TRUE(here_found);
  EXPECT_FALSE(found_after_shadow) << "a file made in the working directory";

  // Removing a name again is a change of the directory too.
  let_settle();
  Remembered again(src, in("old"));
  ASSERT_TRUE(again.remembered);
  run("rm " + d.file("old/prog/b.h"));
  EXPECT_FALSE(again.found()) << "an entry removed from a covering directory";
}

// Through the C API: the memo serves hits, and an edit of the same size in the same
// second after a memo hit gives the new code at once.
TEST(KeyMemo, CompileSeesAnEditRightAfterAHit) {
  TempDir d;
  run("mkdir -p " + d.file("inc"));
  const std::string header = d.file("inc/value.h");
  write_file(header, "#pragma once\n__device__ int value = 1;\n");
  let_settle();
  kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
  const std::string dir = d.file("cache");
  co.directory = dir.c_str();
  kjit_cache* cache = nullptr;
  ASSERT_EQ(kjit_cache_open(&co, &cache), KJIT_OK);
  kjit_compiler* c = nullptr;
  ASSERT_EQ(kjit_compiler_create(cache, 1, &c), KJIT_OK);
  kjit_options* o = nullptr;
  ASSERT_EQ(kjit_options_create(&o), KJIT_OK);
  ASSERT_EQ(kjit_options_set_target(o, "sm_90"), KJIT_OK);
  ASSERT_EQ(kjit_options_add(o, ("-I" + d.file("inc")).c_str()), KJIT_OK);
  const char* src = "#include \"value.h\"\n__global__ void k(int* p) { *p = value; }\n";
  auto ptx = [&](int* tier) {
    kjit_binary* b = nullptr;
    EXPECT_EQ(kjit_compile(c, src, o, &b), KJIT_OK) << kjit_last_error();
    size_t n = 0;
    const void* p = kjit_binary_data(b, KJIT_OUTPUT_PTX, &n);
    std::string out(static_cast<const char*>(p), n);
    *tier = kjit_binary_tier(b);
    kjit_binary_destroy(b);
    return out;
  };
  int tier = -1;
  const std::string first = ptx(&tier);
  EXPECT_EQ(tier, KJIT_TIER_COMPILED);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ptx(&tier), first);
    EXPECT_EQ(tier, KJIT_TIER_MEMORY);
  }
  for (int v = 2; v <= 4; ++v) {
    write_file(header, "#pragma once\n__device__ int value = " + std::to_string(v) + ";\n");
    const std::string now = ptx(&tier);
    EXPECT_EQ(tier, KJIT_TIER_COMPILED) << "value " << v;
    EXPECT_NE(now.find(std::to_string(v)), std::string::npos) << now;
    EXPECT_EQ(ptx(&tier), now);
  }
  kjit_options_destroy(o);
  kjit_compiler_destroy(c);
  kjit_cache_close(cache);
}

// ---- the toolkit discovery kept in the cache ---------------------------------------------

// A minimal toolkit: what discovery looks for, nothing more.
void make_toolkit(const std::string& root, const std::string& version) {
  run("mkdir -p " + root + "/include/cccl/cuda/std/__cccl");
  write_file(root + "/include/cuda_fp16.h", "// fp16\n");
  write_file(root + "/include/cccl/cuda/std/__cccl/version.h", "#define CCCL 3\n");
  write_file(root + "/version.json", "{\"cuda\": \"" + version + "\"}\n");
}

// find_toolkit in a new process (its memo is per process): the fingerprint it gives.
std::string fingerprint_in_child(const std::string& cache_dir, const std::string& root) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    kjit::CacheConfig cfg;
    cfg.directory = cache_dir;
    kjit::Cache cache(cfg);
    const std::string fp = kjit::find_toolkit(root, &cache.facts()).fingerprint;
    if (write(fds[1], fp.data(), fp.size()) != ssize_t(fp.size())) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? out : "child failed";
}

std::optional<std::string> record(const std::string& cache_dir, const std::string& root) {
  kjit::CacheConfig cfg;
  cfg.directory = cache_dir;
  kjit::Cache cache(cfg);
  return cache.facts().get(kjit::toolkit_record_name(root));
}

void set_record(const std::string& cache_dir, const std::string& root, const std::string& v) {
  kjit::CacheConfig cfg;
  cfg.directory = cache_dir;
  kjit::Cache cache(cfg);
  cache.facts().set(kjit::toolkit_record_name(root), v);
}

TEST(ToolkitRecord, UsedWhileWhatItLookedAtIsUnchangedAndOnlyThen) {
  TempDir d;
  const std::string root = d.file("cuda"), cache_dir = d.file("cache");
  make_toolkit(root, "13.0.1");
  let_settle();

  const std::string fp = fingerprint_in_child(cache_dir, root);
  ASSERT_EQ(fp.size(), 64u) << fp;
  const auto kept = record(cache_dir, root);
  ASSERT_TRUE(kept.has_value()) << "the discovery was not kept";
  EXPECT_NE(kept->find(fp), std::string::npos);

  // A record whose stamps hold is believed: proven with a fingerprint it never computed.
  const std::string marked(64, 'a');
  std::string forged = *kept;
  forged.replace(forged.find(fp), fp.size(), marked);
  set_record(cache_dir, root, forged);
  EXPECT_EQ(fingerprint_in_child(cache_dir, root), marked);

  // Each thing it read, changed, makes it discover again (and get the right answer).
  const std::string cccl = root + "/include/cccl/cuda/std/__cccl/version.h";
  const std::vector<std::pair<std::string, std::function<void()>>> changes = {
      {"version.json edited",
       [&] { write_file(root + "/version.json", "{\"cuda\": \"13.0.2\"}\n"); }},
      {"CCCL version edited", [&] { write_file(cccl, "#define CCCL 4\n"); }},
      {"a wheel's dist-info added", [&] { run("mkdir -p " + root + "/dist-info/nvcc-13.0.3"); }},
      {"version.txt added", [&] { write_file(root + "/version.txt", "CUDA Version 13.0.3\n"); }},
  };
  std::string previous = fp;
  for (const auto& [what, change] : changes) {
    set_record(cache_dir, root, forged);  // stamps of before the change
    change();
    const std::string now = fingerprint_in_child(cache_dir, root);
    EXPECT_NE(now, marked) << what << ": the stale record was used";
    EXPECT_NE(now, previous) << what << ": the fingerprint did not change";
    EXPECT_EQ(now.size(), 64u) << what;
    previous = now;
    let_settle();
    forged = *record(cache_dir, root);  // kept again once settled...
    if (forged.find(now) == std::string::npos) {
      // ...or not yet (changed within the racy window): discover once more, settled now.
      EXPECT_EQ(fingerprint_in_child(cache_dir, root), now);
      forged = *record(cache_dir, root);
    }
    ASSERT_NE(forged.find(now), std::string::npos) << what;
    forged.replace(forged.find(now), now.size(), marked);
  }

  // A record whose stamps no longer match (the last path's kind changed) is ignored, as is
  // a truncated one.
  {
    kjit::Toolkit t;
    std::vector<kjit::PathStamp> looked;
    ASSERT_TRUE(kjit::decode_toolkit_record(forged, &t, &looked));
    ASSERT_FALSE(looked.empty());
    looked.back().kind = looked.back().kind == 0 ? 1 : 0;
    set_record(cache_dir, root, kjit::encode_toolkit_record(t, looked));
    EXPECT_EQ(fingerprint_in_child(cache_dir, root), previous) << "stamp changed";
  }
  set_record(cache_dir, root, forged.substr(0, forged.size() - 1));
  EXPECT_EQ(fingerprint_in_child(cache_dir, root), previous) << "truncated";
  set_record(cache_dir, root, forged);
  EXPECT_EQ(fingerprint_in_child(cache_dir, root), marked) << "the intact record is believed";

  // A damaged record is ignored.
  set_record(cache_dir, root, "kjit-toolkit-record-1 garbage");
  EXPECT_EQ(fingerprint_in_child(cache_dir, root), previous);
}

}  // namespace
