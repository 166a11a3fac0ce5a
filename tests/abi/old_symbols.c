/*
 * A C caller of libkjit.so: the 0.1.0 init functions, reached with dlvsym() as a binary
 * built against 0.1.0 reaches them (bypassing the header's macros), write exactly the
 * 0.1.0 struct and never past it; the 0.2 sized functions carry KJIT_0.2; the header's
 * init macros compile in C and write the caller's sizeof.
 *   abi_old_symbols PATH/TO/libkjit.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kjit/gemm.h"
#include "kjit/kjit.h"

#define GUARD 64
#define CANARY 0xa5

static int failures = 0;

#define CHECK(cond, ...)                    \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                \
      ++failures;                           \
    }                                       \
  } while (0)

/* The struct sizes of 0.1.0 on LP64 Linux (abi/libkjit.abi). */
struct old_init {
  const char* name;
  size_t v0_1;
};

static uint32_t struct_size_of(const unsigned char* buf) {
  uint32_t v;
  memcpy(&v, buf, sizeof v);
  return v;
}

static int intact(const unsigned char* buf, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (buf[i] != CANARY) return 0;
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH/TO/libkjit.so\n", argv[0]);
    return 2;
  }
  if (sizeof(void*) != 8) {
    printf("skipped: the 0.1.0 sizes here are LP64's\n");
    return 0;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }

  static const struct old_init olds[] = {
      {"kjit_cache_options_init", 56},
      {"kjit_gemm_desc_init", 192},
      {"kjit_gemm_options_init", 32},
      {"kjit_launch_config_init", 56},
  };
  for (size_t i = 0; i < sizeof olds / sizeof olds[0]; ++i) {
    void (*fn)(void*) = NULL;
    *(void**)&fn = dlvsym(lib, olds[i].name, "KJIT_0.1");
    CHECK(fn != NULL, "%s@KJIT_0.1 not found", olds[i].name);
    if (!fn) continue;
    /* A 0.1.0 caller's struct, then the canary where a larger struct would continue. */
    unsigned char buf[1024];
    memset(buf, CANARY, sizeof buf);
    fn(buf);
    CHECK(struct_size_of(buf) == olds[i].v0_1, "%s wrote struct_size %u, expected %zu",
          olds[i].name, (unsigned)struct_size_of(buf), olds[i].v0_1);
    CHECK(intact(buf, olds[i].v0_1, olds[i].v0_1 + GUARD), "%s wrote past the 0.1.0 size %zu",
          olds[i].name, olds[i].v0_1);
    fn(NULL); /* ignored, as in 0.1.0 */
  }

  static const char* const sized[] = {
      "kjit_cache_options_init_sized", "kjit_cache_stats_init_sized",
      "kjit_gemm_desc_init_sized",     "kjit_gemm_options_init_sized",
      "kjit_gemm_stats_init_sized",    "kjit_launch_config_init_sized",
      "kjit_kernel_attributes_init_sized"};
  for (size_t i = 0; i < sizeof sized / sizeof sized[0]; ++i) {
    CHECK(dlvsym(lib, sized[i], "KJIT_0.2") != NULL, "%s@KJIT_0.2 not found", sized[i]);
    CHECK(dlvsym(lib, sized[i], "KJIT_0.1") == NULL, "%s is versioned KJIT_0.1", sized[i]);
  }

  /* The sized function at the 0.1.0 size of kjit_cache_stats (smaller than today's). */
  kjit_status (*stats_init)(kjit_cache_stats*, size_t) = NULL;
  *(void**)&stats_init = dlvsym(lib, "kjit_cache_stats_init_sized", "KJIT_0.2");
  if (stats_init) {
    unsigned char buf[1024];
    memset(buf, CANARY, sizeof buf);
    CHECK(stats_init((kjit_cache_stats*)(void*)buf, 496) == KJIT_OK, "stats init at 496");
    CHECK(struct_size_of(buf) == 496, "stats struct_size %u", (unsigned)struct_size_of(buf));
    CHECK(intact(buf, 496, 496 + GUARD), "kjit_cache_stats_init_sized wrote past 496 bytes");
    memset(buf, CANARY, sizeof buf);
    CHECK(stats_init((kjit_cache_stats*)(void*)buf, 495) == KJIT_ERROR_INVALID_ARGUMENT,
          "stats init at 495 accepted");
    CHECK(intact(buf, 0, sizeof buf), "a refused init wrote");
  }

  /* The header's macros, in C, against this library (linked normally). */
  kjit_cache_options o;
  memset(&o, 0x5a, sizeof o);
  CHECK(kjit_cache_options_init(&o) == KJIT_OK, "kjit_cache_options_init macro");
  CHECK(o.struct_size == sizeof o && o.directory == NULL && o.memory_only == 0,
        "kjit_cache_options_init macro result");
  kjit_cache_stats s;
  memset(&s, 0x5a, sizeof s);
  CHECK(kjit_cache_stats_init(&s) == KJIT_OK && s.struct_size == sizeof s && s.total_pch_failed == 0,
        "kjit_cache_stats_init macro");
  kjit_gemm_desc d;
  CHECK(kjit_gemm_desc_init(&d) == KJIT_OK && d.alpha == 1.0 && d.batch_count == 1,
        "kjit_gemm_desc_init macro");
  kjit_gemm_options go;
  CHECK(kjit_gemm_options_init(&go) == KJIT_OK && go.struct_size == sizeof go,
        "kjit_gemm_options_init macro");
  kjit_gemm_stats gs;
  CHECK(kjit_gemm_stats_init(&gs) == KJIT_OK && gs.struct_size == sizeof gs,
        "kjit_gemm_stats_init macro");
  kjit_launch_config c;
  CHECK(kjit_launch_config_init(&c) == KJIT_OK && c.grid[0] == 1 && c.struct_size == sizeof c,
        "kjit_launch_config_init macro");
  kjit_kernel_attributes a;
  CHECK(kjit_kernel_attributes_init(&a) == KJIT_OK && a.struct_size == sizeof a,
        "kjit_kernel_attributes_init macro");
  /* Taking the address gives the 0.1.0 function (no macro without parentheses). */
  void (*addr)(kjit_launch_config*) = kjit_launch_config_init;
  addr(&c);
  CHECK(c.struct_size == 56, "address of kjit_launch_config_init");

  dlclose(lib);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("old and sized init symbols: all checks passed\n");
  return 0;
}
