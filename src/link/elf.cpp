#include "link/elf.h"

#include <elf.h>

#include <cstring>

namespace kjit::link {
namespace {

constexpr uint16_t kEmCuda = 190;
constexpr unsigned char kStoCudaEntry = 0x10;

template <typename T>
bool read_at(std::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

bool header(std::string_view bytes, Elf64_Ehdr* h) {
  if (!is_elf(bytes) || !read_at(bytes, 0, h)) return false;
  return h->e_ident[EI_CLASS] == ELFCLASS64 && h->e_ident[EI_DATA] == ELFDATA2LSB;
}

bool section(std::string_view bytes, const Elf64_Ehdr& h, uint64_t index, Elf64_Shdr* s) {
  if (index >= h.e_shnum || h.e_shentsize != sizeof(Elf64_Shdr)) return false;
  return read_at(bytes, h.e_shoff + index * sizeof(Elf64_Shdr), s) &&
         s->sh_offset <= bytes.size() && s->sh_size <= bytes.size() - s->sh_offset;
}

}  // namespace

bool is_elf(std::string_view bytes) {
  return bytes.size() >= SELFMAG && std::memcmp(bytes.data(), ELFMAG, SELFMAG) == 0;
}

bool is_cubin(std::string_view bytes) {
  Elf64_Ehdr h;
  return header(bytes, &h) && h.e_machine == kEmCuda;
}

std::vector<std::string> cubin_kernels(std::string_view bytes) {
  std::vector<std::string> out;
  Elf64_Ehdr h;
  if (!header(bytes, &h) || h.e_machine != kEmCuda) return out;
  for (uint64_t i = 0; i < h.e_shnum; ++i) {
    Elf64_Shdr symtab, strtab;
    if (!section(bytes, h, i, &symtab)) return {};
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_entsize != sizeof(Elf64_Sym)) continue;
    if (!section(bytes, h, symtab.sh_link, &strtab)) return {};
    const std::string_view names = bytes.substr(strtab.sh_offset, strtab.sh_size);
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= symtab.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      if (!read_at(bytes, symtab.sh_offset + off, &sym)) return {};
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & kStoCudaEntry)) continue;
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= names.size()) continue;
      const size_t end = names.find('\0', sym.st_name);
      if (end == std::string_view::npos) return {};
      out.emplace_back(names.substr(sym.st_name, end - sym.st_name));
    }
  }
  return out;
}

}  // namespace kjit::link
