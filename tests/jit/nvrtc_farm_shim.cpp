// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A test-only NVRTC for the compile farm's failure tests: every entry point forwards to the real NVRTC
// (libnvrtc.so.13, then .12), except that nvrtcCreateProgram, for a source holding a marker, makes the worker process
// fail as NVRTC might: CUASYNC_FARM_TEST_ABORT aborts, CUASYNC_FARM_TEST_EXIT exits with status 7,
// CUASYNC_FARM_TEST_HANG sleeps for an hour. Each says so on stderr first. Loaded through CUASYNC_LIBNVRTC.
#include <nvrtc.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void* real() {
  static void* lib = [] {
    void* l = ::dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    return l ? l : ::dlopen("libnvrtc.so.12", RTLD_NOW | RTLD_LOCAL);
  }();
  return lib;
}

template <class F>
F* entry(const char* name) {
  void* lib = real();
  void* f = lib ? ::dlsym(lib, name) : nullptr;
  if (!f) {
    std::fprintf(stderr, "nvrtc farm shim: no real %s\n", name);
    std::abort();
  }
  return reinterpret_cast<F*>(f);
}

#define CUASYNC_SHIM_CALL(name, ...)                           \
  static auto* f = entry<decltype(::name)>(#name);            \
  return f(__VA_ARGS__)

}  // namespace

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult r) { CUASYNC_SHIM_CALL(nvrtcGetErrorString, r); }
nvrtcResult nvrtcVersion(int* major, int* minor) { CUASYNC_SHIM_CALL(nvrtcVersion, major, minor); }
nvrtcResult nvrtcGetNumSupportedArchs(int* n) { CUASYNC_SHIM_CALL(nvrtcGetNumSupportedArchs, n); }
nvrtcResult nvrtcGetSupportedArchs(int* archs) { CUASYNC_SHIM_CALL(nvrtcGetSupportedArchs, archs); }
nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int n, const char* const* headers,
                               const char* const* include_names) {
  if (src && std::strstr(src, "CUASYNC_FARM_TEST_ABORT")) {
    std::fprintf(stderr, "nvrtc farm shim: aborting for '%s'\n", name ? name : "?");
    std::abort();
  }
  if (src && std::strstr(src, "CUASYNC_FARM_TEST_EXIT")) {
    std::fprintf(stderr, "nvrtc farm shim: exiting with status 7 for '%s'\n", name ? name : "?");
    std::fflush(stderr);
    ::_exit(7);
  }
  if (src && std::strstr(src, "CUASYNC_FARM_TEST_HANG")) {
    std::fprintf(stderr, "nvrtc farm shim: hanging for '%s'\n", name ? name : "?");
    ::sleep(3600);
  }
  CUASYNC_SHIM_CALL(nvrtcCreateProgram, prog, src, name, n, headers, include_names);
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) { CUASYNC_SHIM_CALL(nvrtcDestroyProgram, prog); }
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char* const* options) {
  CUASYNC_SHIM_CALL(nvrtcCompileProgram, prog, n, options);
}
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* size) { CUASYNC_SHIM_CALL(nvrtcGetPTXSize, prog, size); }
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx) { CUASYNC_SHIM_CALL(nvrtcGetPTX, prog, ptx); }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) { CUASYNC_SHIM_CALL(nvrtcGetCUBINSize, prog, size); }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) { CUASYNC_SHIM_CALL(nvrtcGetCUBIN, prog, cubin); }
nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t* size) { CUASYNC_SHIM_CALL(nvrtcGetLTOIRSize, prog, size); }
nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char* ir) { CUASYNC_SHIM_CALL(nvrtcGetLTOIR, prog, ir); }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  CUASYNC_SHIM_CALL(nvrtcGetProgramLogSize, prog, size);
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) { CUASYNC_SHIM_CALL(nvrtcGetProgramLog, prog, log); }
nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char* expr) {
  CUASYNC_SHIM_CALL(nvrtcAddNameExpression, prog, expr);
}
nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char* expr, const char** lowered) {
  CUASYNC_SHIM_CALL(nvrtcGetLoweredName, prog, expr, lowered);
}

}  // extern "C"
