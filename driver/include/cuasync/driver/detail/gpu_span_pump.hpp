// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: who runs the GPU span collector's passes (driver/src/gpu_span_collector.hpp). The driver has no poller of
// its own to offer; the engine, when it is linked, installs a pump at start-up so that the engine's one poller thread
// runs the passes while spans are in flight and lets them go when none are (no second polling thread). Without a
// pump (a program on the driver layer alone) the collector starts a thread of its own.

namespace cuasync::detail {

struct gpu_span_pump {
  void (*start)();  //!< spans are in flight and nobody polls them: have the passes run (may throw std::bad_alloc)
  void (*poke)() noexcept;  //!< another span was queued: a poller blocked with nothing to do must look again
};

//! Installs the pump (once, at start-up: static initialisation of the engine). Spans already in flight stay with the
//! collector's own thread.
void set_gpu_span_pump(gpu_span_pump pump) noexcept;
//! One pass of the collector (the pump's poller calls it); true when spans are still in flight.
bool run_gpu_span_pass() noexcept;
//! True when no span is in flight; the pump is then released (the next span starts it again).
bool gpu_span_pump_idle() noexcept;

}  // namespace cuasync::detail
