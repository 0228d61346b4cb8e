// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// For bench/ programs that drive the C ABI as a framework would: libcuasync.so loaded with dlopen, its function
// table, and a check that exits with the error's message. Header-only; include <cuasync/cuasync.h> first.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cuasync::bench {

//! The loaded library's function table (set by `load_c_abi`).
inline const cuasync_api*& c_abi() {
  static const cuasync_api* api = nullptr;
  return api;
}

//! Exits with `what` and the error's message when `e` is an error.
inline void must(cuasync_error* e, const char* what) {
  if (!e) return;
  cuasync_error_info_args info{};
  info.struct_size = sizeof info;
  info.error = e;
  c_abi()->error_info(&info);
  std::fprintf(stderr, "%s: %s\n", what, info.message);
  std::exit(1);
}

//! Loads the library: `path`, else beside this build (bench/<x>/../../plugins/libcuasync.so), else `built_at`.
//! Returns false (with the reason printed) when it cannot be loaded.
inline bool load_c_abi(std::string path, const char* built_at) {
  if (path.empty()) {
    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    const std::string exe = n > 0 ? std::string(self, n) : "";
    path = exe.substr(0, exe.rfind('/')) + "/../../plugins/libcuasync.so";
    if (::access(path.c_str(), R_OK) != 0) path = built_at;
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return false;
  }
  auto get_api = reinterpret_cast<cuasync_get_api_fn>(dlsym(lib, "cuasync_get_api"));
  must(get_api(CUASYNC_ABI_MAJOR, &c_abi()), "cuasync_get_api");
  return true;
}

}  // namespace cuasync::bench
