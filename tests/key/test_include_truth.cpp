// The cache key against ground truth: for a generator of include forms, the files NVRTC
// itself opens (an LD_PRELOAD interposer in a helper process that runs NVRTC alone, no
// kjit code) must all be covered by kjit's include scan; kjit's in-process audit must see
// the same opens; and editing a header (same size and modification time, or a new size),
// or creating one where NVRTC looks first, must give a miss and the new code — exactly the
// code an uncached compile gives.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "compile/compiler.h"
#include "key/file_audit.h"
#include "key/include_scan.h"
#include "key/key.h"
#include "key/toolchain.h"
#include "nvrtc/nvrtc_program.h"
#include "support/test_support.h"
#include "util/fs.h"
#include "util/utf8.h"

// The form table below leaves trailing fields at their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace {

using kjit::CompileOptions;
using kjit::Outcome;

void write(const std::string& path, const std::string& text) {
  kjit::make_directories(kjit::dirname_of(path), 0755);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rewrites a file with new bytes of the same size and puts its modification time back:
// only the contents (and the change time, which no one can set) differ.
void rewrite_same_stamp(const std::string& path, const std::string& text) {
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  ASSERT_EQ(static_cast<size_t>(st.st_size), text.size()) << path;
  write(path, text);
  const timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

std::vector<std::string> kjit_test_list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != ".." && kjit::is_regular_file(dir + "/" + n)) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
  return s;
}

// One include form: files under the case directory (the kernel is k.cu), options with
// {dir} for the case directory, and the file that defines V (the value the kernel stores).
struct Form {
  std::string name;
  std::map<std::string, std::string> files;  // relative path -> text; {V} is the value
  std::vector<std::string> options;
  std::vector<std::pair<std::string, std::string>> headers;  // in-memory
  std::string edit;    // relative path of the file that defines V
  std::string create;  // if set: instead of editing, create this file (defining V)
  std::map<std::string, std::string> links;  // symlink (relative) -> target (relative)
};

const char* const kKernel = "__global__ void k(int* p) { *p = V; }\n";

std::vector<Form> forms() {
  const std::string v = "#define V {V}\n";
  std::vector<Form> f;
  f.push_back({"quoted",
               {{"k.cu", std::string("#include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"angled_I",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"inc/h.h", v}},
               {"-I{dir}/inc"},
               {},
               "inc/h.h"});
  f.push_back({"continuation_after_include",
               {{"k.cu", std::string("#include \\\n\"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"continuation_after_hash",
               {{"k.cu", std::string("#\\\ninclude \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"comment_in_directive",
               {{"k.cu", std::string("#/**/include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"comment_before_hash",
               {{"k.cu", std::string("/* c */ #include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"multiline_comment_before_hash",
               {{"k.cu", std::string("/* one\ntwo */ #include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"digraph",
               {{"k.cu", std::string("%:include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  // No '#' and no "%:" in the text as written: the directive exists only after splicing.
  f.push_back({"digraph_split_by_continuation",
               {{"k.cu", std::string("%\\\n:include \"h.h\"\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"string_with_comment_opener",
               {{"k.cu", std::string("__device__ const char* s = \"/*\";\n#include \"h.h\"\n"
                                     "__device__ const char* t = \"*/\";\n") +
                             kKernel},
                {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back(
      {"digit_separator_then_comment",
       {{"k.cu", std::string("__device__ int x = 1'000; /* a\n*/ #include \"h.h\"\n") + kKernel},
        {"h.h", v}},
       {},
       {},
       "h.h"});
  f.push_back({"raw_string_with_comment_opener",
               {{"k.cu", std::string("__device__ const char* r = R\"x(/*)x\";\n#include \"h.h\"\n"
                                     "__device__ const char* t = \"*/\";\n") +
                             kKernel},
                {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"computed_macro_beside_source",
               {{"k.cu", std::string("#define H \"h.h\"\n#include H\n") + kKernel}, {"h.h", v}},
               {},
               {},
               "h.h"});
  f.push_back({"computed_macro_chain_angled",
               {{"k.cu", std::string("#define H2 <h.h>\n#define H H2\n#include H\n") + kKernel},
                {"inc/h.h", v}},
               {"-I{dir}/inc"},
               {},
               "inc/h.h"});
  f.push_back({"computed_macro_from_D",
               {{"k.cu", std::string("#include HEADER\n") + kKernel}, {"h.h", v}},
               {"-DHEADER=\"h.h\""},
               {},
               "h.h"});
  f.push_back({"computed_stringized_listed",
               {{"k.cu", std::string("#define STR(x) #x\n#include STR(sub/h.h)\n") + kKernel},
                {"sub/h.h", v}},
               {},
               {},
               "sub/h.h"});
  f.push_back({"nested_relative",
               {{"k.cu", std::string("#include \"sub/a.h\"\n") + kKernel},
                {"sub/a.h", "#include \"b.h\"\n#include \"../c.h\"\n"},
                {"sub/b.h", "#define B 1\n"},
                {"c.h", v}},
               {},
               {},
               "c.h"});
  f.push_back({"include_next",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel},
                {"a/h.h", "#include_next <h.h>\n"},
                {"b/h.h", v}},
               {"-I{dir}/a", "-I{dir}/b"},
               {},
               "b/h.h"});
  f.push_back(
      {"has_include",
       {{"k.cu",
         std::string("#if __has_include(\"h.h\")\n#include \"h.h\"\n#else\n#define V 7\n#endif\n") +
             kKernel},
        {"h.h", v}},
       {},
       {},
       "h.h"});
  f.push_back({"pragma_once_twice",
               {{"k.cu", std::string("#include \"h.h\"\n#include \"h.h\"\n") + kKernel},
                {"h.h", "#pragma once\n" + v}},
               {},
               {},
               "h.h"});
  f.push_back({"include_guard",
               {{"k.cu", std::string("#include \"h.h\"\n#include \"h.h\"\n") + kKernel},
                {"h.h", "#ifndef H_\n#define H_\n" + v + "#endif\n"}},
               {},
               {},
               "h.h"});
  f.push_back({"symlinked_header",
               {{"k.cu", std::string("#include \"h.h\"\n") + kKernel}, {"real/h.h", v}},
               {},
               {},
               "real/h.h",
               "",
               {{"h.h", "real/h.h"}}});
  f.push_back({"symlinked_include_dir",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"real/h.h", v}},
               {"-I{dir}/link"},
               {},
               "real/h.h",
               "",
               {{"link", "real"}}});
  f.push_back({"two_include_paths_one_file",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"inc/h.h", v}},
               {"-I{dir}/inc", "-I{dir}/inc/../inc"},
               {},
               "inc/h.h"});
  f.push_back({"memory_header_shadows_file",
               {{"k.cu", std::string("#include \"h.h\"\n#include \"g.h\"\n") + kKernel},
                {"h.h", v},
                {"g.h", "#define G 1\n"}},
               {},
               {{"g.h", "#define G 2\n"}},
               "h.h"});
  f.push_back({"include_path_two_arguments",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"inc/h.h", v}},
               {"--include-path", "{dir}/inc"},
               {},
               "inc/h.h"});
  f.push_back({"I_two_arguments",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"inc/h.h", v}},
               {"-I", "{dir}/inc"},
               {},
               "inc/h.h"});
  f.push_back({"I_equals",
               {{"k.cu", std::string("#include <h.h>\n") + kKernel}, {"inc/h.h", v}},
               {"-I={dir}/inc"},
               {},
               "inc/h.h"});
  f.push_back({"pre_include_two_arguments",
               {{"k.cu", kKernel}, {"inc/h.h", v}},
               {"-I{dir}/inc", "--pre-include", "h.h"},
               {},
               "inc/h.h"});
  f.push_back({"pre_include_equals",
               {{"k.cu", kKernel}, {"inc/h.h", v}},
               {"-include={dir}/inc/h.h"},
               {},
               "inc/h.h"});
  f.push_back({"header_created_earlier_in_search",
               {{"k.cu", std::string("#include \"h.h\"\n") + kKernel}, {"inc/h.h", v}},
               {"-I{dir}/inc"},
               {},
               "inc/h.h",
               "h.h"});
  return f;
}

enum class Naming { Absolute, Bare, Default };
const char* naming_name(Naming n) {
  return n == Naming::Absolute ? "absolute" : n == Naming::Bare ? "bare" : "default";
}

struct CaseSetup {
  std::string dir, cwd, source;
  CompileOptions opts;
};

// Writes the form's files with value `value` into a fresh directory.
CaseSetup make_case(const Form& f, Naming naming, const std::string& root,
                    const std::string& value) {
  CaseSetup s;
  s.dir = root + "/" + f.name + "-" + naming_name(naming);
  kjit::make_directories(s.dir, 0755);
  for (const auto& [path, text] : f.files)
    write(s.dir + "/" + path, replace_all(text, "{V}", value));
  for (const auto& [link, target] : f.links) {
    EXPECT_EQ(symlink((s.dir + "/" + target).c_str(), (s.dir + "/" + link).c_str()), 0);
  }
  s.source = slurp(s.dir + "/k.cu");
  s.opts.target = "sm_90";
  s.opts.outputs = 1;  // PTX
  for (const std::string& o : f.options) s.opts.raw.push_back(replace_all(o, "{dir}", s.dir));
  for (const auto& [name, text] : f.headers) s.opts.add_header(name, text);
  switch (naming) {
    case Naming::Absolute:
      s.opts.name = s.dir + "/k.cu";
      s.cwd = root + "/elsewhere";
      kjit::make_directories(s.cwd, 0755);
      break;
    case Naming::Bare:
      s.opts.name = "k.cu";
      s.cwd = s.dir;
      break;
    case Naming::Default:
      s.cwd = s.dir;  // the default name, kernel.cu, is not a file
      break;
  }
  return s;
}

using kjit::test::Cwd;

struct Event {
  std::string kind;
  bool ok;
  std::string path;
};

// Runs NVRTC alone in a helper process with the open spy preloaded.
std::vector<Event> nvrtc_truth(const CaseSetup& s, const std::string& scratch,
                               bool must_compile = true) {
  std::vector<std::string> args{KJIT_NVRTC_OPEN_LOG, s.dir + "/k.cu", s.opts.name};
  int n = 0;
  for (const auto& [name, text] : s.opts.headers) {
    const std::string file = scratch + "/memory-header-" + std::to_string(n++);
    write(file, text);
    args.push_back(name);
    args.push_back(file);
  }
  args.push_back("--");
  args.push_back("-arch=sm_90");
  for (const std::string& o : s.opts.raw) args.push_back(o);
  const std::string log = scratch + "/opens.log";
  std::remove(log.c_str());
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(s.cwd.c_str()) != 0) _exit(3);
    setenv("LD_PRELOAD", KJIT_OPEN_SPY, 1);
    setenv("KJIT_OPEN_SPY_LOG", log.c_str(), 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) &&
              (WEXITSTATUS(status) == 0 || (!must_compile && WEXITSTATUS(status) == 1)))
      << "NVRTC helper status " << status;
  std::vector<Event> out;
  std::istringstream in(slurp(log));
  std::string kind;
  int ok;
  while (in >> kind >> ok) {
    std::string path;
    std::getline(in, path);
    out.push_back({kind, ok != 0, path.substr(1)});
  }
  EXPECT_FALSE(out.empty()) << "the spy logged nothing: is it preloaded?";
  return out;
}

// Events that say something about source files: not NVRTC's look at the program's own name
// (it compiles the text it was given), its internal pseudo-files, directories, or the toolkit.
bool relevant(const Event& e, const CaseSetup& s, size_t index, const std::string& toolkit) {
  const std::string path = kjit::resolve_path(e.path);
  const bool program = path == kjit::resolve_path(kjit::join_path(s.cwd, s.opts.name));
  if (program && (index == 0 || e.kind != "open")) return false;
  if (e.path.substr(e.path.find_last_of('/') + 1).rfind("__nv_", 0) == 0 && e.kind != "open") {
    return false;
  }
  // NVRTC gives in-memory headers names in the working directory and stats them there
  // (without opening: the file's bytes are never used, as the shadowing form shows).
  for (const auto& [name, text] : s.opts.headers) {
    if (e.kind != "open" && path == kjit::resolve_path(kjit::join_path(s.cwd, name))) return false;
  }
  if (e.kind == "stat-dir" || e.kind == "opendir" || e.kind == "create") return false;
  if (!toolkit.empty() && path.rfind(toolkit + "/", 0) == 0) return false;
  return true;
}

// Through the worker, the scan and the key are the parent's (the in-process tests cover every
// form with every naming); what the worker adds is its own audit and its report of what
// NVRTC read. So each form runs there with one naming, in turn, and the PCH cases with every
// other form: every form, every naming and the worker's PCH path, in a third of the time.
// KJIT_SOAK_TESTS=1 runs the whole matrix in both modes.
bool whole_matrix(kjit::CompileMode mode) {
  return mode == kjit::CompileMode::InProcess || std::getenv("KJIT_SOAK_TESTS") != nullptr;
}

class IncludeTruth : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = kjit::resolve_path(tmp_.path());
    setenv("KJIT_WORKER", KJIT_TEST_WORKER, 0);  // a bundle on a GPU host names its own
    setenv("KJIT_WORKER_IDLE_S", "20", 1);
  }
  // The edit cases (below), with the cached compiler in `mode`.
  void edits_are_never_stale(kjit::CompileMode mode);
  void edits_are_never_stale_with_pch(kjit::CompileMode mode);
  kjit::test::TempDir tmp_;
  std::string root_;
};

// Every file NVRTC opens or looks for is covered by kjit's scan, for every form and naming.
TEST_F(IncludeTruth, ScanCoversEveryFileNvrtcOpens) {
  const std::string toolkit = kjit::resolve_path(kjit::toolkit_root());
  size_t cases = 0, events = 0;
  for (const Form& f : forms()) {
    for (Naming naming : {Naming::Absolute, Naming::Bare, Naming::Default}) {
      SCOPED_TRACE(f.name + " / " + naming_name(naming));
      const CaseSetup s = make_case(f, naming, root_, "111");
      const std::vector<Event> truth = nvrtc_truth(s, root_);
      Cwd cwd(s.cwd);
      const kjit::IncludeScan scan = kjit::scan_for(
          s.source, s.opts, kjit::normalise(s.opts, kjit::machine_facts(s.opts, true)));
      for (size_t i = 0; i < truth.size(); ++i) {
        const Event& e = truth[i];
        if (!relevant(e, s, i, toolkit)) continue;
        ++events;
        EXPECT_TRUE(kjit::scan_covers(scan, kjit::resolve_path(e.path), e.ok))
            << "NVRTC " << e.kind << (e.ok ? " found " : " missed ") << e.path
            << ", which the key does not cover";
      }
      ++cases;
    }
  }
  std::printf("[ truth    ] %zu cases, %zu NVRTC file events, all covered by the key\n", cases,
              events);
}

// kjit's in-process audit of NVRTC's opens sees exactly what the interposer sees.
TEST_F(IncludeTruth, AuditSeesWhatNvrtcOpens) {
  ASSERT_TRUE(kjit::FileAudit::available()) << "libnvrtc's imports could not be hooked";
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    const CaseSetup s = make_case(f, Naming::Bare, root_, "111");
    std::multiset<std::string> truth_opens, audit_opens;
    for (const Event& e : nvrtc_truth(s, root_)) {
      if (e.kind == "open" || e.kind == "create" || e.kind == "opendir") {
        truth_opens.insert(kjit::resolve_path(e.path));
      }
    }
    Cwd cwd(s.cwd);
    const kjit::NormalisedOptions norm = kjit::normalise(s.opts, kjit::machine_facts(s.opts, true));
    kjit::FileAudit audit;
    const Outcome o = kjit::run_nvrtc(s.source, s.opts, norm, "key", "toolchain", nullptr);
    EXPECT_EQ(o.status, KJIT_OK) << o.message;
    EXPECT_TRUE(audit.whole());
    for (const kjit::OpenedFile& e : audit.opened()) audit_opens.insert(kjit::resolve_path(e.path));
    EXPECT_EQ(audit_opens, truth_opens);
  }
}

// Editing the header (same size and modification time, then a new size), or creating one
// earlier in the search, is a miss that gives exactly the uncached compiler's code; an
// unchanged tree hits.
void IncludeTruth::edits_are_never_stale(kjit::CompileMode mode) {
  kjit::CacheConfig config;
  config.directory = root_ + "/cache";
  kjit::Cache cache(config);
  kjit::Compiler compiler(&cache, 1);
  compiler.set_mode(mode);
  kjit::Compiler uncached(nullptr, 1);
  uncached.set_mode(kjit::CompileMode::InProcess);
  size_t cases = 0, k = 0, form_index = 0;
  for (const Form& f : forms()) {
    const size_t this_form = form_index++;
    for (Naming naming : {Naming::Absolute, Naming::Bare, Naming::Default}) {
      if (!whole_matrix(mode) && static_cast<size_t>(naming) != this_form % 3) continue;
      SCOPED_TRACE(f.name + " / " + naming_name(naming));
      // Values of this case alone: a program named relative to its directory, with the same
      // source and header bytes as another case's, has the same key and may hit its entry
      // (the same code), which would hide whether an edit is seen.
      ++k;
      const std::string v1 = std::to_string(7100000 + k), v2 = std::to_string(7200000 + k),
                        v3 = std::to_string(73000000 + k);
      const CaseSetup s = make_case(f, naming, root_, v1);
      Cwd cwd(s.cwd);
      // The uncached compiler's code; an expected hit follows a check of the same tree,
      // whose code it must equal.
      std::string truth_ptx;
      auto check = [&](const std::string& value, bool expect_hit) {
        const Outcome o = compiler.compile(s.source, s.opts);
        ASSERT_EQ(o.status, KJIT_OK) << o.message;
        if (!expect_hit) {
          const Outcome truth = uncached.compile(s.source, s.opts);
          ASSERT_EQ(truth.status, KJIT_OK) << truth.message;
          truth_ptx = truth.entry->ptx;
        }
        EXPECT_EQ(o.entry->ptx, truth_ptx) << "stale code after an edit";
        EXPECT_NE(o.entry->ptx.find(value), std::string::npos) << "expected V = " << value;
        EXPECT_EQ(o.tier != KJIT_TIER_COMPILED, expect_hit) << "tier " << o.tier;
      };
      check(v1, false);
      check(v1, true);  // stored: the key covers what NVRTC read
      if (!f.create.empty()) {
        write(s.dir + "/" + f.create, "#define V " + v2 + "\n");
        check(v2, false);
        continue;
      }
      const std::string edited = s.dir + "/" + f.edit;
      rewrite_same_stamp(edited, replace_all(slurp(edited), v1, v2));
      check(v2, false);
      check(v2, true);
      write(edited, replace_all(slurp(edited), v2, v3));
      check(v3, false);
      ++cases;
    }
  }
  const kjit::CacheStats st = cache.stats();
  EXPECT_EQ(st.not_stored, 0u) << "some forms were not cached";
  std::printf("[ truth    ] %zu edit cases: every edit a miss with the new code\n", cases);
}

TEST_F(IncludeTruth, EditedHeaderIsNeverAStaleHit) {
  edits_are_never_stale(kjit::CompileMode::InProcess);
}

TEST_F(IncludeTruth, EditedHeaderIsNeverAStaleHitThroughTheWorker) {
  edits_are_never_stale(kjit::CompileMode::Worker);
}

// The same edits with precompiled headers in play: each program first reaches the toolkit,
// so kjit compiles it with a PCH made from the form's files, which the next program that
// starts the same way reuses. After an edit (same size and modification time, then a new
// size) or a header created earlier in the search, every result is the code of the uncached
// compiler without PCH, in this process.
void IncludeTruth::edits_are_never_stale_with_pch(kjit::CompileMode mode) {
  kjit::CacheConfig config;
  config.directory = root_ + "/cache-pch";
  kjit::Cache cache(config);
  kjit::Compiler compiler(&cache, 1);
  compiler.set_mode(mode);
  kjit::Compiler uncached(nullptr, 1);
  uncached.set_mode(kjit::CompileMode::InProcess);
  std::vector<std::pair<Form, CaseSetup>> cases;
  size_t form_index = 0;
  for (Form f : forms()) {
    if (!whole_matrix(mode) && form_index++ % 2 != 0) continue;
    f.name += "-pch";
    f.files["k.cu"] = "#include <cuda/std/cstdint>\n" + f.files["k.cu"];
    CaseSetup s = make_case(f, Naming::Bare, root_, "111");
    cases.emplace_back(std::move(f), std::move(s));
  }
  // PCHs are reused only when made from files older than the racy window (pch.h).
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  for (const auto& [f, s] : cases) {
    SCOPED_TRACE(f.name);
    Cwd cwd(s.cwd);
    int variant = 0;
    auto check = [&](const char* value) {
      // A program that starts the same way but is another program (another key).
      const std::string source = s.source + "// variant " + std::to_string(variant++) + "\n";
      const Outcome o = compiler.compile(source, s.opts);
      ASSERT_EQ(o.status, KJIT_OK) << o.message;
      CompileOptions plain = s.opts;
      plain.pch = false;
      const Outcome truth = uncached.compile(source, plain);
      ASSERT_EQ(truth.status, KJIT_OK) << truth.message;
      EXPECT_NE(truth.entry->ptx.find(value), std::string::npos) << "expected V = " << value;
      EXPECT_EQ(o.entry->ptx, truth.entry->ptx) << "old code from a precompiled header";
    };
    check("111");
    check("111");
    if (!f.create.empty()) {
      write(s.dir + "/" + f.create, "#define V 222\n");
      check("222");
      continue;
    }
    const std::string edited = s.dir + "/" + f.edit;
    rewrite_same_stamp(edited, replace_all(slurp(edited), "111", "222"));
    check("222");
    check("222");
    write(edited, replace_all(slurp(edited), "222", "33333"));
    check("33333");
  }
  const kjit::CacheStats st = cache.stats();
  EXPECT_GT(st.pch_used, 0u) << "no PCH was reused: the test tests nothing";
  std::printf("[ truth    ] %zu edit cases with PCH: %llu PCHs made, %llu used\n", cases.size(),
              static_cast<unsigned long long>(st.pch_created),
              static_cast<unsigned long long>(st.pch_used));
}

TEST_F(IncludeTruth, EditedHeaderIsNeverStaleWithPch) {
  edits_are_never_stale_with_pch(kjit::CompileMode::InProcess);
}

// The same through the compile worker, which keeps the PCHs and reports their inputs back.
TEST_F(IncludeTruth, EditedHeaderIsNeverStaleWithPchThroughTheWorker) {
  edits_are_never_stale_with_pch(kjit::CompileMode::Worker);
}

// A file NVRTC reads that the scan cannot foresee (a stringized include that leaves the
// searched directories) is in the compile's record like any other: the result is stored,
// and an edit of the file (same size and stamp) is a miss with the new code.
TEST_F(IncludeTruth, ReadTheScanCannotForeseeIsInTheRecord) {
  kjit::CacheConfig config;
  config.directory = root_ + "/cache";
  kjit::Cache cache(config);
  kjit::Compiler compiler(&cache, 1);
  write(root_ + "/other/h.h", "#define V 111\n");
  const std::string source =
      std::string("#define STR(x) #x\n#include STR(../other/h.h)\n") + kKernel;
  write(root_ + "/src/k.cu", source);
  Cwd cwd(root_ + "/src");
  CompileOptions opts;
  opts.target = "sm_90";
  opts.outputs = 1;
  opts.name = "k.cu";
  Outcome o = compiler.compile(source, opts);
  ASSERT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_NE(o.entry->ptx.find("111"), std::string::npos);
  rewrite_same_stamp(root_ + "/other/h.h", "#define V 222\n");
  o = compiler.compile(source, opts);
  ASSERT_EQ(o.status, KJIT_OK) << o.message;
  EXPECT_EQ(o.tier, KJIT_TIER_COMPILED);
  EXPECT_NE(o.entry->ptx.find("222"), std::string::npos) << "stale code";
  const kjit::CacheStats st = cache.stats();
  EXPECT_EQ(st.not_stored, 0u);
  EXPECT_EQ(st.stores, 2u);
  o = compiler.compile(source, opts);
  EXPECT_NE(o.tier, KJIT_TIER_COMPILED);
  EXPECT_NE(o.entry->ptx.find("222"), std::string::npos);
}

// Without an audit, a program that includes files is never stored; one that includes
// nothing still is. (The audit is switched off in this process, so NVRTC runs here.)
TEST_F(IncludeTruth, NoAuditMeansNoStoreForIncludes) {
  kjit::CacheConfig config;
  config.directory = root_ + "/cache";
  kjit::Cache cache(config);
  kjit::Compiler compiler(&cache, 1);
  compiler.set_mode(kjit::CompileMode::InProcess);
  write(root_ + "/src/h.h", "#define V 111\n");
  Cwd cwd(root_ + "/src");
  CompileOptions opts;
  opts.target = "sm_90";
  opts.outputs = 1;
  opts.name = "k.cu";
  kjit::FileAudit::disable_for_testing(true);
  const Outcome with = compiler.compile(std::string("#include \"h.h\"\n") + kKernel, opts);
  const Outcome without = compiler.compile("#define V 5\n" + std::string(kKernel), opts);
  kjit::FileAudit::disable_for_testing(false);
  ASSERT_EQ(with.status, KJIT_OK) << with.message;
  ASSERT_EQ(without.status, KJIT_OK) << without.message;
  const kjit::CacheStats st = cache.stats();
  EXPECT_EQ(st.not_stored, 1u);
  EXPECT_EQ(st.stores, 1u);
}

// The fuzz corpora's sources (include scanner and compiler) as programs beside a fixture
// of headers that include each other, one through a macro: NVRTC's opens stay covered
// whether the program compiles or not.
TEST_F(IncludeTruth, FuzzCorpusStaysCovered) {
  const std::string toolkit = kjit::resolve_path(kjit::toolkit_root());
  size_t inputs = 0, events = 0;
  for (const char* corpus : {"include_scan", "compile"}) {
    const std::string dir = std::string(KJIT_SOURCE_DIR) + "/fuzz/corpus/" + corpus;
    for (const std::string& name : kjit_test_list_dir(dir)) {
      SCOPED_TRACE(std::string(corpus) + "/" + name);
      Form f;
      f.name = std::string(corpus) + "-" + name;
      f.files = {{"k.cu", slurp(dir + "/" + name)},
                 {"a.h", "#pragma once\n#include \"b.h\"\n#define A 1\n"},
                 {"b.h", "#pragma once\n#include <c.h>\n#define B 2\n"},
                 {"c.h", "#pragma once\n#define HDR \"a.h\"\n#include HDR\n"}};
      f.options = {"-I{dir}"};
      if (kjit::utf8_error(f.files["k.cu"]) != std::string::npos) continue;  // kjit refuses it
      const CaseSetup s = make_case(f, Naming::Bare, root_, "111");
      const std::vector<Event> truth = nvrtc_truth(s, root_, false);
      Cwd cwd(s.cwd);
      const kjit::IncludeScan scan = kjit::scan_for(
          s.source, s.opts, kjit::normalise(s.opts, kjit::machine_facts(s.opts, true)));
      for (size_t i = 0; i < truth.size(); ++i) {
        if (!relevant(truth[i], s, i, toolkit)) continue;
        ++events;
        EXPECT_TRUE(kjit::scan_covers(scan, kjit::resolve_path(truth[i].path), truth[i].ok))
            << "NVRTC " << truth[i].kind << " " << truth[i].path;
      }
      ++inputs;
    }
  }
  EXPECT_GE(inputs, 8u);
  std::printf("[ truth    ] %zu corpus inputs, %zu NVRTC file events, all covered\n", inputs,
              events);
}

}  // namespace
