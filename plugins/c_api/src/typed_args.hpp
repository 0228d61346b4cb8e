// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal (ABI 1.4): kernel parameter types as cuasync_arg_type codes, and the refusal of a typed launch argument
// that does not fit its parameter. The codes are the driver layer's type_code bits with bit 24 set, so that a
// launch compares them as they come.
#include "objects.hpp"

#include <cstddef>
#include <cstdint>

namespace cuasync::c_api {

//! Bit 24 of every cuasync_arg_type (CUASYNC_ARG_TYPE_NONE has none).
inline constexpr std::uint32_t arg_type_set = 1u << 24;

//! Fills `k.arg_types` and `k.type_names` from the kernel's decoded types (both stay empty for an extern "C" one).
void describe_types(kernel_object& k);

//! Throws CUASYNC_ERROR_INVALID_ARGUMENT unless argument `index` of type `given` (a code that differs from the
//! parameter's) may be passed for it (`compatible`): the message names the parameter, its type and the type given.
void check_arg_type(const kernel_object& k, std::size_t index, std::uint32_t given);

}  // namespace cuasync::c_api
