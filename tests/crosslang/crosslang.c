/*
 * The C leg of the cross-language cache test (driven by bindings/test_bindings.sh):
 *
 *     crosslang <cache-dir> <source.cu> <ptx-out> <expected-tier: compiled|memory|disk>
 *
 * Compiles the source with the options every leg uses (target sm_80, -std=c++17,
 * -DBLOCK=256, PTX + CUBIN), writes the PTX and exits non-zero unless the binary came from
 * the expected tier. Built against the installed library through pkg-config.
 */
#include <kjit/kjit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char* what, kjit_status st) {
  fprintf(stderr, "c: %s: %s: %s\n", what, kjit_status_string(st), kjit_last_error());
  return 1;
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = (char*)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  return buf;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <cache-dir> <source.cu> <ptx-out> <compiled|memory|disk>\n", argv[0]);
    return 2;
  }
  int want;
  if (strcmp(argv[4], "compiled") == 0) want = KJIT_TIER_COMPILED;
  else if (strcmp(argv[4], "memory") == 0) want = KJIT_TIER_MEMORY;
  else if (strcmp(argv[4], "disk") == 0) want = KJIT_TIER_DISK;
  else {
    fprintf(stderr, "unknown tier %s\n", argv[4]);
    return 2;
  }
  char* source = read_file(argv[2]);
  if (!source) {
    perror(argv[2]);
    return 1;
  }

  kjit_cache_options copts = KJIT_CACHE_OPTIONS_INIT;
  copts.directory = argv[1];
  kjit_cache* cache = NULL;
  kjit_compiler* compiler = NULL;
  kjit_options* opts = NULL;
  kjit_binary* bin = NULL;
  kjit_status st;
  if ((st = kjit_cache_open(&copts, &cache))) return fail("kjit_cache_open", st);
  if ((st = kjit_compiler_create(cache, 0, &compiler))) return fail("kjit_compiler_create", st);
  if ((st = kjit_options_create(&opts))) return fail("kjit_options_create", st);
  if ((st = kjit_options_set_target(opts, "sm_80"))) return fail("set_target", st);
  if ((st = kjit_options_add(opts, "-std=c++17"))) return fail("add", st);
  if ((st = kjit_options_add_define(opts, "BLOCK", "256"))) return fail("add_define", st);
  if ((st = kjit_options_set_outputs(opts, KJIT_OUTPUT_PTX | KJIT_OUTPUT_CUBIN)))
    return fail("set_outputs", st);
  st = kjit_compile(compiler, source, opts, &bin);
  if (st) {
    if (bin) fprintf(stderr, "%s\n", kjit_binary_log(bin));
    return fail("kjit_compile", st);
  }
  size_t size = 0;
  const void* ptx = kjit_binary_data(bin, KJIT_OUTPUT_PTX, &size);
  FILE* out = fopen(argv[3], "wb");
  if (!ptx || !out || fwrite(ptx, 1, size, out) != size || fclose(out) != 0) {
    fprintf(stderr, "c: could not write PTX to %s\n", argv[3]);
    return 1;
  }
  int tier = kjit_binary_tier(bin);
  printf("c: key %s tier %d\n", kjit_binary_key(bin), tier);

  kjit_binary_destroy(bin);
  kjit_options_destroy(opts);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  free(source);
  if (tier != want) {
    fprintf(stderr, "c: expected tier %d, got %d\n", want, tier);
    return 1;
  }
  return 0;
}
