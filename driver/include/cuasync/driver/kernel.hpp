// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `kernel_ref`: a kernel of a loaded module, with its parameter layout (`cuFuncGetParamInfo`) and the device's
//! launch limits read once when it is looked up, so launches check their arguments without extra driver calls.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/kernel_signature.hpp>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace cuasync {

namespace detail {
//! One kernel parameter as the driver lays it out.
struct kernel_param {
  std::size_t offset = 0;
  std::size_t size = 0;
};
//! What a launch checks, looked up once per kernel (off the hot path) and owned by the module.
struct kernel_info {
  CUfunction function = nullptr;
  std::string name;
  //! `name`, kept for the process (trace::flight::intern_name) from the first launch the flight recorder notes: what
  //! its slots point at. Null until then: kernels launched with the recorder off keep no copy.
  mutable std::atomic<const char*> flight_name{nullptr};
  context_ref ctx;
  std::vector<kernel_param> params;
  //! The first 8 parameters' sizes, a byte each (at most 255), as the flight recorder keeps them.
  std::uint64_t flight_param_sizes = 0;
  const device_properties* device = nullptr;  //!< the limits launches are checked against
  int max_threads_per_block = 0;               //!< this kernel's limit (registers may lower it)
  //! The image's code for this kernel waits on the grid it depends on (`griddepcontrol.wait`), so a programmatic
  //! dependent launch of it is safe (`launch_config::dependent_launch`).
  bool waits_on_grid_dependency = false;
  //! Each parameter's type, decoded from a mangled name (`kernel_signature.hpp`); empty for an `extern "C"` kernel
  //! or a name the decoder does not read: then only sizes are checked.
  std::vector<type_code> param_types;
  std::vector<std::string> param_type_names;  //!< their C++ spellings, for messages
};
//! The parameter layout of `f` if it is a kernel of a module cuasync loaded (and has not unloaded), else nullptr:
//! lets code that holds only the CUfunction (a captured graph's kernel node) check arguments without probing the
//! driver past the last parameter (an error compute-sanitizer reports). Valid while the module stays loaded.
const kernel_info* known_kernel(CUfunction f) noexcept;
//! What an empty `kernel_ref` answers: no name, no parameters.
extern const kernel_info empty_kernel_info;
}  // namespace detail

//! A kernel of a loaded module. Valid while the module is loaded. An empty one (default-constructed) answers empty
//! values; launches and the calls that ask the driver refuse it with a `cuda_error`.
class kernel_ref {
 public:
  kernel_ref() = default;
  explicit kernel_ref(const detail::kernel_info* info) noexcept : info_(info) {}

  CUfunction get() const noexcept { return info_ ? info_->function : nullptr; }
  const std::string& name() const noexcept { return or_empty().name; }
  context_ref context() const noexcept { return or_empty().ctx; }
  //! Parameter count and sizes as the driver reports them.
  const std::vector<detail::kernel_param>& params() const noexcept { return or_empty().params; }
  //! True when the module image's code for this kernel waits on the grid it depends on (PTX `griddepcontrol.wait`,
  //! or the instruction it compiles to in a CUBIN for sm_90 to sm_12x): the condition for a programmatic dependent
  //! launch (`launch_config::dependent_launch`). False for an image that does not say (a compressed fatbin entry).
  bool waits_on_grid_dependency() const noexcept { return or_empty().waits_on_grid_dependency; }
  //! Parameter types decoded from the kernel's mangled name; empty when it has none (`extern "C"`).
  const std::vector<type_code>& param_types() const noexcept { return or_empty().param_types; }
  //! Their C++ spellings ("const float*"), as `param_types`.
  const std::vector<std::string>& param_type_names() const noexcept { return or_empty().param_type_names; }
  //! What a launch checks. Only for a non-empty kernel_ref (launches check: `detail::launched_kernel`).
  const detail::kernel_info& info() const noexcept { return *info_; }
  explicit operator bool() const noexcept { return info_ != nullptr; }

  //! `cuFuncGetAttribute`. @throws cuda_error
  int attribute(CUfunction_attribute attr, std::source_location where = std::source_location::current()) const;
  int num_registers(std::source_location where = std::source_location::current()) const {
    return attribute(CU_FUNC_ATTRIBUTE_NUM_REGS, where);
  }
  int max_threads_per_block() const { return or_empty().max_threads_per_block; }
  int static_shared_memory_bytes(std::source_location where = std::source_location::current()) const {
    return attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, where);
  }
  int local_memory_bytes(std::source_location where = std::source_location::current()) const {
    return attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, where);
  }
  int max_dynamic_shared_memory(std::source_location where = std::source_location::current()) const {
    return attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, where);
  }
  //! Allows launches with up to `bytes` of dynamic shared memory (above 48 KiB needs this opt-in).
  //! @throws cuda_error when `bytes` exceeds the device's opt-in limit less the static shared memory.
  void set_max_dynamic_shared_memory(int bytes, std::source_location where = std::source_location::current()) const;
  //! Resident blocks per multiprocessor for a block size (occupancy).
  int max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_bytes = 0,
                                           std::source_location where = std::source_location::current()) const;

 private:
  const detail::kernel_info& or_empty() const noexcept { return info_ ? *info_ : detail::empty_kernel_info; }
  const detail::kernel_info* info_ = nullptr;
};

}  // namespace cuasync
