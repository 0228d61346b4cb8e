// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "kernel_param_counts.hpp"

#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

namespace cuasync::detail {

namespace {

// EIATTR records in a `.nv.info.<kernel>` section: u8 format, u8 attribute, then a u16 value (formats 1-3: none,
// byte, half-word), or for format 4 a u16 size and that many bytes. KPARAM_INFO (0x17, format 4) is one per parameter.
// A section that does not parse to its exact end is not trusted (the kernel is probed instead).
constexpr std::uint8_t eifmt_sval = 4, eiattr_kparam_info = 0x17;

// Every offset is checked against the image: this also reads CUBINs embedded in a fatbin, which nothing else checked.
void read_cubin(std::span<const std::byte> image, std::unordered_map<std::string, std::size_t>& out) {
  constexpr std::string_view prefix = ".nv.info.";
  for_each_cubin_section(image, [&](std::string_view name, std::uint64_t offset, std::uint64_t size) {
    if (!name.starts_with(prefix) || name.size() == prefix.size()) return;
    std::size_t params = 0, p = 0;
    while (p + 4 <= size) {
      const auto format = read_at<std::uint8_t>(image, offset + p),
                 attribute = read_at<std::uint8_t>(image, offset + p + 1);
      std::size_t length = 4;
      if (format == eifmt_sval) {
        length = 4 + read_at<std::uint16_t>(image, offset + p + 2);
        if (attribute == eiattr_kparam_info) ++params;
      } else if (format < 1 || format > 3) {
        return;
      }
      p += length;
    }
    if (p == size) out.emplace(std::string(name.substr(prefix.size())), params);
  });
}

// `.entry name(` ... `)`: the parameters are the `.param`s between the parentheses (none: `()` or no list at all).
void read_ptx(std::span<const std::byte> image, std::unordered_map<std::string, std::size_t>& out) {
  std::string_view ptx(reinterpret_cast<const char*>(image.data()), image.size());
  if (const auto nul = ptx.find('\0'); nul != std::string_view::npos) ptx = ptx.substr(0, nul);
  for (std::size_t at = ptx.find(".entry"); at != std::string_view::npos; at = ptx.find(".entry", at + 6)) {
    std::size_t p = at + 6;
    auto skip_space = [&] {
      while (p < ptx.size() && (ptx[p] == ' ' || ptx[p] == '\t' || ptx[p] == '\r' || ptx[p] == '\n')) ++p;
    };
    skip_space();
    const std::size_t name_start = p;
    while (p < ptx.size() && ptx[p] != '(' && ptx[p] != '{' && ptx[p] != ' ' && ptx[p] != '\t' && ptx[p] != '\n' &&
           ptx[p] != '\r')
      ++p;
    const std::string name(ptx.substr(name_start, p - name_start));
    if (name.empty()) continue;
    skip_space();
    std::size_t params = 0;
    if (p < ptx.size() && ptx[p] == '(') {
      const std::size_t close = ptx.find(')', p);
      if (close == std::string_view::npos) continue;
      const std::string_view list = ptx.substr(p, close - p);
      for (std::size_t q = list.find(".param"); q != std::string_view::npos; q = list.find(".param", q + 6)) ++params;
    }
    out.emplace(name, params);
  }
}

}  // namespace

std::unordered_map<std::string, std::size_t> kernel_param_counts(std::span<const std::byte> image,
                                                                 image_format format) {
  std::unordered_map<std::string, std::size_t> out;
  if (format == image_format::cubin) read_cubin(image, out);
  if (format == image_format::ptx) read_ptx(image, out);
  if (format == image_format::fatbin)  // the uncompressed CUBINs: their kernels take the same parameters on every arch
    for_each_fatbin_entry(image, [&](std::uint16_t kind, std::span<const std::byte> bytes) {
      if (kind == fatbin_elf && detect_image_format(bytes) == image_format::cubin) read_cubin(bytes, out);
    });
  return out;
}

void for_each_cubin_section(std::span<const std::byte> image,
                            const std::function<void(std::string_view, std::uint64_t, std::uint64_t)>& f) {
  const std::size_t n = image.size();
  auto inside = [n](std::uint64_t offset, std::uint64_t size) { return offset <= n && size <= n - offset; };
  if (n < 64) return;
  const auto shoff = read_at<std::uint64_t>(image, 40);
  const auto shentsize = read_at<std::uint16_t>(image, 58), shnum = read_at<std::uint16_t>(image, 60),
             shstrndx = read_at<std::uint16_t>(image, 62);
  if (shstrndx >= shnum || shentsize < 64 || !inside(shoff, std::uint64_t{shentsize} * shnum)) return;
  auto section = [&](std::size_t i) { return shoff + i * shentsize; };
  const auto names_offset = read_at<std::uint64_t>(image, section(shstrndx) + 24);
  const auto names_size = read_at<std::uint64_t>(image, section(shstrndx) + 32);
  if (!inside(names_offset, names_size)) return;
  const std::string_view names(reinterpret_cast<const char*>(image.data()) + names_offset, names_size);
  for (std::size_t i = 0; i < shnum; ++i) {
    const auto name_at = read_at<std::uint32_t>(image, section(i));
    if (name_at >= names.size()) continue;
    const std::string_view rest = names.substr(name_at);
    const auto offset = read_at<std::uint64_t>(image, section(i) + 24),
               size = read_at<std::uint64_t>(image, section(i) + 32);
    if (inside(offset, size)) f(rest.substr(0, rest.find('\0')), offset, size);
  }
}

void for_each_fatbin_entry(std::span<const std::byte> image,
                           const std::function<void(std::uint16_t, std::span<const std::byte>)>& f) {
  const std::size_t n = image.size();
  if (n < 16) return;
  const std::uint64_t header = read_at<std::uint16_t>(image, 6), body = read_at<std::uint64_t>(image, 8);
  if (header < 16 || header > n || body > n - header) return;
  const std::uint64_t end = header + body;
  for (std::uint64_t p = header; p + 16 <= end;) {
    const auto kind = read_at<std::uint16_t>(image, p);
    const std::uint64_t entry_header = read_at<std::uint32_t>(image, p + 4),
                        payload = read_at<std::uint64_t>(image, p + 8);
    if (entry_header < 16 || entry_header > end - p || payload > end - p - entry_header) return;
    // A compressed entry is handed over as it is: its bytes are neither an ELF file nor PTX text, which callers check.
    f(kind, image.subspan(p + entry_header, payload));
    p += entry_header + payload;
  }
}

}  // namespace cuasync::detail
