// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Each thread's published blocking call (trace/blocking_calls.hpp): a slot per thread, registered on first use and
// kept (shared) so that a reader never sees a freed slot; a small mutex per slot, taken only in watch mode.
#include <cuasync/trace/blocking_calls.hpp>

#include <source_location>
#include <string>
#include <vector>

namespace cuasync::trace::detail {

struct watch_entry {
  const char* call = nullptr;
  std::int64_t since_ns = 0;
  std::source_location where{};
  std::vector<void*> frames;
};

//! Publishes `call` as the calling thread's call in flight; the one it replaces goes to `previous`. False when
//! nothing could be published (out of memory).
bool publish_call(const char* call, const std::source_location* where, watch_entry& previous) noexcept;
//! A C++ symbol demangled (the symbol itself when it is not one).
std::string demangled(const char* symbol);
//! Gives the calling thread its slot now (a thread the watchdog watches but that made no driver call yet).
bool register_thread() noexcept;
//! The kernel's id of the registered thread with ordinal `thread`; 0 when none is registered (or it is gone).
long os_thread_of(std::uint64_t thread) noexcept;
//! Puts back the call that was in flight before (nullptr call: none).
void restore_call(watch_entry previous) noexcept;

}  // namespace cuasync::trace::detail
