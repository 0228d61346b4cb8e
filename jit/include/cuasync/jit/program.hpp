// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! A CUDA C++ program to compile with NVRTC (source, name, in-memory headers, name expressions for templates)
//! and what a compile produces (the image, the lowered names, the log). `compile()` is uncached, blocking CPU work
//! (10–100 ms for a small kernel, seconds for header-heavy ones): use `jit::compiler` for the caches.

#include <cuasync/jit/options.hpp>
#include <cuasync/jit/target.hpp>

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuasync::jit {

//! The source of a program: plain data, cheap to keep around and to hash.
class program {
 public:
  //! `name` is what NVRTC prints in front of line numbers ("saxpy.cu"); it need not be a file.
  program(std::string name, std::string source) : name_(std::move(name)), source_(std::move(source)) {}

  //! Makes `#include "include_name"` (or `<include_name>`) find `contents` without touching the disk.
  program& add_header(std::string include_name, std::string contents) {
    headers_.insert_or_assign(std::move(include_name), std::move(contents));
    return *this;
  }
  //! Makes `#include <cuasync/graph_conditional.cuh>` declare, for device code, `cudaGraphConditionalHandle` and
  //! `cudaGraphSetConditional(handle, value)`, with which a kernel sets the value of a graph's conditional node
  //! (`runtime::graph::create_conditional`). NVRTC declares neither by itself; the call is a builtin that the compiler
  //! resolves (no relocatable device code, no device runtime library to link). The header is one of the program's
  //! in-memory headers (`graph_conditional_header_name`), so it is part of the cache key like any other.
  program& add_graph_conditional_header();
  //! Asks for the lowered (mangled) name of a `__global__` function or template instantiation, e.g.
  //! `"saxpy<float, 256>"` or `"ns::reduce<double>"`; NVRTC instantiates the template. Duplicates are ignored.
  program& add_name_expression(std::string expression, std::source_location where = std::source_location::current());

  const std::string& name() const noexcept { return name_; }
  const std::string& source() const noexcept { return source_; }
  //! In-memory headers by include name (ordered, so hashing is deterministic).
  const std::map<std::string, std::string>& headers() const noexcept { return headers_; }
  const std::vector<std::string>& name_expressions() const noexcept { return name_expressions_; }

 private:
  std::string name_;
  std::string source_;
  std::map<std::string, std::string> headers_;
  std::vector<std::string> name_expressions_;
};

//! The include name `program::add_graph_conditional_header` provides.
inline constexpr const char* graph_conditional_header_name = "cuasync/graph_conditional.cuh";

//! The result of a compile: the code and the lowered names that belong to it (stored with it in the caches).
struct compiled_program {
  std::string name;                 //!< the program's name
  jit::target target;               //!< what `image` is
  std::vector<std::byte> image;     //!< CUBIN (ELF), PTX text (no trailing NUL) or LTO-IR
  //! (name expression, lowered name) pairs in the order the expressions were added.
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::string log;                  //!< NVRTC's log (warnings); empty when there were none
  int nvrtc_version = 0;            //!< the NVRTC that compiled it (13000)

  std::span<const std::byte> bytes() const noexcept { return image; }
  //! The image as characters (PTX is text).
  std::string_view text() const noexcept { return {reinterpret_cast<const char*>(image.data()), image.size()}; }
  //! The lowered name of `expression` (as given to `add_name_expression`).
  //! @throws cuda_error(NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) when it was not registered, listing those that were.
  const std::string& lowered_name(std::string_view expression,
                                  std::source_location where = std::source_location::current()) const;
};

//! Compiles `p` for `t` with NVRTC (blocking; no cache). `pch_dir` is where precompiled headers go when
//! `o.precompiled_headers` is set.
//! @throws compile_error with the log and the first error's source line; nvrtc_not_found_error; cuda_error for bad
//! options (`NVRTC_ERROR_INVALID_OPTION`, also as a compile_error with NVRTC's message).
compiled_program compile(const program& p, const target& t, const compile_options& o = {},
                         const std::string& pch_dir = {}, std::source_location where = std::source_location::current());

namespace detail {
//! The first error of an NVRTC log followed by the offending line of `p` (or of one of its in-memory headers):
//! `saxpy.cu(5): error: identifier "foo" is undefined` / `    5 |   y[i] = foo * x[i];`. Empty for an empty log.
std::string first_error(std::string_view log, const program& p);
//! `compile` with NVRTC's argument list already made (`compile_options::arguments`): what a compile farm's worker
//! runs with the list its parent computed. @throws as `compile`.
compiled_program compile_with_arguments(const program& p, const target& t, const std::vector<std::string>& args,
                                        std::source_location where);
}  // namespace detail

}  // namespace cuasync::jit
