// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The Driver API entry points, fetched once from the loaded libcuda with `cuGetProcAddress_v2`.
//! Each entry is requested at the CUDA version whose ABI its `PFN_<name>_v<version>` typedef describes, so a newer
//! driver never hands back a function with another signature.

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <source_location>

namespace cuasync::detail {

// (name, version): the version selects the ABI; every one of them exists in drivers since CUDA 12.4.
#define CUASYNC_DRIVER_ENTRY_POINTS(X)                                                                      \
  X(cuGetErrorName, 6000) X(cuGetErrorString, 6000) X(cuDriverGetVersion, 2020)                               \
  X(cuDeviceGet, 2000) X(cuDeviceGetCount, 2000) X(cuDeviceGetName, 2000) X(cuDeviceGetUuid, 11040)           \
  X(cuDeviceTotalMem, 3020) X(cuDeviceGetAttribute, 2000) X(cuDeviceGetPCIBusId, 4010)                        \
  X(cuDeviceGetDefaultMemPool, 11020) X(cuDeviceCanAccessPeer, 4000) X(cuCtxEnablePeerAccess, 4000)           \
  X(cuDevicePrimaryCtxRetain, 7000) X(cuDevicePrimaryCtxRelease, 11000) X(cuCtxGetCurrent, 4000)              \
  X(cuCtxSetCurrent, 4000) X(cuCtxPushCurrent, 4000) X(cuCtxPopCurrent, 4000) X(cuCtxGetDevice, 2000)         \
  X(cuCtxSynchronize, 2000) X(cuCtxGetStreamPriorityRange, 5050) X(cuCtxGetId, 12000)                  \
  X(cuCtxCreate, 3020) X(cuCtxDestroy, 4000)                                             \
  X(cuStreamCreateWithPriority, 5050) X(cuStreamDestroy, 4000) X(cuStreamWaitEvent, 3020)                     \
  X(cuStreamQuery, 2000) X(cuStreamSynchronize, 2000) X(cuLaunchHostFunc, 10000) X(cuStreamGetPriority, 5050) \
  X(cuStreamGetFlags, 5050) X(cuStreamGetCtx, 9020) X(cuStreamGetId, 12000)                                  \
  X(cuStreamIsCapturing, 10000) X(cuThreadExchangeStreamCaptureMode, 10010)                                 \
  X(cuStreamWriteValue64, 11070) X(cuStreamWriteValue32, 11070) X(cuStreamWaitValue32, 11070)                \
  X(cuEventCreate, 2000) X(cuEventDestroy, 4000) X(cuEventRecord, 2000) X(cuEventQuery, 2000)                 \
  X(cuEventRecordWithFlags, 11010)                                                                           \
  X(cuEventSynchronize, 2000) X(cuEventElapsedTime, 2000)                                                    \
  X(cuMemAlloc, 3020) X(cuMemFree, 3020) X(cuMemHostAlloc, 2020) X(cuMemFreeHost, 2000)                       \
  X(cuMemHostRegister, 6050) X(cuMemHostUnregister, 4000) X(cuMemHostGetDevicePointer, 3020)                  \
  X(cuMemAllocManaged, 6000) X(cuMemPrefetchAsync, 12020) X(cuMemAdvise, 12020) X(cuMemGetInfo, 3020)         \
  X(cuMemPoolCreate, 11020) X(cuMemPoolDestroy, 11020) X(cuMemPoolSetAttribute, 11020)                        \
  X(cuMemPoolGetAttribute, 11020) X(cuMemPoolTrimTo, 11020) X(cuMemPoolSetAccess, 11020) X(cuMemAllocFromPoolAsync, 11020)                 \
  X(cuMemAllocAsync, 11020) X(cuMemFreeAsync, 11020) X(cuMemsetD8Async, 3020) X(cuMemsetD32Async, 3020)      \
  X(cuMemcpyAsync, 4000) X(cuMemcpyPeerAsync, 4000) X(cuMemcpyHtoDAsync, 3020) X(cuMemcpyDtoHAsync, 3020)     \
  X(cuPointerGetAttribute, 4000) X(cuIpcGetMemHandle, 4010) X(cuIpcOpenMemHandle, 11000)                     \
  X(cuIpcCloseMemHandle, 4010) X(cuIpcGetEventHandle, 4010) X(cuIpcOpenEventHandle, 4010)                    \
  X(cuPointerGetAttributes, 7000)                                                                            \
  X(cuMemGetAllocationGranularity, 10020) X(cuMemCreate, 10020) X(cuMemRelease, 10020)                        \
  X(cuMemAddressReserve, 10020) X(cuMemAddressFree, 10020) X(cuMemMap, 10020) X(cuMemUnmap, 10020)           \
  X(cuMemSetAccess, 10020) X(cuMemExportToShareableHandle, 10020) X(cuMemImportFromShareableHandle, 10020)    \
  X(cuModuleLoadDataEx, 2010) X(cuModuleUnload, 2000) X(cuModuleGetFunction, 2000)                            \
  X(cuLibraryLoadData, 12000) X(cuLibraryUnload, 12000) X(cuLibraryGetKernel, 12000) X(cuKernelGetFunction, 12000) \
  X(cuFuncGetAttribute, 2020) X(cuFuncSetAttribute, 9000) X(cuFuncGetParamInfo, 12040)                        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) X(cuLaunchKernelEx, 11060) X(cuLaunchKernel, 4000)    \
  X(cuStreamBeginCapture, 10010) X(cuStreamEndCapture, 10000) X(cuGraphInstantiateWithFlags, 11040)          \
  X(cuGraphLaunch, 10000) X(cuGraphExecDestroy, 10000) X(cuGraphDestroy, 10000)                              \
  X(cuGraphExecKernelNodeSetParams, 12000) X(cuGraphGetNodes, 10000) X(cuGraphNodeGetType, 10000)            \
  X(cuGraphKernelNodeGetParams, 12000) X(cuGraphNodeSetEnabled, 11060) X(cuGraphNodeGetEnabled, 11060)            \
  X(cuGraphCreate, 10000) X(cuGraphAddNode, 12030) X(cuGraphConditionalHandleCreate, 12030)                      \
  X(cuStreamBeginCaptureToGraph, 12030) X(cuStreamGetCaptureInfo, 12030) X(cuGraphMemsetNodeGetParams, 10000)   \
  X(cuGraphExecMemsetNodeSetParams, 10020)

// (name, version) of entry points newer than CUDA 12.4, or that the simulated driver lacks: null where the driver has
// none. Each use checks for null and falls back or says what is missing.
#define CUASYNC_DRIVER_OPTIONAL_ENTRY_POINTS(X)                                                              \
  X(cuLogsRegisterCallback, 12090) X(cuGreenCtxCreate, 12040) X(cuGreenCtxDestroy, 12040)                     \
  X(cuDeviceGetDevResource, 12040) X(cuDevSmResourceSplitByCount, 12040) X(cuDevResourceGenerateDesc, 12040) \
  X(cuCtxFromGreenCtx, 12040)

//! Every entry point, resolved (the optional ones null where the driver lacks them). Obtained from `driver()`.
struct driver_entry_points {
#define CUASYNC_DECLARE_ENTRY(name, version) PFN_##name##_v##version name = nullptr;
  CUASYNC_DRIVER_ENTRY_POINTS(CUASYNC_DECLARE_ENTRY)
  CUASYNC_DRIVER_OPTIONAL_ENTRY_POINTS(CUASYNC_DECLARE_ENTRY)
#undef CUASYNC_DECLARE_ENTRY
  int driver_version = 0;   //!< `cuDriverGetVersion`, e.g. 13000
  const char* library = ""; //!< the path that was opened
};

//! Loads libcuda (thread-safe, once per process; a failure is remembered and thrown again).
const driver_entry_points& load_driver();
//! As `load_driver`, with a failure thrown (again) naming `where`, the caller's line, instead of the loader's.
const driver_entry_points& load_driver(std::source_location where);
extern std::atomic<const driver_entry_points*> loaded_driver;

//! The entry points: loads libcuda on first use, calls `cuInit(0)` and resolves every entry point.
//! After the first call this is one atomic load.
//! @throws driver_not_found_error, stub_library_error, no_device_error, driver_too_old_error
inline const driver_entry_points& driver() {
  if (auto* d = loaded_driver.load(std::memory_order_acquire)) [[likely]] return *d;
  return load_driver();
}
//! The same for the calls a program makes first (`device::count`, `context_ref::adopt`, ...): a failed load names
//! the caller's line.
inline const driver_entry_points& driver(std::source_location where) {
  if (auto* d = loaded_driver.load(std::memory_order_acquire)) [[likely]] return *d;
  return load_driver(where);
}

//! The entry points if the driver is already loaded, else nullptr. Never loads; never throws.
inline const driver_entry_points* driver_if_loaded() noexcept { return loaded_driver.load(std::memory_order_acquire); }

}  // namespace cuasync::detail
