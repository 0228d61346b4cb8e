// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The format of a cache entry: a fixed header (magic, format version, key, payload size, XXH3-128 checksum), then
// the payload (target, NVRTC version, name, log, lowered names, image). Decoding checks every field and every read.
#include <cuasync/jit/disk_cache.hpp>

#include "byte_codec.hpp"

#include <cstring>

namespace cuasync::jit {
namespace {

constexpr char magic[8] = {'C', 'U', 'A', 'S', 'J', 'I', 'T', '\0'};

// The fixed header at the start of every entry. The magic and the format version come first in every format, so
// an entry of any version can be recognised as such.
struct entry_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t header_size;
  std::uint64_t key_low, key_high;
  std::uint64_t payload_size;
  std::uint64_t checksum_low, checksum_high;  // XXH3-128 over this header (checksum zeroed) and the payload
};
static_assert(sizeof(entry_header) == 56);

}  // namespace

std::string disk_cache::serialize(const cache_key& key, const compiled_program& p, std::uint32_t format_version) {
  detail::byte_writer payload;
  payload.value(static_cast<std::uint8_t>(p.target.kind));
  payload.value(static_cast<std::int32_t>(p.target.arch));
  payload.value(static_cast<std::int32_t>(p.nvrtc_version));
  payload.str(p.name);
  payload.str(p.log);
  payload.value(static_cast<std::uint64_t>(p.lowered_names.size()));
  for (const auto& [expr, lowered] : p.lowered_names) {
    payload.str(expr);
    payload.str(lowered);
  }
  payload.str(p.text());

  entry_header h{};
  std::memcpy(h.magic, magic, sizeof magic);
  h.format_version = format_version;
  h.header_size = sizeof h;
  h.key_low = key.low;
  h.key_high = key.high;
  h.payload_size = payload.out.size();
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += payload.out;
  const cache_key sum = checksum(out.data(), out.size());  // checksum fields are zero here
  h.checksum_low = sum.low;
  h.checksum_high = sum.high;
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

namespace detail {

std::optional<compiled_program> decode_entry(std::string bytes, const cache_key& key, std::string& why) {
  auto bad = [&](std::string w) -> std::optional<compiled_program> {
    why = std::move(w);
    return std::nullopt;
  };
  entry_header h{};
  if (bytes.size() < sizeof h)
    return bad("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, magic, sizeof magic) != 0) return bad("not a cuasync cache entry (bad magic)");
  if (h.format_version != cache_format_version)
    return bad("format version " + std::to_string(h.format_version) + ", but this cuasync reads version " +
               std::to_string(cache_format_version));
  if (h.header_size != sizeof h) return bad("header size " + std::to_string(h.header_size));
  if (h.payload_size != bytes.size() - sizeof h)
    return bad((bytes.size() - sizeof h < h.payload_size ? "truncated: " : "trailing bytes: ") +
               std::to_string(bytes.size()) + " bytes, expected " + std::to_string(sizeof h + h.payload_size));
  if (h.key_low != key.low || h.key_high != key.high)
    return bad("holds the entry of another key (" + cache_key{h.key_low, h.key_high}.hex() + ")");
  const cache_key stored{h.checksum_low, h.checksum_high};
  entry_header zeroed = h;
  zeroed.checksum_low = zeroed.checksum_high = 0;
  std::memcpy(bytes.data(), &zeroed, sizeof zeroed);
  if (checksum(bytes.data(), bytes.size()) != stored) return bad("checksum mismatch: the entry is corrupt");
  return decode_payload(std::string_view(bytes).substr(sizeof h), why);
}

std::optional<compiled_program> decode_payload(std::string_view payload, std::string& why) {
  byte_reader r{payload};
  compiled_program p;
  const auto kind = r.value<std::uint8_t>();
  p.target.arch = r.value<std::int32_t>();
  p.nvrtc_version = r.value<std::int32_t>();
  p.name = r.str();
  p.log = r.str();
  const auto n = r.value<std::uint64_t>();
  if (!r.ok || kind > static_cast<std::uint8_t>(output_kind::ltoir) || n > payload.size()) {
    why = "malformed payload";
    return std::nullopt;
  }
  p.target.kind = static_cast<output_kind>(kind);
  for (std::uint64_t i = 0; i < n && r.ok; ++i) {
    std::string expr = r.str();
    std::string lowered = r.str();
    p.lowered_names.emplace_back(std::move(expr), std::move(lowered));
  }
  const std::string image = r.str();
  if (!r.ok || !r.in.empty() || image.empty()) {
    why = "malformed payload";
    return std::nullopt;
  }
  p.image.resize(image.size());
  std::memcpy(p.image.data(), image.data(), image.size());
  return p;
}

}  // namespace detail
}  // namespace cuasync::jit
