// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The driver's own account of a failed call. Drivers for CUDA 12.9 and newer write a line of plain text for many
//! failed calls ("[cuMemcpyAsync] ... is not a valid device pointer") and hand it to a callback registered with
//! `cuLogsRegisterCallback`. cuasync registers one when it loads such a driver (unless `CUASYNC_DRIVER_LOG=0`): the
//! lines a thread's failed call produced travel with the `cuda_error` that call throws (`cuda_error::driver_log()`,
//! and in `what()` / `cause()`, so the C ABI's error message and Python's exception carry them too), and the most
//! recent lines of the process can be read here. Older drivers give no text: every call here then answers empty.

#include <cstddef>
#include <string>
#include <vector>

namespace cuasync::driver_log {

//! The most lines `recent()` keeps and one `cuda_error` carries; longer lines are cut to `max_line_bytes`.
inline constexpr std::size_t max_lines = 32;
inline constexpr std::size_t max_line_bytes = 512;
//! The most bytes of driver text one `cuda_error` carries (its newest lines, whole lines only).
inline constexpr std::size_t max_error_bytes = 1024;

//! True when the loaded driver gives its log and cuasync's callback is registered (false before the driver is
//! loaded, on drivers before CUDA 12.9, with `CUASYNC_DRIVER_LOG=0`, or when registration failed). Never loads the
//! driver; never throws.
bool available() noexcept;

//! The process's most recent driver log lines, oldest first, at most `max_lines` (each line as the driver wrote it,
//! without a trailing newline; a warning line starts with "warning: "). Lines a `cuda_error` carried are here too.
//! Blocks only on a short internal lock. @throws std::bad_alloc
std::vector<std::string> recent();

}  // namespace cuasync::driver_log

namespace cuasync::detail {
struct driver_entry_points;
//! Registers cuasync's log callback with the driver when it has `cuLogsRegisterCallback` (called once by the loader,
//! with the entry points resolved, inside its once: so it logs nothing itself). Never throws.
void install_driver_log(const driver_entry_points& d) noexcept;
//! What `install_driver_log` did, in words ("registered (...)", "not given by this driver (...)"), for the loader's
//! log line. Never throws.
const char* driver_log_state() noexcept;
//! The driver's lines that the calling thread's failed call `api` produced and no error has taken yet, newest kept
//! within `max_error_bytes`, joined by "; ". Lines older than a second, or naming another entry point, are left.
//! Empty when there are none. Never throws (on memory exhaustion it answers empty).
std::string take_driver_log(const char* api) noexcept;
}  // namespace cuasync::detail
