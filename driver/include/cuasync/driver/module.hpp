// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Modules: code loaded into a context from CUBIN, PTX or fatbin bytes or a file. PTX is compiled by the
//! driver's JIT at load time (up to ~110 ms); a PTX that fails to JIT reports the driver's JIT log.

#include <cuasync/driver/kernel.hpp>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace cuasync {

namespace detail {
struct module_state;
}

//! The format of a module image, recognised from its first bytes.
enum class image_format { cubin, fatbin, ptx, unknown };
//! Recognises an image's format (ELF → cubin, fatbin magic → fatbin, text with `.version` → PTX).
image_format detect_image_format(std::span<const std::byte> image) noexcept;
const char* to_string(image_format f) noexcept;

//! A module this object does not own. Kernel look-ups are cached in the owning `module`.
class module_ref {
 public:
  module_ref() = default;
  CUmodule get() const noexcept;
  context_ref context() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

  //! The kernel named `name`: an `extern "C"` name, a mangled name, or a name expression registered with
  //! `add_name_alias` (e.g. "saxpy<float, 256>" from jit/). Looked up once, then cached; thread-safe.
  //! @throws cuda_error(CUDA_ERROR_NOT_FOUND) naming the kernel and the module.
  kernel_ref kernel(std::string_view name, std::source_location where = std::source_location::current()) const;
  //! Makes `kernel(expression)` find the kernel whose symbol is `lowered_name` (NVRTC name expressions).
  //! @throws cuda_error for an empty (or moved-from) module
  void add_name_alias(std::string expression, std::string lowered_name,
                      std::source_location where = std::source_location::current()) const;
  //! The module's label (file name, or the name it was loaded with), for messages.
  const std::string& label() const noexcept;

 protected:
  explicit module_ref(detail::module_state* s) noexcept : state_(s) {}
  detail::module_state* state_ = nullptr;
};

//! An owned, loaded module. Move-only; unloading invalidates its `kernel_ref`s.
class module : public module_ref {
 public:
  module() = default;
  //! Loads an image (CUBIN, fatbin or PTX, detected from its bytes) into `ctx`. `label` names it in errors.
  //! @throws cuda_error naming the format and size; for PTX, with the JIT's error log.
  static module load(context_ref ctx, std::span<const std::byte> image, std::string label = "<memory>",
                     std::source_location where = std::source_location::current());
  static module load(context_ref ctx, std::string_view ptx_or_image, std::string label = "<memory>",
                     std::source_location where = std::source_location::current()) {
    return load(ctx, std::as_bytes(std::span(ptx_or_image.data(), ptx_or_image.size())), std::move(label), where);
  }
  //! Loads the file at `path`. @throws cuda_error (also when the file cannot be read).
  static module load_file(context_ref ctx, const std::filesystem::path& path,
                          std::source_location where = std::source_location::current());

  module(module&& o) noexcept;
  module& operator=(module&& o) noexcept;
  module(const module&) = delete;
  module& operator=(const module&) = delete;
  ~module();

  //! Forgets the module without unloading it, for one whose context is gone (it went with its context; unloading
  //! would touch a dead one). Its kernels must not be used after.
  void abandon() noexcept;

 private:
  explicit module(detail::module_state* s) noexcept : module_ref(s) {}
};

}  // namespace cuasync
