// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The simulated driver's controls, for the program under test (look them up with dlsym on the library that
 * CUASYNC_LIBCUDA names, opened with RTLD_NOLOAD). */
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
/* Phase 0: start-up, 1: the part where FAKE_CUDA_FAIL's call counts run (and failures are injected), 2: after. */
void fake_cuda_set_phase(int phase);
/* Waits until every queued piece of work has run. */
void fake_cuda_drain(void);
/* How many calls of the entry point `entry` (e.g. "cuMemHostAlloc") the calling thread has made, in every phase:
 * how a test tells that a call was made on a thread of cuasync's rather than on its own. */
long fake_cuda_calls_on_this_thread(const char* entry);
/* Writes the report (injection, live objects by kind, destroys refused by injection, phase-1 calls per entry) as
 * text into out; answers the size it needs. */
int fake_cuda_report(char* out, int size);
/* The launch attributes (CUlaunchAttributeID values) of the last cuLaunchKernelEx, a programmatic stream
 * serialization only when it was allowed: up to max of them into ids; answers how many there were. */
int fake_cuda_last_launch_attributes(int* ids, int max);
/* on != 0: cuLaunchKernel(Ex) answers CUDA_ERROR_INVALID_CONTEXT on a thread with no current context, as a driver that
 * wanted one would (the real one launches in the stream's context): how a test reaches cuasync's fallback. */
void fake_cuda_launch_needs_current_context(int on);
#ifdef __cplusplus
}
#endif
