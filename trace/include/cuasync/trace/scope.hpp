// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Scoped helpers for host code: `trace::label` names the work a thread does ("request 42"), and every span the
//! thread issues meanwhile carries it; `trace::scope` records a host span on the calling thread's lane from its
//! construction to its destruction.
//!
//! Labels belong to the thread, not to a coroutine: a coroutine that holds a label across a `co_await` lends it to
//! whatever else its thread runs until it resumes. In coroutines, open labels around synchronous sections, or set
//! `span::label` explicitly. Labels may be destroyed out of order (each removes its own entry).

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/span.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace cuasync::trace {

//! The calling thread's label: the open labels joined with " / ", outermost first; empty when none is open.
const std::string& current_label() noexcept;

//! Labels the calling thread's spans while it lives. Labels are kept whether or not recording is on (so a label
//! opened before enable() still applies); each costs one string.
class label {
 public:
  explicit label(std::string text);
  ~label();
  label(const label&) = delete;
  label& operator=(const label&) = delete;
};

//! A host span on the calling thread's lane, from construction to destruction, with the thread's label at
//! construction. Off, it costs the enabled() check, a null pointer and the destructor's test of it, and records
//! nothing; a scope that began while recording was off records nothing even if recording starts before it ends.
class scope {
 public:
  scope(trace::category c, std::string_view name, std::uint64_t bytes = 0) {
    if (enabled()) start(c, name, bytes);
  }
  ~scope() {
    if (open_) finish();
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  void start(trace::category c, std::string_view name, std::uint64_t bytes) noexcept;
  void finish() noexcept;

  std::unique_ptr<span> open_;  // only while recording: nothing to build or destroy when off
};

}  // namespace cuasync::trace
