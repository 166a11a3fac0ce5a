// The built-in standard headers (src/key/builtin_std.h): every header compiles alone
// and all together; programs written for nvcc that use <limits>, <type_traits>, <tuple>,
// <algorithm>, <complex>, <cmath>, printf and assert compile unchanged (and, on a GPU,
// compute what the CPU computes); a user's own header of the same name wins and is in the
// key; "--no-builtin-std" turns them off; a program that uses them hits from a fresh cache
// handle (its compile was covered by the audit and stored).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/context.h"
#include "cuda/driver.h"
#include "key/builtin_std.h"
#include "key/include_scan.h"
#include "kjit/kjit.h"
#include "support/cuda_checks.h"
#include "support/test_support.h"

namespace {

std::string last_error() {
  return kjit_last_error();
}

struct Options {
  kjit_options* o = nullptr;
  Options(const char* target, const char* std) {
    EXPECT_EQ(kjit_options_create(&o), KJIT_OK);
    EXPECT_EQ(kjit_options_set_target(o, target), KJIT_OK);
    EXPECT_EQ(kjit_options_set_outputs(o, KJIT_OUTPUT_PTX), KJIT_OK);
    if (std) {
      EXPECT_EQ(kjit_options_add(o, std), KJIT_OK);
    }
  }
  ~Options() { kjit_options_destroy(o); }
};

struct Compiler {
  kjit_cache* cache = nullptr;
  kjit_compiler* c = nullptr;
  explicit Compiler(const std::string& dir = "") {
    if (!dir.empty()) {
      kjit_cache_options co = KJIT_CACHE_OPTIONS_INIT;
      co.directory = dir.c_str();
      EXPECT_EQ(kjit_cache_open(&co, &cache), KJIT_OK) << last_error();
    }
    EXPECT_EQ(kjit_compiler_create(cache, 2, &c), KJIT_OK) << last_error();
  }
  ~Compiler() {
    kjit_compiler_destroy(c);
    if (cache) kjit_cache_close(cache);
  }
};

struct Binary {
  kjit_binary* b = nullptr;
  ~Binary() { kjit_binary_destroy(b); }
  std::string log() const { return b ? kjit_binary_log(b) : ""; }
  std::string key() const { return b ? kjit_binary_key(b) : ""; }
  int tier() const { return b ? kjit_binary_tier(b) : -1; }
};

// Compiles `source`; returns the status, the binary in *out.
kjit_status compile(Compiler& c, const std::string& source, const Options& o, Binary* out) {
  return kjit_compile(c.c, source.c_str(), o.o, &out->b);
}

std::string all_headers_program() {
  std::string src;
  for (const kjit::BuiltinHeader& h : kjit::builtin_std_texts()) {
    src += std::string("#include <") + h.name + ">\n";
  }
  return src + "extern \"C\" __global__ void k() {}\n";
}

// What the issue asks for, at least.
TEST(BuiltinStd, TheSetCoversTheStandardHeadersDeviceCodeIncludes) {
  std::istringstream names(
      "assert.h cassert float.h cfloat limits.h climits math.h cmath stddef.h cstddef stdint.h "
      "cstdint stdio.h cstdio stdlib.h cstdlib string.h cstring stdarg.h cstdarg time.h ctime "
      "algorithm array complex initializer_list iostream istream iterator limits mutex ostream "
      "sstream exception stdexcept string tuple utility type_traits vector memory.h functional "
      "map stack iomanip typeinfo memory new sys/time.h numeric cxxabi.h");
  size_t count = 0;
  for (std::string name; names >> name; ++count) {
    EXPECT_NE(kjit::builtin_std_header(name), nullptr) << name;
  }
  EXPECT_EQ(count, 51u);
  EXPECT_EQ(kjit::builtin_std_header("cuda/std/cstdint"), nullptr);
  EXPECT_EQ(kjit::builtin_std_header("no_such_header"), nullptr);
  EXPECT_FALSE(kjit::builtin_std_version().empty());
}

// What NVRTC declares in namespace std itself: std::move, std::forward (and
// std::initializer_list). Every built-in header must leave them usable (a header that
// brought libcu++'s move beside NVRTC's made every call ambiguous).
const char* const kUsesNvrtcStd = R"(
struct Big { int v[4]; };
template <class T> __device__ T pass(T&& t) { return std::forward<T>(t); }
extern "C" __global__ void k(int* out) {
  Big b{{out[0], 1, 2, 3}};
  Big moved = std::move(b);
  out[1] = pass(std::move(moved)).v[0];
  std::initializer_list<int> il = {1, 2, 3};
  out[2] = int(il.size());
}
)";

// Each header alone, under C++17 and C++20, for sm_80 and sm_90, with what NVRTC declares
// in std used after it (on every core; no PCH: each program starts differently, so one
// would be made for each and never used).
TEST(BuiltinStd, EveryHeaderCompilesAlone) {
  Compiler c;
  struct Case {
    const char* target;
    const char* std;
    const char* header;
  };
  // Each header under both targets and both standards, in two of the four pairs (a Latin
  // square: every pair is still taken by half of the headers), in half the time of all four.
  std::vector<Case> cases;
  size_t nth = 0;
  for (const kjit::BuiltinHeader& h : kjit::builtin_std_texts()) {
    const bool odd = (nth++ % 2) != 0;
    cases.push_back({"sm_80", odd ? "-std=c++20" : "-std=c++17", h.name});
    cases.push_back({"sm_90", odd ? "-std=c++17" : "-std=c++20", h.name});
  }
  std::vector<std::string> failures(cases.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t) {
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < cases.size();) {
        const Case& k = cases[i];
        Options o(k.target, k.std);
        EXPECT_EQ(kjit_options_set_pch(o.o, 0), KJIT_OK);
        const std::string src = std::string("#include <") + k.header + ">\n" + kUsesNvrtcStd;
        Binary b;
        if (compile(c, src, o, &b) != KJIT_OK) {
          failures[i] = std::string(k.header) + " " + k.target + " " + k.std + ": " + last_error() +
                        "\n" + b.log();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_TRUE(f.empty()) << f;
}

TEST(BuiltinStd, AllHeadersCompileTogether) {
  Compiler c;
  for (const char* target : {"sm_80", "sm_90"}) {
    for (const char* std : {"-std=c++17", "-std=c++20"}) {
      Options o(target, std);
      Binary b;
      EXPECT_EQ(compile(c, all_headers_program(), o, &b), KJIT_OK)
          << target << " " << std << ": " << last_error() << "\n"
          << b.log();
    }
  }
}

// A kernel written for nvcc, using the headers' facilities: out[] gets values the CPU
// computes too (kExpected below); `fail` makes it assert.
const char* const kUseSource = R"(
#include <algorithm>
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

struct Meters { double v; };
namespace std {
template <>
class numeric_limits<Meters> {
 public:
  static constexpr bool is_specialized = true;
  __host__ __device__ static constexpr Meters max() noexcept { return Meters{42.0}; }
};
}  // namespace std

template <class T>
__device__ void limits_of(double* out) {
  out[0] = double(std::numeric_limits<T>::max());
  out[1] = double(std::numeric_limits<T>::lowest());
  out[2] = double(std::numeric_limits<T>::epsilon());
}

template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
__device__ int kind(T) { return 1; }
template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
__device__ int kind(T) { return 2; }

static_assert(std::is_same_v<std::int64_t, long long>, "int64_t");
static_assert(std::is_same_v<std::uint8_t, unsigned char>, "uint8_t");
static_assert(sizeof(std::size_t) == 8 && sizeof(std::ptrdiff_t) == 8, "size_t");
static_assert(sizeof(size_t) == 8 && sizeof(ptrdiff_t) == 8 && sizeof(int64_t) == 8, "::");
static_assert(std::is_same_v<std::tuple_element_t<1, std::tuple<int, float>>, float>, "tuple");
static_assert(std::tuple_size_v<std::tuple<int, float, char>> == 3, "tuple_size");
static_assert(!std::is_same_v<int, unsigned>, "is_same_v");

extern "C" __global__ void use_std(double* out, int fail) {
  int i = 0;
  limits_of<bool>(out + i); i += 3;
  limits_of<char>(out + i); i += 3;
  limits_of<signed char>(out + i); i += 3;
  limits_of<unsigned char>(out + i); i += 3;
  limits_of<short>(out + i); i += 3;
  limits_of<unsigned short>(out + i); i += 3;
  limits_of<int>(out + i); i += 3;
  limits_of<unsigned>(out + i); i += 3;
  limits_of<long>(out + i); i += 3;
  limits_of<unsigned long>(out + i); i += 3;
  limits_of<long long>(out + i); i += 3;
  limits_of<unsigned long long>(out + i); i += 3;
  limits_of<float>(out + i); i += 3;
  limits_of<double>(out + i); i += 3;
  out[i++] = std::numeric_limits<Meters>::max().v;
  out[i++] = kind(3) * 10 + kind(2.5f);
  auto t = std::make_tuple(1, 2.5, 'c');
  std::tuple<int, double, char> u(std::get<0>(t) + 1, std::get<1>(t) * 2, 'd');
  out[i++] = std::get<0>(u) + std::get<1>(u) + std::get<2>(u);
  int a = 3, b = 7;
  std::swap(a, b);
  out[i++] = std::min(a, b) * 100 + std::max(a, b) * 10 + a;
  std::complex<float> z(1.0f, 2.0f), w(3.0f, -1.0f);
  std::complex<float> p = z * w + z / w;
  out[i++] = p.real();
  out[i++] = p.imag();
  out[i++] = std::abs(z);
  out[i++] = std::sqrt(2.0f);
  out[i++] = std::sqrt(2.0);
  out[i++] = std::fma(1.5f, 2.0f, 0.25f);
  out[i++] = std::fma(1.5, 2.0, 0.25);
  out[i++] = std::exp(1.0f);
  out[i++] = std::exp(1.0);
  out[i++] = INT_MAX;
  out[i++] = FLT_EPSILON;
  out[i++] = DBL_EPSILON;
  out[i++] = double(std::int64_t(1) << 40) + sizeof(std::int32_t);
  printf("kjit std printf %d %s\n", 42, "ok");
  assert(fail == 0);
  out[i] = i;
}
)";

template <class T>
void push_limits(std::vector<double>* v) {
  v->push_back(double(std::numeric_limits<T>::max()));
  v->push_back(double(std::numeric_limits<T>::lowest()));
  v->push_back(double(std::numeric_limits<T>::epsilon()));
}

// What use_std writes, computed here.
std::vector<double> expected_use_std() {
  std::vector<double> v;
  push_limits<bool>(&v);
  push_limits<char>(&v);
  push_limits<signed char>(&v);
  push_limits<unsigned char>(&v);
  push_limits<short>(&v);
  push_limits<unsigned short>(&v);
  push_limits<int>(&v);
  push_limits<unsigned>(&v);
  push_limits<long>(&v);
  push_limits<unsigned long>(&v);
  push_limits<long long>(&v);
  push_limits<unsigned long long>(&v);
  push_limits<float>(&v);
  push_limits<double>(&v);
  v.push_back(42.0);
  v.push_back(12.0);
  v.push_back(2 + 5.0 + 'd');
  v.push_back(3 * 100 + 7 * 10 + 7);
  const std::complex<float> z(1.0f, 2.0f), w(3.0f, -1.0f);
  const std::complex<float> p = z * w + z / w;
  v.push_back(p.real());
  v.push_back(p.imag());
  v.push_back(std::abs(z));
  v.push_back(std::sqrt(2.0f));
  v.push_back(std::sqrt(2.0));
  v.push_back(std::fma(1.5f, 2.0f, 0.25f));
  v.push_back(std::fma(1.5, 2.0, 0.25));
  v.push_back(std::exp(1.0f));
  v.push_back(std::exp(1.0));
  v.push_back(INT_MAX);
  v.push_back(FLT_EPSILON);
  v.push_back(DBL_EPSILON);
  v.push_back(double(int64_t(1) << 40) + 4);
  v.push_back(double(v.size()));
  return v;
}

// More of the headers: <cmath> for __half, std::printf, std::memcpy, std::array with
// structured bindings, <numeric>, <functional>, <iterator>, <memory>, placement new.
const char* const kMoreSource = R"(
#include <cuda_fp16.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <array>
#include <numeric>
#include <functional>
#include <iterator>
#include <memory>
#include <initializer_list>
#include <algorithm>
#include <cstdarg>
#include <ctime>
#include <new>
extern "C" __global__ void k(__half* h, float* f, int* n) {
  h[0] = std::sqrt(h[0]);
  h[1] = std::exp(h[1]);
  f[0] = std::isnan(f[0]) ? 1.f : std::abs(f[1]);
  n[0] = std::abs(n[1]);
  std::printf("%d\n", n[0]);
  std::memcpy(n + 2, n, sizeof(int));
  std::array<int, 3> a{3, 1, 2};
  n[3] = std::accumulate(a.begin(), a.end(), 0) + std::max({1, 5, 2});
  n[4] = std::plus<int>()(1, 2) + int(std::distance(a.begin(), a.end()));
  n[5] = *std::addressof(n[0]) + int(std::clock() & 1);
  int* p = new (n + 6) int(7);
  n[7] = *p + int(std::min_element(a.begin(), a.end()) - a.begin());
  auto [x, y, z] = a;
  n[8] = x + y + z;
}
)";

TEST(BuiltinStd, ProgramsWrittenForNvccCompile) {
  Compiler c;
  for (const char* std : {"-std=c++17", "-std=c++20"}) {
    Options o("sm_80", std);
    for (const char* src : {kUseSource, kMoreSource}) {
      Binary b;
      EXPECT_EQ(compile(c, src, o, &b), KJIT_OK) << std << ": " << last_error() << "\n" << b.log();
    }
  }
}

// The names of namespace std that the built-in headers bring in from libcu++ or the global
// namespace (their using-declarations, spelled out or through the texts' macros).
std::set<std::string> names_brought_into_std() {
  std::set<std::string> names;
  const std::regex using_decl(R"(using (?:cuda::std::|::)(\w+);)");
  const std::regex macro(R"(_KJIT_([UVTG])\((\w+)\))");
  for (const kjit::BuiltinHeader& h : kjit::builtin_std_texts()) {
    const std::string text(h.text);
    for (std::sregex_iterator it(text.begin(), text.end(), using_decl), end; it != end; ++it) {
      names.insert((*it)[1]);
    }
    for (std::sregex_iterator it(text.begin(), text.end(), macro), end; it != end; ++it) {
      const std::string kind = (*it)[1], name = (*it)[2];
      if (name.size() < 2) continue;  // the macros' own parameter
      names.insert(name);
      if (kind == "V") names.insert(name + "_v");
      if (kind == "T") names.insert(name + "_t");
    }
  }
  return names;
}

// Which of `names` NVRTC declares in namespace std by itself, in a program that includes
// nothing: "using std::NAME;" is an error ("has no member") for the others. NVRTC stops at
// 100 errors, so the names go in groups.
std::set<std::string> declared_by_nvrtc(Compiler& c, const std::set<std::string>& names,
                                        const char* std) {
  const std::vector<std::string> all(names.begin(), names.end());
  std::set<std::string> declared;
  for (size_t first = 0; first < all.size(); first += 80) {
    std::string src;
    std::set<std::string> group;
    for (size_t i = first; i < std::min(all.size(), first + 80); ++i) {
      src += "namespace probe" + std::to_string(i) + " { using std::" + all[i] + "; }\n";
      group.insert(all[i]);
    }
    Options o("sm_90", std);
    EXPECT_EQ(kjit_options_add(o.o, "--no-builtin-std"), KJIT_OK);
    Binary b;
    const kjit_status st = compile(c, src, o, &b);
    const std::string log = b.log();
    if (st != KJIT_OK && st != KJIT_ERROR_COMPILE) {
      ADD_FAILURE() << last_error();
      continue;
    }
    const std::regex missing("namespace \"std\" has no member \"(\\w+)\"");
    std::set<std::string> absent;
    for (std::sregex_iterator it(log.begin(), log.end(), missing), end; it != end; ++it) {
      absent.insert((*it)[1]);
    }
    EXPECT_EQ(log.find("Error limit reached"), std::string::npos) << log;
    for (const std::string& n : group) {
      if (!absent.count(n)) declared.insert(n);
    }
  }
  return declared;
}

// NVRTC 13 declares std::move and std::forward itself (--builtin-move-forward, on by
// default, which defines __NV_BUILTIN_MOVE_FORWARD). The built-in headers bring those two
// into std only when NVRTC's are off; every other name they bring in must be one NVRTC does
// not declare, or calls become ambiguous. This fails when an NVRTC declares more.
TEST(BuiltinStd, NvrtcDeclaresNoOtherNameTheBuiltinsBringIntoStd) {
  const std::set<std::string> names = names_brought_into_std();
  ASSERT_GT(names.size(), 300u);
  ASSERT_TRUE(names.count("move") && names.count("forward") && names.count("swap") &&
              names.count("void_t"));
  Compiler c;
  for (const char* std : {"-std=c++17", "-std=c++20"}) {
    const std::set<std::string> declared = declared_by_nvrtc(c, names, std);
    EXPECT_EQ(declared, (std::set<std::string>{"forward", "move"})) << std;
  }
}

// <utility> and <algorithm> with the names NVRTC also declares and the ones beside them:
// std::move of a value and of a range, std::forward, std::swap, std::exchange, std::max.
TEST(BuiltinStd, UtilityAndAlgorithmWithNamesNvrtcAlsoDeclares) {
  const char* src = R"(
#include <utility>
#include <algorithm>
#include <type_traits>
struct S { int a; float b; };
template <class T, class = void> struct has_a : std::false_type {};
template <class T> struct has_a<T, std::void_t<decltype(T::a)>> : std::true_type {};
static_assert(has_a<S>::value, "void_t");
template <class T> __device__ T relay(T&& t) { return std::forward<T>(t); }
extern "C" __global__ void k(int* out) {
  S s{out[0], 1.f};
  S t = std::move(s);
  S u = relay(t);
  int x = out[1], y = out[2];
  std::swap(x, y);
  out[3] = std::exchange(x, 7) + u.a + std::max(x, y) + std::min({3, 1, 2});
  int buf[4] = {1, 2, 3, 4};
  std::move(buf, buf + 4, out + 4);
  std::move_backward(buf, buf + 2, out + 10);
}
)";
  Compiler c;
  for (const char* std : {"-std=c++17", "-std=c++20"}) {
    Options o("sm_90", std);
    Binary b;
    EXPECT_EQ(compile(c, src, o, &b), KJIT_OK) << std << ": " << last_error() << "\n" << b.log();
  }
}

// The toolkit's cuda.h (for CUtensorMap, CUdeviceptr... in device code) includes <stdlib.h>
// and <stdint.h>; the include scan does not read the toolkit (its fingerprint covers it),
// so NVRTC's failure to open them brings the built-ins in. Pre-included or included, and a
// hit from a fresh handle afterwards (the retried compile was stored with its built-ins).
TEST(BuiltinStd, ToolkitCudaHGetsTheBuiltinsItIncludes) {
  kjit::test::TempDir cache;
  const std::string body =
      "extern \"C\" __global__ void k(int* p) { CUdeviceptr d = 0; *p = int(d) + "
      "int(sizeof(CUtensorMap)); }\n";
  struct Case {
    std::string source;
    const char* option;
  };
  for (const Case& k :
       {Case{body, "--pre-include=cuda.h"}, Case{"#include <cuda.h>\n" + body, nullptr}}) {
    std::string key;
    {
      Compiler c(cache.path());
      Options o("sm_90", "-std=c++17");
      EXPECT_EQ(kjit_options_add(o.o, "-default-device"), KJIT_OK);  // cuda.h's declarations
      if (k.option) {
        EXPECT_EQ(kjit_options_add(o.o, k.option), KJIT_OK);
      }
      Binary b;
      ASSERT_EQ(compile(c, k.source, o, &b), KJIT_OK) << last_error() << "\n" << b.log();
      EXPECT_EQ(b.tier(), KJIT_TIER_COMPILED);
      key = b.key();
    }
    Compiler c(cache.path());
    Options o("sm_90", "-std=c++17");
    EXPECT_EQ(kjit_options_add(o.o, "-default-device"), KJIT_OK);
    if (k.option) {
      EXPECT_EQ(kjit_options_add(o.o, k.option), KJIT_OK);
    }
    Binary hit;
    ASSERT_EQ(compile(c, k.source, o, &hit), KJIT_OK) << last_error();
    EXPECT_EQ(hit.tier(), KJIT_TIER_DISK);
    EXPECT_EQ(hit.key(), key);
  }
}

// Code written for jitify (which pre-includes its standard headers) uses std::void_t and
// std::max without including anything: CUTLASS's epilogues do. Pre-including the built-ins
// serves it, as jitify does; without them it does not compile.
TEST(BuiltinStd, PreIncludedBuiltinsServeCodeThatIncludesNothing) {
  const std::string src =
      "template <class T, class = void> struct has_args { static constexpr bool value = false; "
      "};\n"
      "template <class T> struct has_args<T, std::void_t<typename T::Arguments>> {\n"
      "  static constexpr bool value = true; };\n"
      "struct Op { struct Arguments {}; };\n"
      "static_assert(has_args<Op>::value, \"void_t\");\n"
      "extern \"C\" __global__ void k(int* p) { *p = std::max(p[1], p[2]); }\n";
  Compiler c;
  Options bare("sm_90", "-std=c++17");
  Binary without;
  EXPECT_EQ(compile(c, src, bare, &without), KJIT_ERROR_COMPILE);
  EXPECT_NE(without.log().find("has no member \"void_t\""), std::string::npos) << without.log();
  Options o("sm_90", "-std=c++17");
  EXPECT_EQ(kjit_options_add(o.o, "--pre-include=type_traits"), KJIT_OK);
  EXPECT_EQ(kjit_options_add(o.o, "--pre-include=algorithm"), KJIT_OK);
  Binary b;
  EXPECT_EQ(compile(c, src, o, &b), KJIT_OK) << last_error() << "\n" << b.log();
}

// The scan says which built-ins a program uses: the ones it includes (and they include)
// that no file or in-memory header of the caller's provides.
TEST(BuiltinStd, ScanNamesTheBuiltinsUsed) {
  kjit::test::TempDir dir;
  kjit::test::write_file(dir.file("cstdint"), "#define MINE 1\n");
  kjit::IncludeScanInput in;
  in.source = "#include <cmath>\n#include <tuple>\n#include \"vector\"\n";
  in.builtin_std = true;
  const kjit::IncludeScan all = kjit::scan_includes(in);
  for (const char* name : {"cmath", "tuple", "utility", "vector"}) {
    EXPECT_NE(std::find(all.builtins.begin(), all.builtins.end(), name), all.builtins.end())
        << name;
  }
  EXPECT_TRUE(std::is_sorted(all.builtins.begin(), all.builtins.end()));

  in.source = "#include <cstdint>\n#include <cstddef>\n#include <cstdio>\n";
  in.include_paths = {dir.path()};
  in.headers = {{"cstdio", "// mine\n"}};
  const kjit::IncludeScan mine = kjit::scan_includes(in);
  EXPECT_EQ(mine.builtins, std::vector<std::string>{"cstddef"});
  EXPECT_TRUE(mine.absent.count(kjit::resolve_path(dir.file("cstddef"))))
      << "a cstddef made there later must change the key";

  in.builtin_std = false;
  EXPECT_TRUE(kjit::scan_includes(in).builtins.empty());
}

// Also after the same program compiled with them in this process (a precompiled header
// made with the built-ins must not stand in for them).
TEST(BuiltinStd, NoBuiltinStdTurnsThemOff) {
  const std::string src =
      "#include <cstdint>\n#include <cmath>\n__global__ void k(int64_t* x) { *x = 1; }\n";
  Compiler c;
  Options with("sm_80", "-std=c++17");
  Binary first;
  ASSERT_EQ(compile(c, src, with, &first), KJIT_OK) << last_error() << "\n" << first.log();
  Options o("sm_80", "-std=c++17");
  ASSERT_EQ(kjit_options_add(o.o, "--no-builtin-std"), KJIT_OK);
  Binary b;
  EXPECT_EQ(compile(c, src, o, &b), KJIT_ERROR_COMPILE);
  EXPECT_NE(b.log().find("cannot open source file"), std::string::npos) << b.log();
  EXPECT_NE(b.log().find("--no-builtin-std"), std::string::npos) << b.log();
}

// A user's own `cstdint` on the include path is used instead of the built-in one, and its
// bytes are in the key: editing it is a miss.
TEST(BuiltinStd, UserHeaderShadowsTheBuiltinAndIsInTheKey) {
  kjit::test::TempDir cache, inc;
  kjit::test::write_file(inc.file("cstdint"), "typedef long long int64_t;\n#define MINE 1\n");
  const std::string src =
      "#include <cstdint>\n#ifndef MINE\n#error the built-in was used\n#endif\n"
      "extern \"C\" __global__ void k(int64_t* x) { *x = MINE; }\n";
  Compiler c(cache.path());
  Options o("sm_80", "-std=c++17");
  ASSERT_EQ(kjit_options_add_include_path(o.o, inc.path().c_str()), KJIT_OK);
  Binary first, again, edited;
  ASSERT_EQ(compile(c, src, o, &first), KJIT_OK) << last_error() << "\n" << first.log();
  ASSERT_EQ(compile(c, src, o, &again), KJIT_OK) << last_error();
  EXPECT_NE(again.tier(), KJIT_TIER_COMPILED);
  EXPECT_EQ(again.key(), first.key());
  kjit::test::write_file(inc.file("cstdint"), "typedef long long int64_t;\n#define MINE 2\n");
  ASSERT_EQ(compile(c, src, o, &edited), KJIT_OK) << last_error() << "\n" << edited.log();
  EXPECT_EQ(edited.tier(), KJIT_TIER_COMPILED) << "editing the user's cstdint is a miss";
  EXPECT_NE(edited.key(), first.key());
}

// The key of a program using a built-in is the same in a fresh cache handle and compiler,
// and its compile was stored (every file NVRTC opened was covered).
TEST(BuiltinStd, ProgramUsingABuiltinHitsFromAFreshHandle) {
  kjit::test::TempDir cache;
  const std::string src = "#include <cstdint>\nextern \"C\" __global__ void k(int64_t* x) {}\n";
  Options o("sm_80", "-std=c++17");
  std::string key;
  {
    Compiler c(cache.path());
    Binary b;
    ASSERT_EQ(compile(c, src, o, &b), KJIT_OK) << last_error() << "\n" << b.log();
    EXPECT_EQ(b.tier(), KJIT_TIER_COMPILED);
    key = b.key();
  }
  Compiler c(cache.path());
  Binary b;
  ASSERT_EQ(compile(c, src, o, &b), KJIT_OK) << last_error();
  EXPECT_EQ(b.tier(), KJIT_TIER_DISK);
  EXPECT_EQ(b.key(), key);
  // Without the built-ins (the user's own cstdint in memory), another key.
  kjit_options_add_header(o.o, "cstdint", "typedef long long int64_t;\n");
  Binary own;
  ASSERT_EQ(compile(c, src, o, &own), KJIT_OK) << last_error() << "\n" << own.log();
  EXPECT_NE(own.key(), key);
}

// ---------------------------------------------------------------------------------------
// On a GPU

namespace cu = kjit::cuda;

class BuiltinStdGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = kjit::test::gpu_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(kjit_compiler_create(nullptr, 2, &compiler_), KJIT_OK) << last_error();
    CU_ASSERT(cu::driver().cuCtxSetCurrent(cu::primary_context(0)));
  }
  void TearDown() override {
    if (kernel_) kjit_kernel_destroy(kernel_);
    kjit_compiler_destroy(compiler_);
  }

  // Launches use_std with `fail` and waits for it: the launch's status, else
  // KJIT_ERROR_CUDA when the synchronisation failed (its text in *why).
  kjit_status run(int fail, std::vector<double>* out, std::string* why) {
    if (!kernel_) {
      kjit_binary* log = nullptr;
      const kjit_status st =
          kjit_kernel_create(compiler_, kUseSource, "use_std", nullptr, 0, 0, &kernel_, &log);
      EXPECT_EQ(st, KJIT_OK) << last_error() << "\n" << (log ? kjit_binary_log(log) : "");
      kjit_binary_destroy(log);
      if (st != KJIT_OK) return st;
    }
    out->assign(128, -1.0);
    // (After a failed assert the context is unusable and this fails: the launch below then
    // reports it, before the driver.)
    CUdeviceptr d = 0;
    if (cu::driver().cuMemAlloc(&d, out->size() * sizeof(double)) != CUDA_SUCCESS) d = 0;
    kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
    void* args[] = {&d, &fail};
    const kjit_status st = kjit_kernel_launch(kernel_, &cfg, args, 2);
    if (st != KJIT_OK || d == 0) return st != KJIT_OK ? st : KJIT_ERROR_CUDA;
    const CUresult r = cu::driver().cuCtxSynchronize();
    if (r != CUDA_SUCCESS) {
      *why = cu::error_text(r);
      return KJIT_ERROR_CUDA;
    }
    cu::driver().cuMemcpyDtoH(out->data(), d, out->size() * sizeof(double));
    cu::driver().cuMemFree(d);
    return KJIT_OK;
  }

  // Child process body: a failed device assert, then a launch that reports it.
  void assert_child() {
    std::vector<double> out;
    std::string why;
    const kjit_status first = run(1, &out, &why);
    fprintf(stderr, "first=%d sync: %s\n", first, why.c_str());
    const kjit_status st = run(0, &out, &why);
    fprintf(stderr, "status=%d message=%s\n", st, kjit_last_error());
    _exit(first == KJIT_ERROR_CUDA && st == KJIT_ERROR_CUDA_STICKY ? 0 : 4);
  }

  kjit_compiler* compiler_ = nullptr;
  kjit_kernel* kernel_ = nullptr;
};

TEST_F(BuiltinStdGpu, KernelComputesWhatTheCpuComputesAndPrints) {
  // Device printf reaches this process's standard output: catch it in a file.
  kjit::test::TempDir dir;
  fflush(stdout);
  const int saved = dup(1);
  const int fd = open(dir.file("stdout").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  dup2(fd, 1);
  std::vector<double> got;
  std::string why;
  const kjit_status st = run(0, &got, &why);
  fflush(stdout);
  dup2(saved, 1);
  close(fd);
  close(saved);
  ASSERT_EQ(st, KJIT_OK) << last_error() << why;
  const std::vector<double> want = expected_use_std();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], std::fabs(want[i]) * 1e-6) << "value " << i;
  }
  EXPECT_NE(kjit::test::read_file_or_die(dir.file("stdout")).find("kjit std printf 42 ok"),
            std::string::npos);
}

// assert(false) in device code: the launch's failure is reported with its status.
TEST_F(BuiltinStdGpu, DeviceAssertReportsTheLaunchFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // In a child process: the failed assert ruins the context for good.
  EXPECT_EXIT(assert_child(), ::testing::ExitedWithCode(0),
              "first=.* sync: .*CUDA_ERROR_ASSERT.*\n.*status=18 .*CUDA_ERROR_ASSERT");
}

}  // namespace
