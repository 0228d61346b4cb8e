// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's error log (cuLogsRegisterCallback and its unregister, CUDA 12.9): failed calls that a real
// driver would explain (an injected failure, an allocation past the device's memory) hand a line to the callbacks,
// on the failing call's thread, in the driver's format "[time][tid][CUDA][E][entry] text".
#include "entry_support.hpp"

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

namespace sim {
namespace {

struct registration {
  CUlogsCallback fn;
  void* user;
};
struct registry {
  std::mutex m;
  std::vector<registration*> callbacks;  // a handle is the registration's address
};
registry& callbacks() {
  static registry* r = new registry;  // threads may log during exit
  return *r;
}

}  // namespace

void log_failure(const char* entry, const char* text) {
  std::vector<registration> now;
  {
    registry& r = callbacks();
    std::lock_guard lock(r.m);
    for (registration* g : r.callbacks) now.push_back(*g);
  }
  if (now.empty()) return;
  const double ms = now_ms();
  char stamp[64];
  const auto seconds = static_cast<long>(ms / 1000);
  std::snprintf(stamp, sizeof stamp, "[%02ld:%02ld:%02ld.%03ld][%d][CUDA][E][", seconds / 3600 % 24, seconds / 60 % 60,
                seconds % 60, static_cast<long>(ms) % 1000, static_cast<int>(::gettid()));
  std::string line = std::string(stamp) + entry + "] " + text;
  for (const registration& g : now) g.fn(g.user, CU_LOG_LEVEL_ERROR, line.data(), line.size());
}

namespace api {
namespace {

CUresult CUDAAPI LogsRegisterCallback(CUlogsCallback fn, void* user, CUlogsCallbackHandle* out) {
  ENTER(cuLogsRegisterCallback, unknown);
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  registry& r = callbacks();
  std::lock_guard lock(r.m);
  auto* g = new registration{fn, user};
  r.callbacks.push_back(g);
  if (out) *out = reinterpret_cast<CUlogsCallbackHandle>(g);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI LogsUnregisterCallback(CUlogsCallbackHandle h) {
  ENTER(cuLogsUnregisterCallback, unknown);
  registry& r = callbacks();
  std::lock_guard lock(r.m);
  for (auto it = r.callbacks.begin(); it != r.callbacks.end(); ++it)
    if (reinterpret_cast<CUlogsCallbackHandle>(*it) == h) {
      delete *it;
      r.callbacks.erase(it);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

std::span<const entry> log_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuLogsRegisterCallback, LogsRegisterCallback),
      CUASYNC_SIM_ENTRY(cuLogsUnregisterCallback, LogsUnregisterCallback),
  };
  return table;
}

}  // namespace api
}  // namespace sim
