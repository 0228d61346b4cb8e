// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `device_span`: a range of device memory (address and size), what copies and memsets take so that their
//! sizes can be checked before anything reaches the GPU.

#include <cuasync/driver/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuasync {

//! A non-owning byte range of device (or managed) memory.
struct device_span {
  CUdeviceptr ptr = 0;
  std::size_t size = 0;

  //! `[offset, offset + count)` of this range. @throws cuda_error(CUDA_ERROR_INVALID_VALUE) when it lies outside.
  device_span subspan(std::size_t offset, std::size_t count,
                      std::source_location where = std::source_location::current()) const {
    if (offset > size || count > size - offset)
      detail::throw_invalid("cuasync::device_span::subspan",
                            "range [" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
                                std::to_string(count) + ") lies outside a device range of " + std::to_string(size) +
                                " bytes",
                            where);
    return {ptr + offset, count};
  }
  //! The address as a typed pointer, for kernel arguments.
  template <class T>
  T* as() const noexcept {
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(ptr));
  }
};

}  // namespace cuasync
