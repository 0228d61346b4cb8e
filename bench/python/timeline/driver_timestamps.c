// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A libcuda stand-in that timestamps a few driver calls (CLOCK_MONOTONIC, the clock of Python's perf_counter) on
// entry and exit and forwards all of them to libcuda.so.1, for the host timeline of one operation (await_timeline.py).
// Build: gcc -O2 -shared -fPIC -o libdriver_timestamps.so driver_timestamps.c -ldl; run with CUASYNC_LIBCUDA set to
// it. Each note costs a clock read and a gettid syscall: the calls it wraps look ~0.3 us slower than they are.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef int CUresult;
typedef CUresult (*gpa_t)(const char*, void**, int, uint64_t, void*);
static gpa_t real_gpa;
#define N 65536
static double t_[N]; static int id_[N]; static int tid_[N]; static volatile unsigned n_;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void note(int id) { unsigned i = __atomic_fetch_add(&n_, 1, __ATOMIC_RELAXED); if (i < N) { t_[i] = now(); id_[i] = id; tid_[i] = (int)syscall(SYS_gettid); } }
int shim_read(double* t, int* id, int* tid, int max) { unsigned n = n_ < N ? n_ : N; if (n > (unsigned)max) n = max; memcpy(t, t_, n * 8); memcpy(id, id_, n * 4); memcpy(tid, tid_, n * 4); n_ = 0; return n; }
#define W(name, idx, params, args) static CUresult (*r_##name) params; \
  static CUresult w_##name params { note(idx); CUresult r = r_##name args; note(idx + 100); return r; }
W(cuLaunchKernelEx, 1, (void* a, void* b, void** c, void** d), (a, b, c, d))
W(cuEventRecord, 2, (void* a, void* b), (a, b))
W(cuStreamWriteValue64, 3, (void* a, uint64_t b, uint64_t c, unsigned d), (a, b, c, d))
W(cuEventQuery, 4, (void* a), (a))
W(cuStreamGetId, 5, (void* a, void* b), (a, b))
W(cuThreadExchangeStreamCaptureMode, 6, (void* a), (a))
W(cuStreamIsCapturing, 7, (void* a, void* b), (a, b))
W(cuCtxGetCurrent, 8, (void* a), (a))
W(cuCtxPushCurrent, 9, (void* a), (a))
W(cuCtxPopCurrent, 10, (void* a), (a))
W(cuCtxGetId, 11, (void* a, void* b), (a, b))
W(cuStreamGetCtx, 12, (void* a, void* b), (a, b))
W(cuEventRecordWithFlags, 13, (void* a, void* b, unsigned c), (a, b, c))
W(cuLaunchKernel, 14, (void* a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned f, unsigned g, unsigned h, void* i, void** j, void** k), (a, b, c, d, e, f, g, h, i, j, k))
CUresult cuGetProcAddress_v2(const char* sym, void** pfn, int v, uint64_t flags, void* st) {
  if (!real_gpa) { void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL); real_gpa = (gpa_t)dlsym(lib, "cuGetProcAddress_v2"); }
  CUresult r = real_gpa(sym, pfn, v, flags, st);
  if (r || !pfn || !*pfn) return r;
#define S(name) if (!strcmp(sym, #name)) { r_##name = *pfn; *pfn = (void*)w_##name; }
  S(cuLaunchKernelEx) S(cuEventRecord) S(cuStreamWriteValue64) S(cuEventQuery) S(cuStreamGetId)
  S(cuThreadExchangeStreamCaptureMode) S(cuStreamIsCapturing) S(cuCtxGetCurrent) S(cuCtxPushCurrent) S(cuCtxPopCurrent)
  S(cuCtxGetId) S(cuStreamGetCtx) S(cuEventRecordWithFlags) S(cuLaunchKernel)
  return r;
}
