// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The calls threads are blocked in right now, for the io-thread watchdog. While trace::set_watch(true) is on,
//! each trace::host_call publishes itself in its thread's slot (the innermost call wins; the outer one is restored
//! when it ends); `calls_in_flight()` reads every thread's slot from another thread.

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace cuasync::trace {

//! One thread's call in flight.
struct call_in_flight {
  std::uint64_t thread = 0;    //!< the thread's ordinal (its lane: lane::host_thread(thread))
  std::string thread_name;     //!< the OS name of the thread, if it has one
  const char* call = nullptr;  //!< "cuMemFree", "cuStreamSynchronize", ...
  std::int64_t since_ns = 0;   //!< when the call began (trace::now_ns())
  //! The library caller's location when the hook knew it (file_name() is "" otherwise).
  std::source_location where{};
  //! Return addresses of the calling stack at the call (innermost first), for naming the user's frame.
  std::vector<void*> frames;
};

//! Every thread's call in flight now (threads outside a host_call are left out). Empty unless watching is on.
std::vector<call_in_flight> calls_in_flight();

//! The call the thread with ordinal `thread` is in now, if it is in one.
bool call_of_thread(std::uint64_t thread, call_in_flight& out);

//! The calling thread's ordinal (trace::this_thread_lane().id): how a watchdog learns which thread runs an io_context.
std::uint64_t this_thread_ordinal() noexcept;

//! "demo::serve(...) at libfoo.so+0x1234" for each frame that is not cuasync's, the standard library's, Boost's or a
//! system library's (libc, libstdc++, libcuda, ...), innermost first, at most `max` of them. Names come from dladdr
//! (demangled), so only exported symbols have one: build executables with -rdynamic (CMake ENABLE_EXPORTS) to name
//! their frames. Unnamed frames ("? at module+0x...", for addr2line) are given only when no frame has a name.
std::vector<std::string> describe_frames(const std::vector<void*>& frames, std::size_t max = 4);

}  // namespace cuasync::trace
