// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/link.hpp>
#include <cuasync/jit/nvrtc.hpp>

// xxHash from libxxhash-dev, compiled in (XXH_INLINE_ALL) rather than linked: the binaries then need no
// libxxhash.so.0 where they run (the GPU machine need not have it). Also gives XXH3_state_t for the stack.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>

namespace cuasync::jit {
namespace {

// Feeds values with length prefixes and field tags, so that no two different inputs hash the same byte stream.
class hasher {
 public:
  hasher() { XXH3_128bits_reset(&state_); }
  void bytes(const void* p, std::size_t n) { XXH3_128bits_update(&state_, p, n); }
  template <class T>
  void value(const T& v) {
    bytes(&v, sizeof v);
  }
  void str(std::string_view s) {
    value(static_cast<std::uint64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void tag(char t) { value(t); }
  cache_key digest() {
    const XXH128_hash_t h = XXH3_128bits_digest(&state_);
    return {h.low64, h.high64};
  }

 private:
  XXH3_state_t state_;
};

}  // namespace

std::string cache_key::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buf;
}

cache_key checksum(const void* data, std::size_t size) noexcept {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return {h.low64, h.high64};
}

namespace {

cache_key key_of(const program& p, const target& t, const compile_options& o, int nvrtc_version,
                 std::string_view nvrtc_library, std::uint32_t format_version,
                 const std::vector<std::string>* toolkit_dirs) {
  hasher h;
  h.value(format_version);
  h.value(nvrtc_version);
  // NVRTC says only major.minor: two builds of one version (a pip wheel's and the toolkit's, a patch release in
  // another folder) are told apart by the library file, as the identity record names it.
  h.str(nvrtc_library);
  h.tag('T');
  h.value(static_cast<std::uint8_t>(t.kind));
  h.value(t.arch);
  h.tag('P');
  h.str(p.name());
  h.str(p.source());
  h.value(static_cast<std::uint64_t>(p.headers().size()));
  for (const auto& [name, contents] : p.headers()) {
    h.str(name);
    h.str(contents);
  }
  h.value(static_cast<std::uint64_t>(p.name_expressions().size()));
  for (const auto& e : p.name_expressions()) h.str(e);
  h.tag('O');
  h.str(o.standard);
  h.value(static_cast<std::uint64_t>(o.defines.size()));
  for (const auto& [name, value] : o.defines) {
    h.str(name);
    h.str(value);
  }
  h.value(static_cast<std::uint64_t>(o.include_paths.size()));
  for (const auto& dir : o.include_paths) h.str(dir);
  h.value(o.toolkit_includes);
  if (o.toolkit_includes)
    for (const auto& dir : toolkit_dirs ? *toolkit_dirs : toolkit_include_dirs()) h.str(dir);
  h.value(o.fast_math);
  h.value(static_cast<int>(o.fmad ? (*o.fmad ? 1 : 0) : -1));
  h.value(o.line_info);
  h.value(o.debug);
  h.value(o.relocatable_device_code);
  h.value(o.max_registers.value_or(-1));
  h.value(o.precompiled_headers);
  h.value(static_cast<std::uint64_t>(o.extra.size()));
  for (const auto& e : o.extra) h.str(e);
  return h.digest();
}

}  // namespace

cache_key make_cache_key(const program& p, const target& t, const compile_options& o, int nvrtc_version,
                         std::uint32_t format_version) {
  return key_of(p, t, o, nvrtc_version, {}, format_version, nullptr);
}

cache_key make_cache_key(const program& p, const target& t, const compile_options& o, const nvrtc_info& nvrtc,
                         std::uint32_t format_version) {
  return key_of(p, t, o, nvrtc.version(), nvrtc.library, format_version,
                o.toolkit_includes ? &toolkit_include_dirs(nvrtc.library) : nullptr);
}

cache_key make_link_key(std::span<const link_part> parts, int arch, const link_options& o, std::string_view name,
                        const nvjitlink_info& nvjitlink, std::uint32_t format_version) {
  hasher h;
  h.tag('L');  // a link: no compile's stream starts with this tag (theirs start with the format version)
  h.value(format_version);
  h.value(nvjitlink.version());
  h.str(nvjitlink.library);
  h.value(arch);
  h.str(name);
  h.value(static_cast<std::uint64_t>(parts.size()));
  for (const auto& part : parts) {
    const compiled_program* p = part.program.get();
    h.value(static_cast<std::uint8_t>(p ? p->target.kind : output_kind::cubin));
    h.value(p ? p->target.arch : -1);
    h.str(p ? std::string_view(reinterpret_cast<const char*>(p->image.data()), p->image.size()) : std::string_view{});
    h.value(static_cast<std::uint64_t>(p ? p->lowered_names.size() : 0));
    if (p)
      for (const auto& [expression, lowered] : p->lowered_names) {
        h.str(expression);
        h.str(lowered);
      }
  }
  h.tag('O');
  h.value(o.optimization_level.value_or(-1));
  h.value(o.line_info);
  h.value(o.debug);
  h.value(o.max_registers.value_or(-1));
  h.value(static_cast<std::uint64_t>(o.extra.size()));
  for (const auto& e : o.extra) h.str(e);
  return h.digest();
}

}  // namespace cuasync::jit
