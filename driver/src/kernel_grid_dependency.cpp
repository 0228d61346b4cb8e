// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "kernel_grid_dependency.hpp"

#include "kernel_param_counts.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace cuasync::detail {

namespace {

// Kernel symbol -> whether its code waits, for the kernels an image shows.
using findings = std::unordered_map<std::string, bool>;

// The SASS of `griddepcontrol.wait` (ACQBULK): nvcc 13 emits it with this opcode for sm_90, sm_90a, sm_100 and
// sm_120 alike; `griddepcontrol.launch_dependents` is 0x82d. Architectures outside that range are not trusted.
constexpr std::uint64_t wait_opcode = 0x82e, opcode_mask = 0xfff;
constexpr unsigned first_sm = 90, last_sm = 129;

// The SM a CUBIN was built for: ELF ABI version 8 (CUDA 13) keeps it in bits 8-15 of e_flags, earlier ones in 0-7.
unsigned cubin_sm(std::span<const std::byte> image) {
  const auto abi_version = read_at<std::uint8_t>(image, 8);
  const auto flags = read_at<std::uint32_t>(image, 48);
  return abi_version >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
}

void read_cubin(std::span<const std::byte> image, findings& out) {
  if (image.size() < 64) return;
  const unsigned sm = cubin_sm(image);
  if (sm < first_sm || sm > last_sm) return;
  constexpr std::string_view prefix = ".text.";
  for_each_cubin_section(image, [&](std::string_view name, std::uint64_t offset, std::uint64_t size) {
    if (!name.starts_with(prefix) || name.size() == prefix.size()) return;
    bool waits = false;
    for (std::uint64_t p = 0; p + 16 <= size && !waits; p += 16)
      waits = (read_at<std::uint64_t>(image, offset + p) & opcode_mask) == wait_opcode;
    out.emplace(std::string(name.substr(prefix.size())), waits);
  });
}

// Each `.entry`'s body runs to the next `.entry` or `.func` (device functions are inlined in practice; a wait in a
// called `.func` is not seen, and its kernel goes without PDL: the safe side).
void read_ptx(std::span<const std::byte> image, findings& out) {
  std::string_view ptx(reinterpret_cast<const char*>(image.data()), image.size());
  if (const auto nul = ptx.find('\0'); nul != std::string_view::npos) ptx = ptx.substr(0, nul);
  for (std::size_t at = ptx.find(".entry"); at != std::string_view::npos;) {
    std::size_t p = at + 6;
    while (p < ptx.size() && (ptx[p] == ' ' || ptx[p] == '\t' || ptx[p] == '\r' || ptx[p] == '\n')) ++p;
    const std::size_t name_start = p;
    p = std::min(ptx.find_first_of("( \t\r\n{", p), ptx.size());
    const std::string name(ptx.substr(name_start, p - name_start));
    const std::size_t next = std::min(ptx.find(".entry", p), ptx.find(".func", p));
    const std::string_view body = ptx.substr(p, next == std::string_view::npos ? std::string_view::npos : next - p);
    if (!name.empty()) out.emplace(name, body.find("griddepcontrol.wait") != std::string_view::npos);
    at = next == std::string_view::npos ? next : ptx.find(".entry", next);
  }
}

}  // namespace

std::unordered_set<std::string> grid_dependency_kernels(std::span<const std::byte> image, image_format format) {
  findings all;
  if (format == image_format::cubin) read_cubin(image, all);
  if (format == image_format::ptx) read_ptx(image, all);
  if (format == image_format::fatbin)
    for_each_fatbin_entry(image, [&](std::uint16_t kind, std::span<const std::byte> bytes) {
      findings entry;
      const image_format f = detect_image_format(bytes);
      if (kind == fatbin_elf && f == image_format::cubin) read_cubin(bytes, entry);
      if (kind == fatbin_ptx && f == image_format::ptx) read_ptx(bytes, entry);
      for (auto& [name, waits] : entry) {
        auto [it, added] = all.emplace(name, waits);
        if (!added) it->second = it->second && waits;  // one entry without the wait is enough to refuse
      }
    });
  std::unordered_set<std::string> out;
  for (auto& [name, waits] : all)
    if (waits) out.insert(name);
  return out;
}

}  // namespace cuasync::detail
