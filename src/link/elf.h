// Just enough ELF to check a CUBIN and list its kernels (bounds-checked: malformed bytes
// give false / an empty list, never a crash).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kjit::link {

// True when `bytes` start like an ELF file.
bool is_elf(std::string_view bytes);

// True for a 64-bit little-endian ELF file for NVIDIA GPUs (EM_CUDA): a CUBIN.
bool is_cubin(std::string_view bytes);

// The `__global__` entry points of a CUBIN (function symbols marked STO_CUDA_ENTRY), in
// symbol table order. Empty for anything that is not a well-formed CUBIN.
std::vector<std::string> cubin_kernels(std::string_view bytes);

}  // namespace kjit::link
