/* A code generator's same-bytes rewrite (open with O_TRUNC, then write), made to land
 * exactly while NVRTC reads a header: an LD_PRELOAD interposer for the compile-window
 * tests. When NVRTC (a call with libnvrtc on the stack) opens the file named by
 * $KJIT_RACE_FILE (an absolute path; matched by its last component), the file is truncated,
 * so NVRTC reads it empty; when NVRTC next opens a file named $KJIT_RACE_RESTORE (a last
 * component), the original bytes are written back. So the
 * bytes before and after the compile are equal while NVRTC saw none of them. Once per
 * process. Nothing of kjit is involved. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread int busy; /* no recursion through backtrace() or dladdr() */
static int state;         /* 0: waiting, 1: truncated, 2: restored */
static char saved[65536];
static ssize_t saved_len;

#define REAL(name)                      \
  static __typeof__(&name) real_##name; \
  if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

/* True when `path` names a file called `name` (the whole path, or its last component). */
static int names(const char* path, const char* name) {
  const size_t a = strlen(path), b = strlen(name);
  return strcmp(path, name) == 0 ||
         (a > b && path[a - b - 1] == '/' && strcmp(path + a - b, name) == 0);
}

static int called_by_nvrtc(void) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname && strstr(info.dli_fname, "libnvrtc")) return 1;
  }
  return 0;
}

static void rewrite(const char* file, const char* bytes, ssize_t len) {
  REAL(open);
  const int fd = real_open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return;
  if (len > 0 && write(fd, bytes, (size_t)len) != len) {
    fprintf(stderr, "rewrite_during_read: short write\n");
  }
  close(fd);
}

static void seen(const char* path) {
  const char* file = getenv("KJIT_RACE_FILE");
  const char* restore = getenv("KJIT_RACE_RESTORE");
  if (!path || !file || !restore || busy || state == 2) return;
  const char* base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  const int match_file = state == 0 && names(path, base);
  const int match_restore = state == 1 && names(path, restore);
  if (!match_file && !match_restore) return;
  busy = 1;
  if (called_by_nvrtc()) {
    if (match_file) {
      REAL(open);
      const int fd = real_open(file, O_RDONLY | O_CLOEXEC);
      saved_len = fd >= 0 ? read(fd, saved, sizeof saved) : -1;
      if (fd >= 0) close(fd);
      if (saved_len >= 0) {
        rewrite(file, NULL, 0); /* truncated: what NVRTC reads now */
        state = 1;
      }
    } else {
      rewrite(file, saved, saved_len); /* the same bytes again */
      state = 2;
    }
  }
  busy = 0;
}

int open(const char* p, int flags, ...) {
  REAL(open);
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
  va_end(ap);
  const int fd = real_open(p, flags, mode);
  if (fd >= 0) seen(p);
  return fd;
}

int open64(const char* p, int flags, ...) {
  REAL(open64);
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
  va_end(ap);
  const int fd = real_open64(p, flags, mode);
  if (fd >= 0) seen(p);
  return fd;
}

int openat(int dir, const char* p, int flags, ...) {
  REAL(openat);
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
  va_end(ap);
  const int fd = real_openat(dir, p, flags, mode);
  if (fd >= 0) seen(p);
  return fd;
}

FILE* fopen(const char* p, const char* m) {
  REAL(fopen);
  FILE* f = real_fopen(p, m);
  if (f) seen(p);
  return f;
}

FILE* fopen64(const char* p, const char* m) {
  REAL(fopen64);
  FILE* f = real_fopen64(p, m);
  if (f) seen(p);
  return f;
}
