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
/* Writes the report (injection, live objects by kind, destroys refused by injection, phase-1 calls per entry) as
 * text into out; answers the size it needs. */
int fake_cuda_report(char* out, int size);
#ifdef __cplusplus
}
#endif
