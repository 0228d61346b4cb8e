// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The version of cuasync: the macros of the headers a program was compiled with, and `cuasync::version()`,
//! the version of the library it is linked with. The macros equal the CMake project's version (`project(cuasync
//! VERSION ...)` in the root CMakeLists.txt): configuring refuses a mismatch. The C ABI's version (`CUASYNC_ABI_MAJOR`,
//! `CUASYNC_ABI_MINOR` in cuasync.h) is another number: it moves only when the C function table or its structs grow.

//! The major version: a change that breaks the C++ API (the C ABI keeps its own major version).
#define CUASYNC_VERSION_MAJOR 1
//! The minor version: added features.
#define CUASYNC_VERSION_MINOR 2
//! The patch version: fixes only.
#define CUASYNC_VERSION_PATCH 0
//! The version as text, "MAJOR.MINOR.PATCH".
#define CUASYNC_VERSION_STRING "1.2.0"
//! The version as one number, MAJOR * 10000 + MINOR * 100 + PATCH (10200 for 1.2.0), for `#if` comparisons.
#define CUASYNC_VERSION (CUASYNC_VERSION_MAJOR * 10000 + CUASYNC_VERSION_MINOR * 100 + CUASYNC_VERSION_PATCH)

namespace cuasync {

//! A library version.
struct version_info {
  int major = 0;             //!< CUASYNC_VERSION_MAJOR of the library
  int minor = 0;             //!< CUASYNC_VERSION_MINOR of the library
  int patch = 0;             //!< CUASYNC_VERSION_PATCH of the library
  const char* text = "";     //!< "MAJOR.MINOR.PATCH" (static storage)
};

//! The version of the cuasync library linked into the program, which may differ from the macros above when a program
//! built against one version's headers runs with another's library. Never throws; needs no driver.
version_info version() noexcept;

}  // namespace cuasync
