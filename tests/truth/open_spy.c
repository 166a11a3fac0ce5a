/* Ground truth for the include tests: an LD_PRELOAD interposer that logs every file the
 * process opens or stats while armed (kjit_open_spy_arm), one line per call:
 * "<kind> <0|1> <absolute path>" (1 = the call succeeded). Only the test's helper program
 * loads it; nothing of kjit is involved. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int armed;
static FILE* out;

__attribute__((visibility("default"))) void kjit_open_spy_arm(int on) {
  if (on && !out) {
    const char* path = getenv("KJIT_OPEN_SPY_LOG");
    static FILE* (*real_fopen)(const char*, const char*);
    if (!real_fopen) real_fopen = (FILE * (*)(const char*, const char*)) dlsym(RTLD_NEXT, "fopen");
    if (path) out = real_fopen(path, "w");
  }
  if (!on && out) fflush(out);
  armed = on;
}

static void note(const char* kind, int ok, const char* path) {
  if (!armed || !out || !path) return;
  armed = 0; /* no recursion through getcwd or stdio */
  if (path[0] == '/') {
    fprintf(out, "%s %d %s\n", kind, ok, path);
  } else {
    char cwd[4096];
    fprintf(out, "%s %d %s/%s\n", kind, ok, getcwd(cwd, sizeof cwd) ? cwd : "?", path);
  }
  armed = 1;
}

int __xstat(int ver, const char* p, struct stat* st);

/* Opens that create or truncate a file are NVRTC's own outputs (temporary files, PCH
 * files), not inputs: logged as "create". */
static const char* fopen_kind(const char* m) {
  return m && (strchr(m, 'w') || strchr(m, 'a')) ? "create" : "open";
}

static const char* open_kind(int flags) {
  return (flags & O_ACCMODE) == O_WRONLY || (flags & O_TRUNC) || (flags & O_EXCL) ? "create" : "open";
}

#define REAL(name)                        \
  static __typeof__(&name) real_##name; \
  if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

FILE* fopen(const char* p, const char* m) {
  REAL(fopen);
  FILE* f = real_fopen(p, m);
  note(fopen_kind(m), f != NULL, p);
  return f;
}

FILE* fopen64(const char* p, const char* m) {
  REAL(fopen64);
  FILE* f = real_fopen64(p, m);
  note(fopen_kind(m), f != NULL, p);
  return f;
}

static mode_t mode_of(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char* p, int flags, ...) {
  REAL(open);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  int fd = real_open(p, flags, mode);
  note(open_kind(flags), fd >= 0, p);
  return fd;
}

int open64(const char* p, int flags, ...) {
  REAL(open64);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  int fd = real_open64(p, flags, mode);
  note(open_kind(flags), fd >= 0, p);
  return fd;
}

int openat(int dirfd, const char* p, int flags, ...) {
  REAL(openat);
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_of(flags, ap);
  va_end(ap);
  int fd = real_openat(dirfd, p, flags, mode);
  note(dirfd == AT_FDCWD || p[0] == '/' ? open_kind(flags) : "openat-relative", fd >= 0, p);
  return fd;
}

DIR* opendir(const char* p) {
  REAL(opendir);
  DIR* d = real_opendir(p);
  note("opendir", d != NULL, p);
  return d;
}

int __xstat(int ver, const char* p, struct stat* st) {
  REAL(__xstat);
  int r = real___xstat(ver, p, st);
  note(r == 0 && S_ISDIR(st->st_mode) ? "stat-dir" : "stat", r == 0, p);
  return r;
}

int stat(const char* p, struct stat* st) {
  REAL(stat);
  int r = real_stat(p, st);
  note(r == 0 && S_ISDIR(st->st_mode) ? "stat-dir" : "stat", r == 0, p);
  return r;
}

int access(const char* p, int mode) {
  REAL(access);
  int r = real_access(p, mode);
  note("stat", r == 0, p);
  return r;
}
