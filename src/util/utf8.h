// UTF-8 validation for text that reaches NVRTC or the cache key.
#pragma once

#include <cstddef>
#include <string>

namespace kjit {

// Offset of the first byte that makes `text` invalid UTF-8 (overlong forms, surrogates and
// code points above U+10FFFF are invalid; so is a NUL byte, which C strings cannot carry),
// or std::string::npos when it is valid.
size_t utf8_error(const std::string& text);

}  // namespace kjit
