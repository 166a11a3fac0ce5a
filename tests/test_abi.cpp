// The versioned-struct policy (src/api/versioned.h, docs/api.md "ABI and versioned
// structs") at every entry point that takes a struct with struct_size: sizes below the
// 0.1.0 layout are refused before anything else happens, nothing past the caller's size
// is read or written, older callers get defaults, newer callers are accepted only while
// the fields this library does not know are zero. Runs without a GPU: the GPU-only entry
// points check their struct before the handle and the driver.
//
// Reads past the caller's size are caught two ways: structs are passed in heap blocks of
// exactly the caller's size (AddressSanitizer reports any read past them), and inputs sit
// in front of a canary pattern that would change the outcome if it were read as a field.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/versioned.h"
#include "kjit/kjit.h"
#include "kjit/gemm.h"

using kjit::api::Versioned;

namespace {

constexpr unsigned char kCanary = 0xa5;
constexpr size_t kGuard = 64;

// A caller's struct of `size` bytes followed by kGuard canary bytes.
struct Guarded {
  explicit Guarded(size_t n, unsigned char fill = kCanary) : size(n), buf(n + kGuard, fill) {
    std::memset(buf.data() + n, kCanary, kGuard);
  }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(buf.data());
  }
  void set_struct_size(size_t s) {
    const uint32_t v = static_cast<uint32_t>(s);
    std::memcpy(buf.data(), &v, sizeof v);
  }
  uint32_t struct_size() const {
    uint32_t v;
    std::memcpy(&v, buf.data(), sizeof v);
    return v;
  }
  bool guard_intact() const {
    for (size_t i = size; i < buf.size(); ++i)
      if (buf[i] != kCanary) return false;
    return true;
  }
  bool all(unsigned char c, size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (buf[i] != c) return false;
    return true;
  }
  size_t size;
  std::vector<unsigned char> buf;
};

// A struct in a heap block of exactly `size` bytes (AddressSanitizer sees any overread):
// a copy of `src`'s first `size` bytes, or zeros past it.
struct Exact {
  Exact(const void* src, size_t src_size, size_t n) : size(n), p(new unsigned char[n]) {
    std::memset(p.get(), 0, n);
    std::memcpy(p.get(), src, std::min(src_size, n));
    const uint32_t v = static_cast<uint32_t>(n);
    std::memcpy(p.get(), &v, sizeof v);
  }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(p.get());
  }
  size_t size;
  std::unique_ptr<unsigned char[]> p;
};

std::string last_error() { return kjit_last_error(); }

// Sizes every entry point must refuse: unset, smaller than the 0.1.0 layout, absurd.
template <typename T>
std::vector<size_t> bad_sizes() {
  return {0, 4, Versioned<T>::v0_1 - 1, kjit::api::kMaxStructSize + 1, 0xffffffffu};
}

// Sizes every entry point must accept: each size from the 0.1.0 layout to this one's
// (callers built against any release so far), and a newer, larger one.
template <typename T>
std::vector<size_t> good_sizes() {
  std::vector<size_t> out;
  for (size_t s = Versioned<T>::v0_1; s <= sizeof(T); s += 8) out.push_back(s);
  if (out.back() != sizeof(T)) out.push_back(sizeof(T));
  out.push_back(sizeof(T) + 24);
  return out;
}

// ---- the helper itself, with a struct that has grown since its first release -------------

struct grown {
  uint32_t struct_size;
  int32_t a;      // first release
  int64_t b;      // first release
  int32_t c;      // appended later
  double d;       // appended later
};

}  // namespace

namespace kjit::api {
template <>
struct Versioned<grown> {
  static constexpr const char* name = "grown";
  static constexpr size_t v0_1 = offsetof(grown, c);
  static const grown& defaults() {
    static const grown d{sizeof(grown), 7, 8, 0, 0.0};
    return d;
  }
};
}  // namespace kjit::api

TEST(VersionedHelper, OlderInputTakesDefaultsAndIsReadOnlyWithinItsSize) {
  // An older caller: a and b only, then canary bytes where c and d would be.
  Guarded g(Versioned<grown>::v0_1);
  grown* in = g.as<grown>();
  in->struct_size = static_cast<uint32_t>(Versioned<grown>::v0_1);
  in->a = 1;
  in->b = 2;
  grown out;
  ASSERT_EQ(kjit::api::read_in(in, &out, "test: in"), KJIT_OK) << last_error();
  EXPECT_EQ(out.a, 1);
  EXPECT_EQ(out.b, 2);
  EXPECT_EQ(out.c, 0) << "a field past the caller's size was read";
  EXPECT_EQ(out.d, 0.0) << "a field past the caller's size was read";
  EXPECT_EQ(out.struct_size, sizeof(grown));
  EXPECT_TRUE(g.guard_intact());

  Exact e(in, sizeof(grown), Versioned<grown>::v0_1);
  ASSERT_EQ(kjit::api::read_in(e.as<grown>(), &out, "test: in"), KJIT_OK);
  EXPECT_EQ(out.c, 0);
}

TEST(VersionedHelper, OlderOutputIsWrittenOnlyWithinItsSize) {
  const grown full{sizeof(grown), 1, 2, 3, 4.0};
  for (size_t size = Versioned<grown>::v0_1; size <= sizeof(grown) + 8; ++size) {
    Guarded g(size, 0x11);
    size_t checked = 0;
    g.set_struct_size(size);
    ASSERT_EQ(kjit::api::check_out(g.as<grown>(), &checked, "test: out"), KJIT_OK);
    ASSERT_EQ(checked, size);
    kjit::api::write_out(g.as<grown>(), size, full);
    EXPECT_TRUE(g.guard_intact()) << "wrote past struct_size " << size;
    EXPECT_EQ(g.struct_size(), size);
    const size_t n = std::min(size, sizeof(grown));
    EXPECT_EQ(std::memcmp(g.buf.data() + 4, reinterpret_cast<const unsigned char*>(&full) + 4,
                          n - 4),
              0);
    EXPECT_TRUE(g.all(0, sizeof(grown), size)) << "bytes unknown to the library not zeroed";
  }
}

TEST(VersionedHelper, SizesRefused) {
  for (size_t size : bad_sizes<grown>()) {
    Guarded g(16);
    g.set_struct_size(size);
    grown out{};
    EXPECT_EQ(kjit::api::read_in(g.as<grown>(), &out, "test: in"), KJIT_ERROR_INVALID_ARGUMENT)
        << size;
    EXPECT_NE(last_error().find("test: in->struct_size is " + std::to_string(size)),
              std::string::npos)
        << last_error();
    size_t checked = 0;
    EXPECT_EQ(kjit::api::check_out(g.as<grown>(), &checked, "test: out"),
              KJIT_ERROR_INVALID_ARGUMENT);
  }
  grown out{};
  EXPECT_EQ(kjit::api::read_in<grown>(nullptr, &out, "test: in"), KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("test: in is NULL"), std::string::npos);
}

// ---- init functions ----------------------------------------------------------------------

namespace {

template <typename T>
void check_init_sized(kjit_status (*init)(T*, size_t), void (*old_init)(T*)) {
  const auto* def = reinterpret_cast<const unsigned char*>(&Versioned<T>::defaults());
  for (size_t size : good_sizes<T>()) {
    Guarded g(size);
    ASSERT_EQ(init(g.as<T>(), size), KJIT_OK) << Versioned<T>::name << " " << size;
    EXPECT_TRUE(g.guard_intact()) << Versioned<T>::name << ": wrote past size " << size;
    EXPECT_EQ(g.struct_size(), size);
    const size_t n = std::min(size, sizeof(T));
    EXPECT_EQ(std::memcmp(g.buf.data() + 4, def + 4, n - 4), 0) << Versioned<T>::name;
    EXPECT_TRUE(g.all(0, sizeof(T), size)) << Versioned<T>::name;
  }
  for (size_t size : bad_sizes<T>()) {
    Guarded g(16);
    EXPECT_EQ(init(g.as<T>(), size), KJIT_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_TRUE(g.all(kCanary, 0, g.buf.size())) << "a refused init wrote";
    EXPECT_NE(last_error().find(Versioned<T>::name), std::string::npos) << last_error();
  }
  EXPECT_EQ(init(nullptr, sizeof(T)), KJIT_ERROR_INVALID_ARGUMENT);

  // The 0.1.0 function writes exactly the 0.1.0 struct, whatever sizeof(T) is now.
  if (old_init) {
    Guarded g(Versioned<T>::v0_1);
    old_init(g.as<T>());
    EXPECT_TRUE(g.guard_intact()) << Versioned<T>::name << ": 0.1.0 init wrote past 0.1.0 size";
    EXPECT_EQ(g.struct_size(), Versioned<T>::v0_1);
    EXPECT_EQ(std::memcmp(g.buf.data() + 4, def + 4, Versioned<T>::v0_1 - 4), 0);
    old_init(nullptr);  // ignored, as in 0.1.0
  }
}

}  // namespace

TEST(AbiInit, SizedFunctionsWriteOnlyWithinTheGivenSize) {
  check_init_sized<kjit_cache_options>(kjit_cache_options_init_sized,
                                       &(kjit_cache_options_init));
  check_init_sized<kjit_cache_stats>(kjit_cache_stats_init_sized, nullptr);
  check_init_sized<kjit_gemm_desc>(kjit_gemm_desc_init_sized, &(kjit_gemm_desc_init));
  check_init_sized<kjit_gemm_options>(kjit_gemm_options_init_sized, &(kjit_gemm_options_init));
  check_init_sized<kjit_gemm_stats>(kjit_gemm_stats_init_sized, nullptr);
  check_init_sized<kjit_launch_config>(kjit_launch_config_init_sized,
                                       &(kjit_launch_config_init));
  check_init_sized<kjit_kernel_attributes>(kjit_kernel_attributes_init_sized, nullptr);
  check_init_sized<kjit_worker_info>(kjit_worker_info_init_sized, nullptr);
}

TEST(AbiInit, MacrosUseTheCallersSizeAndMatchTheInitializers) {
  {
    kjit_cache_options o;
    std::memset(&o, 0x5a, sizeof o);
    EXPECT_EQ(kjit_cache_options_init(&o), KJIT_OK);
    const kjit_cache_options m = KJIT_CACHE_OPTIONS_INIT;
    EXPECT_EQ(o.struct_size, sizeof o);
    EXPECT_EQ(o.directory, m.directory);
    EXPECT_EQ(o.remote_url, m.remote_url);
    EXPECT_EQ(o.memory_only, 0);
  }
  {
    kjit_cache_stats s;
    std::memset(&s, 0x5a, sizeof s);
    EXPECT_EQ(kjit_cache_stats_init(&s), KJIT_OK);
    EXPECT_EQ(s.struct_size, sizeof s);
    EXPECT_EQ(s.total_pch_failed, 0u);
    EXPECT_EQ(s.message[0], '\0');
    const kjit_cache_stats m = KJIT_CACHE_STATS_INIT;
    EXPECT_EQ(m.struct_size, sizeof m);
  }
  {
    kjit_gemm_desc d;
    std::memset(&d, 0x5a, sizeof d);
    EXPECT_EQ(kjit_gemm_desc_init(&d), KJIT_OK);
    const kjit_gemm_desc m = KJIT_GEMM_DESC_INIT;
    EXPECT_EQ(std::memcmp(&d, &m, sizeof d), 0);
  }
  {
    kjit_gemm_options o;
    std::memset(&o, 0x5a, sizeof o);
    EXPECT_EQ(kjit_gemm_options_init(&o), KJIT_OK);
    const kjit_gemm_options m = KJIT_GEMM_OPTIONS_INIT;
    EXPECT_EQ(std::memcmp(&o, &m, sizeof o), 0);
  }
  {
    kjit_gemm_stats s;
    std::memset(&s, 0x5a, sizeof s);
    EXPECT_EQ(kjit_gemm_stats_init(&s), KJIT_OK);
    EXPECT_EQ(s.struct_size, sizeof s);
    EXPECT_EQ(s.runs, 0u);
    EXPECT_EQ(s.workspace_bytes, 0u);
    const kjit_gemm_stats m = KJIT_GEMM_STATS_INIT;
    EXPECT_EQ(m.struct_size, sizeof m);
  }
  {
    kjit_launch_config c;
    std::memset(&c, 0x5a, sizeof c);
    EXPECT_EQ(kjit_launch_config_init(&c), KJIT_OK);
    EXPECT_EQ(c.struct_size, sizeof c);
    EXPECT_EQ(c.grid[2], 1u);
    EXPECT_EQ(c.block[0], 1u);
    EXPECT_EQ(c.stream, nullptr);
    EXPECT_EQ(c.cooperative, 0);
  }
  {
    kjit_kernel_attributes a;
    std::memset(&a, 0x5a, sizeof a);
    EXPECT_EQ(kjit_kernel_attributes_init(&a), KJIT_OK);
    const kjit_kernel_attributes m = KJIT_KERNEL_ATTRIBUTES_INIT;
    EXPECT_EQ(std::memcmp(&a, &m, sizeof a), 0);
  }
}

// ---- inputs --------------------------------------------------------------------------------

namespace {

// Runs `call` with the struct `base` presented at every good size (in an exact-size block
// with zeros past `base`), at each bad size, and as a newer struct with a non-zero byte
// this library does not know. `ok` is the status a good size must give. NULL is refused
// unless `null_means_defaults` (then it is not tried here).
template <typename T, typename Call>
void check_input(const T& base, Call call, kjit_status ok, const char* what,
                 bool null_means_defaults = false) {
  for (size_t size : good_sizes<T>()) {
    Exact e(&base, sizeof(T), size);
    EXPECT_EQ(call(e.as<T>()), ok) << what << " size " << size << ": " << last_error();
  }
  for (size_t size : bad_sizes<T>()) {
    // A block of sizeof(T) bytes that claims another size: refused before it is read.
    Exact e(&base, sizeof(T), sizeof(T));
    const uint32_t s32 = static_cast<uint32_t>(size);
    std::memcpy(e.p.get(), &s32, sizeof s32);
    EXPECT_EQ(call(e.as<T>()), KJIT_ERROR_INVALID_ARGUMENT) << what << " size " << size;
    EXPECT_NE(last_error().find("struct_size is " + std::to_string(size)), std::string::npos)
        << last_error();
    EXPECT_NE(last_error().find(Versioned<T>::name), std::string::npos) << last_error();
  }
  // A newer caller whose extra field is set: refused, naming the reason.
  Exact newer(&base, sizeof(T), sizeof(T) + 16);
  newer.p[sizeof(T) + 15] = 1;
  EXPECT_EQ(call(newer.as<T>()), KJIT_ERROR_UNSUPPORTED) << what;
  EXPECT_NE(last_error().find("newer kjit"), std::string::npos) << last_error();
  // Canary bytes past a struct_size are not part of the struct: no effect.
  Guarded g(sizeof(T));
  std::memcpy(g.buf.data(), &base, sizeof(T));
  g.set_struct_size(sizeof(T));
  EXPECT_EQ(call(g.as<T>()), ok) << what << ": " << last_error();
  EXPECT_TRUE(g.guard_intact());
  if (!null_means_defaults) {
    EXPECT_EQ(call(nullptr), KJIT_ERROR_INVALID_ARGUMENT) << what;
  }
}

}  // namespace

TEST(AbiInput, CacheOptions) {
  kjit_cache_options base = KJIT_CACHE_OPTIONS_INIT;
  base.memory_only = 1;
  check_input<kjit_cache_options>(
      base,
      [](const kjit_cache_options* o) {
        kjit_cache* c = nullptr;
        const kjit_status s = kjit_cache_open(o, &c);
        if (s == KJIT_OK) {
          // memory_only was read from the caller's struct.
          kjit_cache_stats st = KJIT_CACHE_STATS_INIT;
          EXPECT_EQ(kjit_cache_stats_get(c, &st), KJIT_OK);
          EXPECT_EQ(st.disk_state, KJIT_DISK_DISABLED);
        }
        kjit_cache_close(c);
        return s;
      },
      KJIT_OK, "kjit_cache_open", true);
}

TEST(AbiInput, GemmDesc) {
  kjit_gemm_desc base = KJIT_GEMM_DESC_INIT;
  base.m = base.n = base.k = 16;
  base.a_type = KJIT_GEMM_F32;
  const auto A = reinterpret_cast<const void*>(uintptr_t(0x7f0000000000));
  void* D = reinterpret_cast<void*>(uintptr_t(0x7f0000100000));
  check_input<kjit_gemm_desc>(
      base, [&](const kjit_gemm_desc* d) { return kjit_gemm_check(d, A, A, nullptr, D, nullptr); },
      KJIT_OK, "kjit_gemm_check");
  // kjit_gemm_run checks the desc before the handle (no GPU needed to see it).
  check_input<kjit_gemm_desc>(
      base,
      [&](const kjit_gemm_desc* d) {
        return kjit_gemm_run(nullptr, d, A, A, nullptr, D, nullptr, nullptr);
      },
      KJIT_ERROR_INVALID_HANDLE, "kjit_gemm_run");
}

TEST(AbiInput, GemmOptions) {
  kjit_gemm_options base = KJIT_GEMM_OPTIONS_INIT;
  // Options are checked before the device: a device that exists nowhere gives
  // CUDA_UNAVAILABLE only once they passed.
  check_input<kjit_gemm_options>(
      base,
      [](const kjit_gemm_options* o) {
        kjit_gemm* g = nullptr;
        const kjit_status s = kjit_gemm_create(nullptr, 4096, o, &g);
        kjit_gemm_destroy(g);
        return s;
      },
      KJIT_ERROR_CUDA_UNAVAILABLE, "kjit_gemm_create", true);
  // A value check of the core still sees the caller's fields.
  Exact e(&base, sizeof base, sizeof base);
  e.as<kjit_gemm_options>()->autotune_candidates = 1000;
  kjit_gemm* g = nullptr;
  EXPECT_EQ(kjit_gemm_create(nullptr, 4096, e.as<kjit_gemm_options>(), &g),
            KJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("autotune_candidates"), std::string::npos) << last_error();
}

TEST(AbiInput, LaunchConfig) {
  const kjit_launch_config base = KJIT_LAUNCH_CONFIG_INIT;
  float x = 0;
  void* args[] = {&x};
  const size_t sizes[] = {sizeof x};
  // The config is checked before the kernel handle (and so before any driver call).
  check_input<kjit_launch_config>(
      base, [&](const kjit_launch_config* c) { return kjit_kernel_launch(nullptr, c, args, 1); },
      KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_launch");
  check_input<kjit_launch_config>(
      base,
      [&](const kjit_launch_config* c) {
        return kjit_kernel_launch_sized(nullptr, c, args, sizes, 1);
      },
      KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_launch_sized");
  check_input<kjit_launch_config>(
      base,
      [&](const kjit_launch_config* c) {
        return kjit_kernel_launch_packed(nullptr, c, &x, sizeof x);
      },
      KJIT_ERROR_INVALID_HANDLE, "kjit_kernel_launch_packed");
}

// ---- outputs -------------------------------------------------------------------------------

TEST(AbiOutput, CacheStatsAtEverySize) {
  kjit_cache_options o = KJIT_CACHE_OPTIONS_INIT;
  o.memory_only = 1;
  o.memory_max_bytes = 12345;
  kjit_cache* c = nullptr;
  ASSERT_EQ(kjit_cache_open(&o, &c), KJIT_OK) << last_error();
  kjit_cache_stats full = KJIT_CACHE_STATS_INIT;
  ASSERT_EQ(kjit_cache_stats_get(c, &full), KJIT_OK);
  ASSERT_EQ(full.disk_state, KJIT_DISK_DISABLED);
  const auto* ref = reinterpret_cast<const unsigned char*>(&full);

  // Every size a caller may have, byte by byte: the 0.1.0 layout, each field added since,
  // and a newer caller's larger struct.
  for (size_t size = Versioned<kjit_cache_stats>::v0_1; size <= sizeof full + 16; ++size) {
    Guarded g(size, 0x77);
    g.set_struct_size(size);
    ASSERT_EQ(kjit_cache_stats_get(c, g.as<kjit_cache_stats>()), KJIT_OK) << size;
    EXPECT_TRUE(g.guard_intact()) << "kjit_cache_stats_get wrote past struct_size " << size;
    EXPECT_EQ(g.struct_size(), size);
    const size_t n = std::min(size, sizeof full);
    EXPECT_EQ(std::memcmp(g.buf.data() + 4, ref + 4, n - 4), 0) << size;
    EXPECT_TRUE(g.all(0, sizeof full, size)) << size;

    Exact e(&full, sizeof full, size);
    EXPECT_EQ(kjit_cache_stats_get(c, e.as<kjit_cache_stats>()), KJIT_OK);
  }
  for (size_t size : bad_sizes<kjit_cache_stats>()) {
    Guarded g(sizeof full);
    g.set_struct_size(size);
    EXPECT_EQ(kjit_cache_stats_get(c, g.as<kjit_cache_stats>()), KJIT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("kjit_cache_stats"), std::string::npos) << last_error();
    EXPECT_TRUE(g.all(kCanary, 4, g.buf.size())) << "a refused call wrote";
  }
  EXPECT_EQ(kjit_cache_stats_get(c, nullptr), KJIT_ERROR_INVALID_ARGUMENT);
  kjit_cache_close(c);
}

namespace {

// Output entry points that need a live GPU handle: with no handle they must still refuse
// a bad struct first (INVALID_ARGUMENT, nothing written), and with a good struct report
// the handle (INVALID_HANDLE, nothing written).
template <typename T, typename Call>
void check_output_without_handle(Call call, const char* what) {
  for (size_t size : good_sizes<T>()) {
    Guarded g(size);
    g.set_struct_size(size);
    EXPECT_EQ(call(g.as<T>()), KJIT_ERROR_INVALID_HANDLE) << what << " " << size;
    EXPECT_TRUE(g.all(kCanary, 4, g.buf.size())) << what << " wrote for a bad handle";
  }
  for (size_t size : bad_sizes<T>()) {
    Guarded g(sizeof(T));
    g.set_struct_size(size);
    EXPECT_EQ(call(g.as<T>()), KJIT_ERROR_INVALID_ARGUMENT) << what << " " << size;
    EXPECT_NE(last_error().find(Versioned<T>::name), std::string::npos) << last_error();
    EXPECT_TRUE(g.all(kCanary, 4, g.buf.size())) << what << " wrote";
  }
  EXPECT_EQ(call(nullptr), KJIT_ERROR_INVALID_ARGUMENT) << what;
}

}  // namespace

TEST(AbiOutput, GemmStatsCheckedBeforeTheHandle) {
  check_output_without_handle<kjit_gemm_stats>(
      [](kjit_gemm_stats* s) { return kjit_gemm_stats_get(nullptr, s); }, "kjit_gemm_stats_get");
}

TEST(AbiOutput, KernelAttributesCheckedBeforeTheHandle) {
  check_output_without_handle<kjit_kernel_attributes>(
      [](kjit_kernel_attributes* a) { return kjit_kernel_get_attributes(nullptr, a); },
      "kjit_kernel_get_attributes");
}

// kjit_worker_info (since 0.2): written within the caller's size, checked before the
// cache handle; with a bad handle nothing is written.
TEST(AbiOutput, WorkerInfoAtEverySize) {
  check_output_without_handle<kjit_worker_info>(
      [](kjit_worker_info* w) {
        return kjit_worker_info_get(reinterpret_cast<kjit_cache*>(&w), w);
      },
      "kjit_worker_info_get");
  kjit_worker_info full = KJIT_WORKER_INFO_INIT;
  for (size_t size = Versioned<kjit_worker_info>::v0_1; size <= sizeof full + 16; ++size) {
    Guarded g(size, 0x77);
    g.set_struct_size(size);
    // The worker of memory-only caches (running or not): OK, written within the size.
    ASSERT_EQ(kjit_worker_info_get(nullptr, g.as<kjit_worker_info>()), KJIT_OK) << last_error();
    EXPECT_TRUE(g.guard_intact()) << "kjit_worker_info_get wrote past struct_size " << size;
    EXPECT_EQ(g.struct_size(), size);
  }
}

// Every public struct that starts with struct_size is covered above: a struct added to the
// headers must be added to Versioned<> (versioned.h) and to these tests.
TEST(AbiStructs, ZeroOneLayoutsAreFrozen) {
  if (sizeof(void*) != 8) GTEST_SKIP() << "sizes recorded for LP64";
  EXPECT_EQ(Versioned<kjit_cache_options>::v0_1, 56u);
  EXPECT_EQ(Versioned<kjit_cache_stats>::v0_1, 496u);
  EXPECT_EQ(Versioned<kjit_gemm_desc>::v0_1, 192u);
  EXPECT_EQ(Versioned<kjit_gemm_options>::v0_1, 32u);
  EXPECT_EQ(Versioned<kjit_gemm_stats>::v0_1, 96u);
  EXPECT_EQ(Versioned<kjit_launch_config>::v0_1, 56u);
  EXPECT_EQ(Versioned<kjit_kernel_attributes>::v0_1, 36u);
}

// ---- the last error ------------------------------------------------------------------------

// kjit_last_error(): the message of this thread's last call, "" once a call succeeds.
TEST(LastError, SetByAFailureClearedByASuccessAndKeptPerThread) {
  kjit_options* o = nullptr;
  ASSERT_EQ(kjit_options_create(&o), KJIT_OK);
  EXPECT_STREQ(kjit_last_error(), "");
  EXPECT_EQ(kjit_options_set_target(o, "not-an-arch"), KJIT_ERROR_INVALID_ARGUMENT);
  const std::string failed = kjit_last_error();
  EXPECT_NE(failed.find("not-an-arch"), std::string::npos) << failed;
  std::string other_thread;
  std::thread([&] {
    other_thread = std::string("[") + kjit_last_error() + "]";
    EXPECT_EQ(kjit_kernel_launch_packed(nullptr, nullptr, nullptr, 0),
              KJIT_ERROR_INVALID_ARGUMENT);
  }).join();
  EXPECT_EQ(other_thread, "[]");  // another thread's state, untouched by this one
  EXPECT_EQ(kjit_last_error(), failed);  // and this one's untouched by it
  EXPECT_EQ(kjit_options_set_target(o, "sm_90"), KJIT_OK);
  EXPECT_STREQ(kjit_last_error(), "");
  // Twice in a row: a success after a success, then a failure after them.
  EXPECT_EQ(kjit_options_set_target(o, "sm_80"), KJIT_OK);
  EXPECT_STREQ(kjit_last_error(), "");
  const kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  EXPECT_EQ(kjit_kernel_launch_packed(nullptr, &cfg, nullptr, 0), KJIT_ERROR_INVALID_HANDLE);
  EXPECT_STRNE(kjit_last_error(), "");
  kjit_options_destroy(o);
}
