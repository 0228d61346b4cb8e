// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Whether the driver cuasync loaded is the simulated libcuda (tests/fake_driver), and a way for a test case meant
// for it alone to skip itself on any other driver.
//
// Catch2 2.x runs a hidden case ([.simulated]) whenever a command-line filter matches one of its tags, so a filter
// such as "[staged]" on a GPU machine runs cases whose gate kernel (`sim_wait_u32`) is a no-op on real hardware:
// they fail there for reasons that have nothing to do with what they test. Every case tagged `simulated` starts
// with CUASYNC_SIMULATED_ONLY().

namespace cuasync::test {

//! True when the driver cuasync loaded (`CUASYNC_LIBCUDA`, else libcuda.so.1) is the simulated one: the library that
//! defines its resolved entry points also defines the simulated driver's controls (`fake_cuda_report`). A real driver
//! at any path, or a simulated library that is merely loaded beside it, answers false. Loads the driver if needed;
//! false when none loads. Never throws.
bool simulated_driver_loaded() noexcept;

//! The simulated driver's control `name` (tests/fake_driver/control.h), or null when the loaded driver is not the
//! simulated one or has no such symbol.
void* simulated_driver_symbol(const char* name) noexcept;

//! How many objects of `kind` (the report's names: "pinned_host", "events", ...) the simulated driver holds now; -1
//! on any other driver. @throws std::bad_alloc
long simulated_live_objects(const char* kind);

//! Pinned host memory the simulated driver holds now, however it was made (cuMemHostAlloc, or cuMemHostRegister of
//! memory cuasync allocated: `CUASYNC_PINNED_BY_REGISTRATION`); -1 on any other driver. @throws std::bad_alloc
long simulated_live_pinned();

//! The calling thread's calls of the entry point `entry` (e.g. "cuStreamGetId") so far, in every phase; -1 on any
//! other driver (the simulated driver's `fake_cuda_calls_on_this_thread`).
long simulated_calls_here(const char* entry) noexcept;

//! Pinned allocations this thread made (cuMemHostAlloc and cuMemHostRegister calls); -1 on any other driver.
long simulated_pinned_allocations_here() noexcept;

//! True on the simulated driver; otherwise a Catch2 warning says the case was skipped and why (defined in
//! test_main.cpp: test executables only).
bool simulated_or_skip();

}  // namespace cuasync::test

//! The first statement of a case that runs on the simulated driver only: on any other driver it returns at once,
//! with a warning saying it was skipped and why (never a silent pass).
#define CUASYNC_SIMULATED_ONLY()                         \
  do {                                                   \
    if (!::cuasync::test::simulated_or_skip()) return;   \
  } while (false)
