// Keys from what NVRTC read (src/key/dep_manifest.h): a program whose includes go
// through a function-like computed include (as CuTe's CUDA_STD_HEADER(x)) has one key in
// every process whatever is written to the working directory; an edit of a header it reads,
// or a file made earlier on its search path, is a miss that gives the new code; an edit of a
// header it does not read is a hit. A manifest record that names another entry than its
// inputs give is never followed. Relative names are checked where the next compile looks.
// The same with CUTLASS's CuTe where the test data is present.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "key/dep_manifest.h"
#include "kjit/kjit.h"
#include "support/test_support.h"

namespace {

using kjit::test::TempDir;
using kjit::test::write_file;

struct Options {
  kjit_options* o = nullptr;
  explicit Options(const std::string& target = "sm_80") {
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(o, target.c_str()), KJIT_OK);
    EXPECT_EQ(kjit_options_set_outputs(o, KJIT_OUTPUT_PTX), KJIT_OK);
    EXPECT_EQ(kjit_options_add(o, "-std=c++17"), KJIT_OK);
  }
  void include(const std::string& dir) {
    EXPECT_EQ(kjit_options_add_include_path(o, dir.c_str()), KJIT_OK);
  }
  ~Options() { kjit_options_destroy(o); }
};

struct Binary {
  kjit_binary* b = nullptr;
  kjit_status status = KJIT_OK;
  ~Binary() { kjit_binary_destroy(b); }
  std::string key() const { return b ? kjit_binary_key(b) : ""; }
  int tier() const { return b ? kjit_binary_tier(b) : -1; }
  std::string ptx() const {
    size_t size = 0;
    const void* data = b ? kjit_binary_data(b, KJIT_OUTPUT_PTX, &size) : nullptr;
    return data ? std::string(static_cast<const char*>(data), size) : std::string();
  }
  std::string log() const { return b ? kjit_binary_log(b) : ""; }
};

// A cache handle and a compiler of their own: a fresh handle has nothing in memory.
struct Session {
  kjit_cache* cache = nullptr;
  kjit_compiler* c = nullptr;
  Session(const std::string& dir, int mode) {
    kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
    co.directory = dir.c_str();
    EXPECT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_compiler_create(cache, 2, &c), KJIT_OK) << kjit_last_error();
    EXPECT_EQ(kjit_compiler_set_compile_mode(c, mode), KJIT_OK);
  }
  ~Session() {
    kjit_compiler_destroy(c);
    kjit_cache_close(cache);
  }
  void compile(const std::string& src, const Options& o, Binary* out) {
    out->status = kjit_compile(c, src.c_str(), o.o, &out->b);
  }
  uint64_t not_stored() {
    kjit_cache_stats s = KJIT_CACHE_STATS_INIT;
    EXPECT_EQ(kjit_cache_stats_get(cache, &s), KJIT_OK);
    return s.not_stored;
  }
};

// A library whose configuration header picks the standard headers through a function-like
// macro, as CuTe's CUDA_STD_HEADER does: no scanner that does not expand it can follow it.
void write_library(const std::string& inc) {
  ASSERT_EQ(mkdir((inc + "/mylib").c_str(), 0700), 0);
  write_file(inc + "/mylib/config.hpp",
             "#pragma once\n#define MYLIB_STD_HEADER(x) <cuda/std/x>\n"
             "#include MYLIB_STD_HEADER(type_traits)\n#include MYLIB_STD_HEADER(cstdint)\n");
  write_file(inc + "/mylib/value.hpp",
             "#pragma once\n#include \"config.hpp\"\n"
             "namespace mylib { constexpr int value = 1111; }\n");
  write_file(inc + "/mylib/unused.hpp", "#pragma once\n// not included by the program\n");
}

const char* const kProgram =
    "#include <mylib/value.hpp>\n"
    "extern \"C\" __global__ void k(int* p) {\n"
    "  static_assert(cuda::std::is_same<cuda::std::int32_t, int>::value, \"int32\");\n"
    "  *p = mylib::value;\n}\n";

class Manifest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { setenv("KJIT_WORKER_IDLE_S", "20", 1); }
};

// The first compile runs in a child process; the parent, after a file lands in the working
// directory, hits its entry with the same key. Edits then behave as the uncached compiler.
TEST_P(Manifest, FunctionLikeComputedIncludeHitsAcrossProcessesAndFollowsEdits) {
  TempDir cache, work, inc0, inc;
  write_library(inc.path());
  ASSERT_EQ(mkdir(inc0.file("mylib").c_str(), 0700), 0);
  kjit::test::Cwd cwd(work.path());
  Options o;
  o.include(inc0.path());
  o.include(inc.path());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    Binary b;
    {
      Session s(cache.path(), GetParam());
      s.compile(kProgram, o, &b);
    }
    const std::string key = b.status == KJIT_OK && b.tier() == KJIT_TIER_COMPILED ? b.key() : "";
    const ssize_t n = write(fds[1], key.data(), key.size());
    _exit(n == ssize_t(key.size()) && !key.empty() ? 0 : 1);
  }
  close(fds[1]);
  char buf[128] = {};
  const ssize_t got = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's compile failed";
  const std::string first_key(buf, got > 0 ? size_t(got) : 0);
  ASSERT_EQ(first_key.size(), 64u);

  write_file(work.file("k.ptx"), "written by an earlier run\n");
  Session s(cache.path(), GetParam());
  Binary hit;
  s.compile(kProgram, o, &hit);
  ASSERT_EQ(hit.status, KJIT_OK) << kjit_last_error() << hit.log();
  EXPECT_EQ(hit.tier(), KJIT_TIER_DISK);
  EXPECT_EQ(hit.key(), first_key);
  char key[65];
  ASSERT_EQ(kjit_compute_key(kProgram, o.o, key), KJIT_OK) << kjit_last_error();
  EXPECT_EQ(std::string(key), first_key);

  // A header NVRTC does not read: still a hit.
  write_file(inc.file("mylib/unused.hpp"), "#pragma once\n// edited\n");
  Binary unrelated;
  s.compile(kProgram, o, &unrelated);
  EXPECT_NE(unrelated.tier(), KJIT_TIER_COMPILED);
  EXPECT_EQ(unrelated.key(), first_key);

  // A header it reads: a miss with the new code.
  write_file(
      inc.file("mylib/value.hpp"),
      "#pragma once\n#include \"config.hpp\"\nnamespace mylib { constexpr int value = 2222; }\n");
  Binary edited;
  s.compile(kProgram, o, &edited);
  ASSERT_EQ(edited.status, KJIT_OK) << edited.log();
  EXPECT_EQ(edited.tier(), KJIT_TIER_COMPILED);
  EXPECT_NE(edited.key(), first_key);
  EXPECT_NE(edited.ptx().find("2222"), std::string::npos);

  // A file made earlier on the search path: NVRTC reads it now.
  write_file(inc0.file("mylib/value.hpp"),
             "#pragma once\n#include <mylib/config.hpp>\n"
             "namespace mylib { constexpr int value = 3333; }\n");
  Binary shadowed;
  s.compile(kProgram, o, &shadowed);
  ASSERT_EQ(shadowed.status, KJIT_OK) << shadowed.log();
  EXPECT_EQ(shadowed.tier(), KJIT_TIER_COMPILED);
  EXPECT_NE(shadowed.ptx().find("3333"), std::string::npos);

  // Back to the first state: the first record holds again and gives its entry.
  ASSERT_EQ(unlink(inc0.file("mylib/value.hpp").c_str()), 0);
  write_file(
      inc.file("mylib/value.hpp"),
      "#pragma once\n#include \"config.hpp\"\nnamespace mylib { constexpr int value = 1111; }\n");
  Binary back;
  s.compile(kProgram, o, &back);
  ASSERT_EQ(back.status, KJIT_OK) << back.log();
  EXPECT_NE(back.tier(), KJIT_TIER_COMPILED);
  EXPECT_EQ(back.key(), first_key);
  EXPECT_NE(back.ptx().find("1111"), std::string::npos);
  EXPECT_EQ(s.not_stored(), 0u);
}

// A quoted include of a program named without a directory is looked for in the working
// directory: the record names it relative, and another directory gives its own code.
TEST_P(Manifest, RelativeNamesAreCheckedInTheWorkingDirectoryOfTheCompile) {
  TempDir cache, a, b;
  write_file(a.file("h.h"), "#define V 41\n");
  write_file(b.file("h.h"), "#define V 42\n");
  const std::string src = "#include \"h.h\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n";
  Options o;
  Session s(cache.path(), GetParam());
  std::string key_a;
  {
    kjit::test::Cwd in(a.path());
    Binary x;
    s.compile(src, o, &x);
    ASSERT_EQ(x.status, KJIT_OK) << x.log();
    EXPECT_NE(x.ptx().find("41"), std::string::npos);
    key_a = x.key();
  }
  {
    kjit::test::Cwd in(b.path());
    Binary y;
    s.compile(src, o, &y);
    ASSERT_EQ(y.status, KJIT_OK) << y.log();
    EXPECT_EQ(y.tier(), KJIT_TIER_COMPILED);
    EXPECT_NE(y.ptx().find("42"), std::string::npos);
    EXPECT_NE(y.key(), key_a);
  }
  {
    kjit::test::Cwd in(a.path());
    Binary z;
    s.compile(src, o, &z);
    ASSERT_EQ(z.status, KJIT_OK) << z.log();
    EXPECT_NE(z.tier(), KJIT_TIER_COMPILED);
    EXPECT_EQ(z.key(), key_a);
    EXPECT_NE(z.ptx().find("41"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Manifest,
                         ::testing::Values(int(KJIT_COMPILE_MODE_INPROCESS),
                                           int(KJIT_COMPILE_MODE_AUTO)),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == KJIT_COMPILE_MODE_INPROCESS ? "InProcess" : "Auto";
                         });

// A repeated request is answered by the compiler's memo, which checks a settled directory
// once for all the names NVRTC did not find in it: a file made there afterwards, which
// NVRTC would now read first, is still a miss with the new code.
TEST(ManifestMemo, AFileMadeWhereAHeaderWasNotFoundIsSeenAfterHits) {
  TempDir cache, d;
  ASSERT_EQ(mkdir(d.file("prog").c_str(), 0700), 0);
  ASSERT_EQ(mkdir(d.file("inc").c_str(), 0700), 0);
  write_file(d.file("inc/b.h"), "#define B 5511\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // settled: one stamp vouches
  const std::string src = "#include \"b.h\"\nextern \"C\" __global__ void k(int* p) { *p = B; }\n";
  Options o;
  o.include(d.file("inc"));
  ASSERT_EQ(kjit_options_set_name(o.o, d.file("prog/kernel.cu").c_str()), KJIT_OK);
  Session s(cache.path(), KJIT_COMPILE_MODE_INPROCESS);
  for (int i = 0; i < 3; ++i) {
    Binary b;
    s.compile(src, o, &b);
    ASSERT_EQ(b.status, KJIT_OK) << b.log();
    EXPECT_EQ(b.tier() == KJIT_TIER_COMPILED, i == 0) << i;
    EXPECT_NE(b.ptx().find("5511"), std::string::npos);
  }
  write_file(d.file("prog/b.h"), "#define B 5522\n");
  Binary shadowed;
  s.compile(src, o, &shadowed);
  ASSERT_EQ(shadowed.status, KJIT_OK) << shadowed.log();
  EXPECT_EQ(shadowed.tier(), KJIT_TIER_COMPILED);
  EXPECT_NE(shadowed.ptx().find("5522"), std::string::npos);
}

// Manifests travel with exports: another cache that imports them hits where the files are
// the same at the same paths, and compiles where they differ (never a wrong hit).
TEST(ManifestExport, ImportedManifestHitsWhereTheFilesAreTheSame) {
  TempDir first, second, inc, files;
  write_file(inc.file("v.h"), "#define V 6611\n");
  const std::string src = "#include <v.h>\nextern \"C\" __global__ void k(int* p) { *p = V; }\n";
  Options o;
  o.include(inc.path());
  std::string key;
  {
    Session s(first.path(), KJIT_COMPILE_MODE_INPROCESS);
    Binary b;
    s.compile(src, o, &b);
    ASSERT_EQ(b.status, KJIT_OK) << b.log();
    key = b.key();
    uint64_t count = 0;
    ASSERT_EQ(kjit_cache_export(s.cache, files.file("e.kjit").c_str(), &count), KJIT_OK)
        << kjit_last_error();
    EXPECT_EQ(count, 2u) << "the entry and its manifest";
  }
  Session s(second.path(), KJIT_COMPILE_MODE_INPROCESS);
  uint64_t imported = 0, rejected = 0;
  ASSERT_EQ(kjit_cache_import(s.cache, files.file("e.kjit").c_str(), &imported, &rejected), KJIT_OK)
      << kjit_last_error();
  EXPECT_EQ(imported, 2u);
  EXPECT_EQ(rejected, 0u);
  Binary hit;
  s.compile(src, o, &hit);
  ASSERT_EQ(hit.status, KJIT_OK) << hit.log();
  EXPECT_NE(hit.tier(), KJIT_TIER_COMPILED);  // imported entries are in memory too
  EXPECT_EQ(hit.key(), key);
  // The same path with other bytes (as on another node): a miss with its own code.
  write_file(inc.file("v.h"), "#define V 6622\n");
  Binary other;
  s.compile(src, o, &other);
  ASSERT_EQ(other.status, KJIT_OK) << other.log();
  EXPECT_EQ(other.tier(), KJIT_TIER_COMPILED);
  EXPECT_NE(other.ptx().find("6622"), std::string::npos);
}

// A compile that uses a precompiled header has the key of one that does not: the PCH's
// inputs are named as NVRTC names them without it (here a relative look-up of a header
// that is not there, made while the PCH was created).
TEST(ManifestPch, KeyIsTheSameWithAndWithoutAPch) {
  TempDir work, with, without;
  kjit::test::Cwd cwd(work.path());
  auto program = [](int v) {
    return "#include <cuda/std/cstdint>\n#if __has_include(\"absent.h\")\n#error\n#endif\n"
           "extern \"C\" __global__ void k(int* p) { *p = " +
           std::to_string(v) + "; }\n";
  };
  Options o;
  ASSERT_EQ(kjit_options_set_name(o.o, "k.cu"), KJIT_OK);
  Session pch(with.path(), KJIT_COMPILE_MODE_INPROCESS);
  Binary first, second;
  pch.compile(program(1), o, &first);   // makes the PCH
  pch.compile(program(2), o, &second);  // uses it
  ASSERT_EQ(second.status, KJIT_OK) << second.log();
  kjit_cache_stats st = KJIT_CACHE_STATS_INIT;
  ASSERT_EQ(kjit_cache_stats_get(pch.cache, &st), KJIT_OK);
  ASSERT_GE(st.pch_used, 1u) << "no PCH was used: the test tests nothing";
  Options plain;
  ASSERT_EQ(kjit_options_set_name(plain.o, "k.cu"), KJIT_OK);
  ASSERT_EQ(kjit_options_set_pch(plain.o, 0), KJIT_OK);
  Session none(without.path(), KJIT_COMPILE_MODE_INPROCESS);
  Binary again;
  none.compile(program(2), plain, &again);
  ASSERT_EQ(again.status, KJIT_OK) << again.log();
  EXPECT_EQ(again.key(), second.key());
}

// The manifest's text round-trips; damaged or foreign text is no manifest.
TEST(ManifestText, RoundTripsAndRefusesDamage) {
  kjit::DepRecord r;
  r.entry_key = std::string(64, 'a');
  r.builtins = {"cstdint"};
  kjit::FileInput f;
  f.opened = "inc/h.h";
  f.path = "/x/inc/h.h";
  f.relative = true;
  f.exists = true;
  f.digest = std::string(64, 'b');
  f.stamp.kind = 1;
  f.stamp.dev = 1;
  f.stamp.ino = 1ull << 60;
  f.stamp.mtime_ns = 1790000000123456789;
  f.stamp.ctime_ns = 1790000000123456790;
  kjit::FileInput none;
  none.opened = "/x/inc0/h.h";
  none.path = "/x/inc0/h.h";
  r.inputs = {f, none};
  const std::string text = kjit::manifest_text({r, r});
  const auto back = kjit::parse_manifest(text);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  const kjit::FileInput& g = (*back)[1].inputs[0];
  EXPECT_EQ(g.opened, f.opened);
  EXPECT_EQ(g.stamp.ino, f.stamp.ino);
  EXPECT_EQ(g.stamp.mtime_ns, f.stamp.mtime_ns);
  EXPECT_TRUE(g.relative && g.exists);
  EXPECT_FALSE((*back)[1].inputs[1].exists);
  EXPECT_EQ((*back)[0].builtins, r.builtins);
  for (size_t cut = 0; cut < text.size(); cut += 7) {
    EXPECT_FALSE(kjit::parse_manifest(text.substr(0, cut)).has_value()) << cut;
  }
  EXPECT_FALSE(kjit::parse_manifest(text + "1:x").has_value());
  EXPECT_FALSE(kjit::parse_manifest("not a manifest").has_value());
  // An existing file without a digest, a relative name that is absolute: refused.
  kjit::DepRecord bad = r;
  bad.inputs[0].digest.clear();
  EXPECT_FALSE(kjit::parse_manifest(kjit::manifest_text({bad})).has_value());
  bad = r;
  bad.inputs[0].opened = "/abs";
  EXPECT_FALSE(kjit::parse_manifest(kjit::manifest_text({bad})).has_value());
}

// The entry key is recomputed from each record's inputs: a record that names another
// entry (a damaged or foreign manifest) leads nowhere, and the program is compiled.
TEST(ManifestText, EntryKeyCoversEveryInputAndTheBuiltins) {
  kjit::DepRecord r;
  kjit::FileInput f;
  f.opened = "/x/h.h";
  f.exists = true;
  f.digest = std::string(64, 'b');
  r.inputs = {f};
  const std::string base(64, '0');
  const std::string k = kjit::dep_entry_key(base, r, "");
  kjit::DepRecord other = r;
  other.inputs[0].digest = std::string(64, 'c');
  EXPECT_NE(kjit::dep_entry_key(base, other, ""), k);
  other = r;
  other.inputs[0].exists = false;
  EXPECT_NE(kjit::dep_entry_key(base, other, ""), k);
  other = r;
  other.inputs[0].opened = "/y/h.h";
  EXPECT_NE(kjit::dep_entry_key(base, other, ""), k);
  other = r;
  other.builtins = {"cstdint"};
  EXPECT_NE(kjit::dep_entry_key(base, other, ""), k);
  EXPECT_NE(kjit::dep_entry_key(std::string(64, '1'), r, ""), k);
  // The working directory counts only for records with relative names.
  EXPECT_EQ(kjit::dep_entry_key(base, r, "/somewhere"), k);
  other = r;
  other.inputs[0].opened = "h.h";
  other.inputs[0].relative = true;
  EXPECT_NE(kjit::dep_entry_key(base, other, "/a"), kjit::dep_entry_key(base, other, "/b"));
  EXPECT_EQ(kjit::dep_entry_key(base, other, ""), kjit::dep_entry_key(base, other, ""));
}

// CUTLASS's CuTe, where the test data is unpacked (KJIT_CUTLASS_DIR names the directory
// holding include/) or its archive is found beside the repository.
std::string cutlass_include(TempDir* scratch, std::string* why) {
  if (const char* dir = std::getenv("KJIT_CUTLASS_DIR")) return std::string(dir) + "/include";
  const std::string tgz = std::string(KJIT_SOURCE_DIR) + "/../shared/testdata/cutlass-4.7.tgz";
  if (access(tgz.c_str(), R_OK) != 0) {
    *why = "CUTLASS test data not found (set KJIT_CUTLASS_DIR or place " + tgz + ")";
    return "";
  }
  const std::string cmd = "tar -xzf '" + tgz + "' -C '" + scratch->path() + "' include";
  if (std::system(cmd.c_str()) != 0) {
    *why = "could not unpack " + tgz;
    return "";
  }
  const std::string found = scratch->path() + "/include";
  if (access((found + "/cute/tensor.hpp").c_str(), R_OK) == 0) return found;
  *why = "the archive has no include/cute/tensor.hpp at its top";
  return "";
}

TEST(ManifestCute, RealCuteProgramHitsFromAFreshHandleAndFollowsEdits) {
  TempDir scratch, cache, work;
  std::string why;
  const std::string inc = cutlass_include(&scratch, &why);
  if (inc.empty()) GTEST_SKIP() << why;
  kjit::test::Cwd cwd(work.path());
  const std::string src =
      "#include <cute/tensor.hpp>\n"
      "extern \"C\" __global__ void k(float* p) {\n"
      "  using namespace cute;\n"
      "  auto t = make_tensor(make_gmem_ptr(p), make_shape(Int<8>{}, Int<4>{}));\n"
      "  t(threadIdx.x % 8, 0) = 1.0f;\n}\n";
  Options o("sm_90");
  EXPECT_EQ(kjit_options_add(o.o, "-default-device"), KJIT_OK);
  EXPECT_EQ(kjit_options_add(o.o, "-w"), KJIT_OK);
  o.include(inc);
  std::string first;
  {
    Session s(cache.path(), KJIT_COMPILE_MODE_AUTO);
    Binary b;
    s.compile(src, o, &b);
    ASSERT_EQ(b.status, KJIT_OK) << kjit_last_error() << b.log();
    EXPECT_EQ(s.not_stored(), 0u);
    first = b.key();
  }
  write_file(work.file("k.ptx"), "an output of an earlier run\n");
  Session s(cache.path(), KJIT_COMPILE_MODE_AUTO);
  Binary hit;
  s.compile(src, o, &hit);
  ASSERT_EQ(hit.status, KJIT_OK) << hit.log();
  EXPECT_EQ(hit.tier(), KJIT_TIER_DISK);
  EXPECT_EQ(hit.key(), first);
  // A CUTLASS header the program does not include: a hit.
  const std::string unused = inc + "/cutlass/gemm/device/gemm.h";
  if (access(unused.c_str(), R_OK) == 0) {
    write_file(unused, kjit::test::read_file_or_die(unused) + "\n// edited\n");
    Binary again;
    s.compile(src, o, &again);
    EXPECT_NE(again.tier(), KJIT_TIER_COMPILED);
    EXPECT_EQ(again.key(), first);
  }
  // One it includes: a miss.
  const std::string used = inc + "/cute/layout.hpp";
  write_file(used, kjit::test::read_file_or_die(used) + "\n// edited\n");
  Binary edited;
  s.compile(src, o, &edited);
  ASSERT_EQ(edited.status, KJIT_OK) << edited.log();
  EXPECT_EQ(edited.tier(), KJIT_TIER_COMPILED);
  EXPECT_NE(edited.key(), first);
}

}  // namespace
