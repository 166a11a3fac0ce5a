// Comparing a C string of unknown length with a remembered text in one pass: a hit on a
// large source reads the caller's bytes once, rather than once to find their length and
// again to compare them.
#pragma once

#include <cstddef>

namespace kjit {

// Bytes of NUL padding the remembered text must be followed by (see cstr_equals).
constexpr size_t kTextPadding = 64;

// True when the NUL-terminated `s` is exactly the `n` bytes at `text`. `text` holds no NUL
// byte and is followed by at least kTextPadding NUL bytes. `s` is never read beyond the
// page of its terminator (as strlen reads it): page by page with memcmp, or in sanitized
// builds in aligned blocks that never span two pages.
bool cstr_equals(const char* s, const char* text, size_t n);

}  // namespace kjit
