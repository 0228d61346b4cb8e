// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// typed_args.hpp: the codes a launch compares, and the slow path of a code that differs.
#include "typed_args.hpp"

#include "abi.hpp"

#include <cuasync/driver/kernel_signature.hpp>

#include <cstdio>
#include <string>

namespace cuasync::c_api {

void describe_types(kernel_object& k) {
  const auto& types = k.kernel.param_types();
  const auto& names = k.kernel.param_type_names();
  k.arg_types.reserve(types.size());
  k.type_names.reserve(names.size());
  for (const type_code t : types) k.arg_types.push_back(t.bits | arg_type_set);
  for (const std::string& n : names) k.type_names.push_back(n.c_str());
}

void check_arg_type(const kernel_object& k, std::size_t index, std::uint32_t given) {
  const auto refuse = [&](const std::string& what) {
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, "launch: kernel '" + k.kernel.name() + "' parameter " +
                                             std::to_string(index) + " is " + k.type_names[index] + " but argument " +
                                             std::to_string(index) + " is " + what);
  };
  // A code is bit 24 and three bytes: a class this library knows, a size, a pointer depth.
  if ((given & 0xff000000u) != arg_type_set || (given & 0xffu) > CUASYNC_ARG_CLASS_FLOAT) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(given));
    refuse(std::string("of type code ") + hex + ", which is no cuasync_arg_type (make codes with CUASYNC_ARG_TYPE)");
  }
  const type_code argument{given & ~arg_type_set};
  if (!compatible(type_code{k.arg_types[index] & ~arg_type_set}, argument)) refuse(argument.describe());
}

}  // namespace cuasync::c_api
