// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Linking with nvJitLink: parts compiled to LTO-IR (or PTX, or CUBIN) linked into one CUBIN, with link-time
//! optimisation across them. The pattern of frameworks that JIT: a templated kernel compiled once calls a device
//! function it only declares (`extern __device__ float user_op(float);`), and each user fragment that defines it is
//! compiled on its own and linked in. `link()` is uncached, blocking CPU work (tens of ms); `compiler::link` and
//! `compiler::link_programs` put the memory and disk caches in front of it, keyed by the hash of the parts' bytes,
//! the options and the nvJitLink.

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/nvjitlink.hpp>
#include <cuasync/jit/program.hpp>

#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync::jit {

struct compile_result;

//! One input of a link: a compiled program (LTO-IR, PTX or CUBIN), shared, so a part compiled once is linked into
//! any number of links without a copy. Its lowered names are carried into the linked result.
struct link_part {
  std::shared_ptr<const compiled_program> program;

  link_part(std::shared_ptr<const compiled_program> p) noexcept : program(std::move(p)) {}  // NOLINT: implicit
  link_part(const compile_result& r) noexcept;  // NOLINT: implicit
  //! Bytes made elsewhere (an LTO-IR file of `nvcc -dlto`, a CUBIN): `t` says what they are.
  static link_part from_image(std::string name, target t, std::span<const std::byte> image);
};

//! How to link. Plain data; every field is part of the link's cache key.
struct link_options {
  std::optional<int> optimization_level;  //!< `-O<n>`, 0 to 3 (nvJitLink's default: 3)
  bool line_info = false;                 //!< `-lineinfo`
  bool debug = false;                     //!< `-g`
  std::optional<int> max_registers;       //!< `-maxrregcount=N`
  //! Raw nvJitLink options, passed last. `-arch` and `-lto` are refused: the link's architecture and its parts
  //! choose those.
  std::vector<std::string> extra;

  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for a level outside 0..3, a non-positive register count or a
  //! refused `extra` option.
  void check(std::source_location where = std::source_location::current()) const;
  //! nvJitLink's option list for `sm_<arch>`; `lto` adds `-lto` (needed when a part is LTO-IR). @throws as `check`.
  std::vector<std::string> arguments(int arch, bool lto,
                                     std::source_location where = std::source_location::current()) const;
  friend bool operator==(const link_options&, const link_options&) = default;
};

//! A failed link. `what()` names the link, its parts and the first line of nvJitLink's error log; `log()` holds the
//! whole log (an undefined symbol names the function a part declared but no part defined).
class link_error : public cuda_error {
 public:
  link_error(int result, std::string link_name, std::vector<std::string> options, std::string log,
             std::string what, std::source_location where = std::source_location::current());
  const std::string& link_name() const noexcept { return link_name_; }
  const std::vector<std::string>& options() const noexcept { return options_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string link_name_;
  std::vector<std::string> options_;
  std::string log_;
};

//! Links `parts` into one CUBIN for `sm_<arch>` with nvJitLink (blocking; no cache). The result's `target` is
//! CUBIN `sm_<arch>`, its `lowered_names` those of every part (in part order), its `log` nvJitLink's info log and
//! its `nvrtc_version` the version of the nvJitLink that linked it. `name` names it in messages and the caches
//! (empty: the parts' names joined by '+').
//! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for no parts, an empty part, a part for a newer architecture than
//! `arch` (or a CUBIN for another one) and bad options; nvjitlink_not_found_error; link_error.
compiled_program link(std::span<const link_part> parts, int arch, const link_options& o = {}, std::string name = {},
                      std::source_location where = std::source_location::current());

//! The name `link` gives when none is given: the parts' names joined by '+'.
std::string default_link_name(std::span<const link_part> parts);

//! The cache key of linking `parts` for `sm_<arch>` with `o` by `nvjitlink` under `name`: a hash of every part's
//! kind, architecture, bytes and lowered names, the options, the name and nvJitLink's version and path. Never equal
//! to a compile's key (another domain tag). Costs one XXH3 pass over the parts' bytes.
cache_key make_link_key(std::span<const link_part> parts, int arch, const link_options& o, std::string_view name,
                        const nvjitlink_info& nvjitlink, std::uint32_t format_version = cache_format_version);

}  // namespace cuasync::jit
