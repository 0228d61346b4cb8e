// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* cuasync.h after a dlpack.h (DLPack 1.x): no name clashes, and its layout check against DLPack's structs compiles
 * (this file is only compiled, as C11 with -pedantic -Werror). No dlpack.h is installed on the build machines, so
 * the declarations below are DLPack 1.1's, as its dlpack.h spells them (the parts cuasync.h checks). */
#include <stddef.h>
#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#include <cuasync/cuasync.h>

#include <string.h>

int cuasync_header_dlpack_probe(void);
int cuasync_header_dlpack_probe(void) {
  DLManagedTensorVersioned theirs = {{1, 1}, 0, 0, 0, {0, {kDLCUDA, 0}, 1, {2, 32, 1}, 0, 0, 0}};
  cuasync_dl_managed_tensor_versioned ours;
  memcpy(&ours, &theirs, sizeof ours); /* the same bytes mean the same fields */
  return ours.dl_tensor.device.device_type == CUASYNC_DL_CUDA && ours.dl_tensor.dtype.bits == 32 ? 0 : 1;
}
