// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A libcuda stand-in that records driver calls slower than 100 us and prints, at exit, those slower than
// SHIM_SLOW_US (default 1000): name, thread (main marked), start since load and duration. For cold paths: which call
// a 126 ms first pageable copy through the C ABI waits in (bench/results/h100-session20/b365d4d-cold-paths.txt).
// Build: gcc -O2 -shared -fPIC -o libdriver_slow_calls.so driver_slow_calls.c -ldl; run the program with
// CUASYNC_LIBCUDA at it (SHIM_REAL names the real driver, default libcuda.so.1). Wraps functions of at most six
// integer or pointer parameters (x86-64: forwarded unchanged). SHIM_DELAY="cuMemHostAlloc=20000,..." adds that many
// microseconds to each call of those: a GPU machine's slow calls replayed on the simulated driver ("=700m": 700 us
// per MiB of the call's second argument, the size of cuMemHostAlloc and cuMemHostRegister). SHIM_SERIALIZE=1 holds
// one process-wide lock through each wrapped call but the waiting ones (synchronizes, frees): a driver whose pinned
// allocation keeps every other thread's calls out meanwhile; SHIM_SERIALIZE=2 through the pinned allocations and
// registrations only (they wait for each other, nothing else waits for them). Not yet run on a GPU.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
typedef int CUresult;
typedef uint64_t u;
typedef CUresult (*gpa_t)(const char*, void**, int, uint64_t, void*);
typedef CUresult (*fn6)(u, u, u, u, u, u);
static gpa_t real_gpa;
static const char* names[] = {"cuMemHostAlloc", "cuMemAllocHost", "cuMemHostRegister", "cuMemHostUnregister", "cuMemFreeHost",
  "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize", "cuMemAlloc", "cuMemAllocAsync", "cuMemcpyHtoDAsync",
  "cuMemcpyDtoHAsync", "cuMemcpyAsync", "cuLaunchHostFunc", "cuStreamCreate", "cuStreamCreateWithPriority", "cuEventCreate",
  "cuMemHostGetDevicePointer", "cuStreamWriteValue64", "cuStreamWaitValue64", "cuStreamWaitEvent", "cuEventRecord",
  "cuLaunchKernelEx", "cuMemFree", "cuMemFreeAsync", "cuCtxPushCurrent", "cuDevicePrimaryCtxRetain", "cuMemcpyHtoD",
  "cuMemcpyDtoH", "cuStreamQuery", "cuEventQuery", "cuModuleLoadData", "cuLibraryLoadData", "cuMemPoolCreate", 0};
#define NS 40
static fn6 real[NS];
#define N 200000
static double t0_[N], t1_[N]; static int id_[N], tid_[N]; static volatile unsigned n_;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double base;
static unsigned delay_us[NS];  // SHIM_DELAY="cuMemHostAlloc=20000,...": a slower driver's cost, on the simulated one
static char per_mib[NS];       // the delay is per MiB of the second argument
static int serialize;          // SHIM_SERIALIZE=1
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static void parse_delays(void) {
  const char* spec = getenv("SHIM_DELAY");
  for (const char* p = spec; p && *p;) {
    const char* eq = strchr(p, '=');
    if (!eq) break;
    for (int i = 0; names[i]; ++i)
      if (strlen(names[i]) == (size_t)(eq - p) && !strncmp(p, names[i], eq - p)) {
        char* end = 0;
        delay_us[i] = (unsigned)strtoul(eq + 1, &end, 10);
        per_mib[i] = end && *end == 'm';
      }
    p = strchr(eq, ',');
    if (p) ++p;
  }
}
static CUresult call(int i, u a, u b, u c, u d, u e, u f) {
  double s = now();
  const int locked = serialize == 1 ? !strstr(names[i], "Synchronize") && !strstr(names[i], "Free")
                   : serialize == 2 && (strstr(names[i], "cuMemHostAlloc") || strstr(names[i], "cuMemHostRegister") ||
                                        strstr(names[i], "cuMemAllocHost"));
  if (locked) pthread_mutex_lock(&driver_lock);
  if (delay_us[i]) usleep(per_mib[i] ? (useconds_t)((double)delay_us[i] * (double)b / (1 << 20)) : delay_us[i]);
  CUresult r = real[i](a, b, c, d, e, f);
  if (locked) pthread_mutex_unlock(&driver_lock);
  double x = now();
  if (x - s > 100e-6) { unsigned k = __atomic_fetch_add(&n_, 1, __ATOMIC_RELAXED); if (k < N) { t0_[k] = s; t1_[k] = x; id_[k] = i; tid_[k] = (int)syscall(SYS_gettid); } }
  return r;
}
#define G(i) static CUresult g##i(u a, u b, u c, u d, u e, u f) { return call(i, a, b, c, d, e, f); }
G(0) G(1) G(2) G(3) G(4) G(5) G(6) G(7) G(8) G(9) G(10) G(11) G(12) G(13) G(14) G(15) G(16) G(17) G(18) G(19) G(20) G(21) G(22) G(23) G(24) G(25) G(26) G(27) G(28) G(29) G(30) G(31) G(32) G(33)
static void* wrappers[] = {g0,g1,g2,g3,g4,g5,g6,g7,g8,g9,g10,g11,g12,g13,g14,g15,g16,g17,g18,g19,g20,g21,g22,g23,g24,g25,g26,g27,g28,g29,g30,g31,g32,g33};
static void report(void) {
  double lim = getenv("SHIM_SLOW_US") ? atof(getenv("SHIM_SLOW_US")) * 1e-6 : 1e-3;
  int me = (int)getpid();
  unsigned n = n_ < N ? n_ : N;
  for (unsigned k = 0; k < n; ++k)
    if (t1_[k] - t0_[k] >= lim)
      fprintf(stderr, "slow %-28s tid %d%s at %9.3f ms took %8.3f ms\n", names[id_[k]], tid_[k], tid_[k] == me ? " (main)" : "",
              (t0_[k] - base) * 1e3, (t1_[k] - t0_[k]) * 1e3);
}
CUresult cuGetProcAddress_v2(const char* sym, void** pfn, int v, uint64_t flags, void* st) {
  if (!real_gpa) { const char* rl = getenv("SHIM_REAL"); void* lib = dlopen(rl ? rl : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL); real_gpa = (gpa_t)dlsym(lib, "cuGetProcAddress_v2"); base = now(); parse_delays(); serialize = getenv("SHIM_SERIALIZE") ? atoi(getenv("SHIM_SERIALIZE")) : 0; atexit(report); }
  CUresult r = real_gpa(sym, pfn, v, flags, st);
  if (r || !pfn || !*pfn) return r;
  for (int i = 0; names[i]; ++i) if (!strcmp(sym, names[i])) { real[i] = (fn6)*pfn; *pfn = wrappers[i]; break; }
  return r;
}
