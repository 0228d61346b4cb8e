// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The Driver API entry points of the simulated driver, handed out by cuGetProcAddress_v2 (the only symbol cuasync's
// loader looks up), each at the ABI of the version cuasync requests (driver/detail/driver_api.hpp). The entry points
// themselves are in entry_context.cpp, entry_stream.cpp, entry_capture.cpp, entry_conditional.cpp,
// entry_graph_update.cpp, entry_memory.cpp, entry_module.cpp and entry_logs.cpp; the control functions of control.h
// are here.
#include "entry_support.hpp"

#include <cstdio>
#include <cstring>
#include <string>

using namespace sim;
using namespace sim::api;

namespace {

// What the simulation does not model: cuasync's code answers the driver's "not supported" as it would any error.
CUresult CUDAAPI NotSupported() { return CUDA_ERROR_NOT_SUPPORTED; }

const char* const unsupported[] = {// IPC needs a second process and a real driver; the simulation has neither.
                                   "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle",
                                   "cuIpcGetEventHandle", "cuIpcOpenEventHandle",
                                   // Nor is virtual memory management (its attributes read 0: no VMM, no fd handles).
                                   "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease",
                                   "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
                                   "cuMemSetAccess", "cuMemExportToShareableHandle",
                                   "cuMemImportFromShareableHandle"};

}  // namespace

extern "C" CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t,
                                                CUdriverProcAddressQueryResult* status) {
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  if (!std::strcmp(symbol, "cuStreamGetCaptureInfo")) {  // the one entry point here whose ABI depends on the version
    *pfn = capture_info_entry(cuda_version);
    return CUDA_SUCCESS;
  }
  for (const auto fragment :
       {context_entries, stream_entries, capture_entries, conditional_entries, graph_update_entries, memory_entries,
        module_entries, log_entries})
    for (const entry& e : fragment())
      if (!std::strcmp(symbol, e.name)) {
        *pfn = e.fn;
        return CUDA_SUCCESS;
      }
  for (const char* u : unsupported)
    if (!std::strcmp(symbol, u)) {
      *pfn = reinterpret_cast<void*>(&NotSupported);
      return CUDA_SUCCESS;
    }
  *pfn = nullptr;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

// ---- control (control.h) ----

extern "C" void fake_cuda_set_phase(int phase) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  d.phase = phase < 0 ? 0 : phase > 1 ? 2 : phase;  // phase 2: every round after the first
}

extern "C" void fake_cuda_drain(void) {
  device_model& d = model();
  std::unique_lock lock(d.m);
  wait_all_done(d, lock);
}

extern "C" long fake_cuda_calls_on_this_thread(const char* entry) { return sim::calls_here(entry); }

extern "C" int fake_cuda_report(char* out, int size) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  std::string s = "injected=" + d.inject.entry + ":" + std::to_string(d.inject.nth) +
                  " fired=" + (d.inject.fired ? "1" : "0") + "\nlive";
  for (int k = 0; k < kinds; ++k) s += std::string(" ") + kind_names[k] + "=" + std::to_string(d.live[k]);
  s += "\nrefused";
  for (int k = 0; k < kinds; ++k) s += std::string(" ") + kind_names[k] + "=" + std::to_string(d.refused[k]);
  s += "\ncalls";
  for (auto& [name, n] : d.calls[1]) s += " " + name + "=" + std::to_string(n);
  s += "\n";
  if (out && size > 0) std::snprintf(out, static_cast<std::size_t>(size), "%s", s.c_str());
  return static_cast<int>(s.size()) + 1;
}
