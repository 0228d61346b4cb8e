// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Kernel parameter types from a C++ kernel's mangled name (Itanium C++ ABI: `_Z5saxpyIfLi256EEvT_PKS0_PS0_i` is
//! `saxpy<float, 256>(float, const float*, float*, int)`), so that launches check each argument's type, not only its
//! size: a `double*` where a `float*` is expected is refused, naming the parameter. `extern "C"` kernels have no
//! types in their names and keep the size checks. Types are compared as `type_code`s, computed for C++ arguments at
//! compile time: a launch pays one compare per argument.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cuasync {

//! What a type is, as launches compare kernel parameters and arguments.
enum class type_class : std::uint8_t {
  opaque = 0,  //!< a class, enum or anything not decoded: only its size is checked
  void_type,   //!< `void` (as a pointee: `void*` takes any pointer)
  boolean,
  integer,     //!< any integer; signedness and spelling (`long`, `long long`) are not told apart
  floating,
};

//! A type reduced to what a launch compares: its class, its size in bytes (of the pointee for a pointer) and how many
//! pointers deep it is. cv-qualifiers are ignored. Packed in 32 bits so that matching costs one compare.
struct type_code {
  std::uint32_t bits = 0;

  static constexpr type_code make(type_class c, unsigned size, unsigned pointers = 0) noexcept {
    return {static_cast<std::uint32_t>(c) | (size & 0xffu) << 8 | (pointers & 0xffu) << 16};
  }
  constexpr type_class kind() const noexcept { return static_cast<type_class>(bits & 0xffu); }
  constexpr unsigned size() const noexcept { return bits >> 8 & 0xffu; }
  constexpr unsigned pointers() const noexcept { return bits >> 16 & 0xffu; }
  //! The same type behind one more pointer.
  constexpr type_code pointer_to() const noexcept { return {bits + (1u << 16)}; }
  friend constexpr bool operator==(type_code, type_code) = default;
  //! A spelling for messages: "float*", "double", "int" (any 4-byte integer), "an opaque value".
  std::string describe() const;
};

//! The code of a C++ argument type, at compile time.
template <class T>
constexpr type_code type_code_of() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>)
    return type_code_of<std::remove_pointer_t<U>>().pointer_to();
  else if constexpr (std::is_void_v<U>)
    return type_code::make(type_class::void_type, 0);
  else if constexpr (std::is_same_v<U, bool>)
    return type_code::make(type_class::boolean, 1);
  else if constexpr (std::is_integral_v<U>)
    return type_code::make(type_class::integer, sizeof(U));
  else if constexpr (std::is_floating_point_v<U>)
    return type_code::make(type_class::floating, sizeof(U));
  else
    return type_code::make(type_class::opaque, 0);
}

//! Whether an argument of type `argument` may be passed for a parameter of type `parameter`: equal codes; an opaque
//! type on either side at the same pointer depth (its size is checked instead); `void*` on either side of two
//! pointers; an 8-byte integer (`CUdeviceptr`) or opaque value for a pointer, and a pointer for an 8-byte integer
//! or opaque parameter. Everything else (an `int` for a `float`, a `double*` for a `float*`) is refused.
bool compatible(type_code parameter, type_code argument) noexcept;

//! One decoded parameter: its code and its C++ spelling ("const float*").
struct kernel_parameter_type {
  type_code code;
  std::string spelling;
};

//! The parameter types of the function whose mangled name is `mangled` (`_Z...`), or nothing when the name is not
//! mangled (`extern "C"`) or uses what this decoder does not read (function or member pointers, arrays, template
//! expressions and packs, references). Never throws for any input.
std::optional<std::vector<kernel_parameter_type>> decode_kernel_parameters(std::string_view mangled) noexcept;

}  // namespace cuasync
