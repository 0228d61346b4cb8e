// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The fake NCCL's controls (fake_nccl.cpp), found in the library CUASYNC_LIBNCCL names once collectives/ loaded
// it. Tests that need them skip when another NCCL is loaded.
#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace cuasync::test::fake_nccl {

inline void* library() {
  const char* path = std::getenv("CUASYNC_LIBNCCL");
  void* h = path && *path ? ::dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return h && ::dlsym(h, "fake_nccl_set") ? h : nullptr;
}

//! True when the loaded NCCL is the fake one.
inline bool loaded() { return library() != nullptr; }

template <class F>
F entry(const char* name) {
  void* h = library();
  if (!h) throw std::logic_error("the fake NCCL is not loaded");
  return reinterpret_cast<F>(::dlsym(h, name));
}

//! Sets a knob (coll_fail_at, abort_sleep_ms, ...: fake_nccl.cpp); restarts the collective count.
inline void set(const char* knob, long value) {
  if (!entry<bool (*)(const char*, long)>("fake_nccl_set")(knob, value))
    throw std::logic_error(std::string("the fake NCCL has no knob ") + knob);
}
//! Every knob back to its default, the counters to zero.
inline void reset() { entry<void (*)()>("fake_nccl_reset")(); }
inline long counter(const char* name) { return entry<long (*)(const char*)>("fake_nccl_counter")(name); }
inline int group_depth() { return entry<int (*)()>("fake_nccl_group_depth")(); }

//! Resets the fake on entry and exit of a test case.
struct scope {
  scope() { reset(); }
  ~scope() { reset(); }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
};

}  // namespace cuasync::test::fake_nccl
