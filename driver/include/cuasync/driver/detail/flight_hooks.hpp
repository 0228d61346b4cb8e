// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The driver's side of the flight recorder (trace/flight_recorder.hpp): a stream's ring opened with what only the
//! driver can tell (its device, id and context, and a probe that asks the stream whether it is still busy), and the
//! records of launches and other enqueues. Reached only when `trace::active_hooks()` has the flight bit.

#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/flight_recorder.hpp>

#include <source_location>

namespace cuasync::detail {

//! The ring of `s`, opened at its first operation (null when no ring can be made). Never throws.
trace::flight::ring* flight_ring(stream_ref s) noexcept;
//! The ring of `s`: found (lock-free), or opened at its first operation; null when none can be made.
inline trace::flight::ring* flight_ring_of(stream_ref s) noexcept {
  trace::flight::ring* r = trace::flight::find_ring(s.get());
  return r ? r : flight_ring(s);
}
//! Records `o` on `s` as issuing now. Never throws.
inline trace::flight::mark flight_note(stream_ref s, const trace::flight::op& o) noexcept {
  trace::flight::ring* r = flight_ring_of(s);
  return r ? trace::flight::note(r, o) : trace::flight::mark{};
}
//! Records a launch of `k` with `c` from `where`. Never throws.
trace::flight::mark flight_note_launch(stream_ref s, const kernel_info& k, const launch_config& c,
                                       std::source_location where) noexcept;

// launch_flown, the launch with only the flight recorder on, is declared in launch.hpp (launch_prepared calls it).

}  // namespace cuasync::detail
