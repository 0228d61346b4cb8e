// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The flight recorder: for every stream, a fixed ring of its last N operations — what (the driver call, the kernel
//! or copy), the arguments' shapes (grid, block, shared memory, parameter sizes; a copy's bytes and addresses), the
//! issuing call site (whose function is the awaiting coroutine for an awaited operation), the C ABI completion token
//! awaiting it, when it was issued and when it was seen done — so that after a hang there is something to read.
//!
//! It is dumped, as text (standard error and a file) and as Chrome trace event JSON (a file Perfetto opens):
//! - by its own watch thread when an operation has been in flight longer than the stall threshold (the stream is asked
//!   once, with the probe its ring was opened with, whether it is still busy: a kernel that never ends);
//! - when the engine sees a device fault (a failed wait), on the watch thread;
//! - on a signal (`CUASYNC_FLIGHT_SIGNAL`, SIGUSR1 by default: `kill -USR1 <pid>`), on the watch thread;
//! - by the io-thread watchdog when it reports a stalled io thread (async_io/io_watchdog.hpp);
//! - when asked (`dump()`, the C ABI's `flight_recorder_dump`, Python's `cuasync.flight_recorder.dump()`).
//!
//! Turning it on: `enable()`, or `CUASYNC_FLIGHT=1` (or `=N`, the ring's length) in the environment, read when the
//! driver loads. Off, it costs nothing: its bit is one of trace's hook bits (hooks.hpp), which every hook reads
//! anyway. On, an operation pays one ring slot's stores (two cache lines; ~15 ns on the host, measured by the driver
//! and trace benches); nothing allocates after a stream's first operation and a name's first sight.
//!
//! Completion: the engine marks a stream's operations done up to a wait it saw complete (operations on one stream
//! finish in order), so an operation is "done" once a later wait on its stream completed, "in flight" otherwise. A
//! stream nobody waits on keeps its operations in flight until the stall check asks the stream itself.
//!
//! Rings are found by the stream's handle; a stream destroyed through cuasync retires its ring (kept for dumps until
//! rings are needed again). A handle the driver reuses for a stream cuasync did not see destroyed (a framework's)
//! continues the old ring. Thread-safe: writers claim slots atomically and publish them with a sequence number, and
//! readers skip a slot being rewritten.

#include <cuasync/trace/hooks.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync::trace::flight {

//! How the recorder runs.
struct options {
  std::uint32_t per_stream = 128;  //!< operations kept per stream (rounded up to a power of two, 8 .. 65536)
  //! An operation in flight this long (and its stream still busy when asked) is a stall: the recorder dumps once per
  //! stalled operation. 0: no stall check.
  std::chrono::milliseconds stall{10'000};
  //! Where dump files go (`cuasync-flight-<pid>-<n>.txt` and `.json`); "" is the current directory.
  std::string directory;
  //! The signal that asks for a dump (0: none). Installed only when its disposition is the default one.
  int signal = SIGUSR1;
  bool dump_on_fault = true;  //!< dump when the engine sees a device fault
  bool to_stderr = true;      //!< also write each dump's text to standard error
};

//! The options `CUASYNC_FLIGHT` (ring length or 1), `CUASYNC_FLIGHT_STALL_MS`, `CUASYNC_FLIGHT_DIR` and
//! `CUASYNC_FLIGHT_SIGNAL` ask for; `asked` false when `CUASYNC_FLIGHT` is unset, empty or 0.
options environment_options(bool& asked);
//! Turns the recorder on (again: with new options, keeping what was recorded when the length is the same) and starts
//! its watch thread. @throws std::system_error when the thread cannot start, std::invalid_argument for a bad option
void enable(const options& o = {});
//! Turns it on when the environment asks (once per process; the driver's loader calls it). Never throws (a failure
//! is written to standard error).
void enable_from_environment() noexcept;
//! Turns recording off and stops the watch thread; what was recorded stays readable until the next enable.
void disable() noexcept;
//! Whether operations are being recorded (one relaxed load).
inline bool enabled() noexcept { return (active_hooks() & hook::flight) != 0; }
//! Forgets every recorded operation and ring (for tests; only while nothing records).
void reset() noexcept;

// ---- what the hooks record ---------------------------------------------------------------------------------------

//! How an operation ended at its issue.
enum class status : std::uint32_t {
  issuing = 0,   //!< the driver call has not returned (a call blocked in the driver stays so)
  enqueued = 1,  //!< on the stream
  failed = 2,    //!< the call failed (`result` says how); nothing of it runs
};

//! What a ring is opened with (by the layer that knows the driver: trace calls no driver).
struct stream_identity {
  int device = -1;                 //!< the device ordinal
  std::uint64_t stream_id = 0;     //!< cuStreamGetId (0 when not known)
  std::uint64_t context = 0;       //!< the context's handle
  //! Asked from the watch thread whether `stream` still has work: 0 idle, 1 busy, another value a CUresult (a fault).
  int (*probe)(void* stream) = nullptr;
};

//! One operation being recorded.
struct op {
  const char* call = "";          //!< the driver entry point (a string literal)
  //! The kernel's name, "H2D copy", ...: kept once per distinct name for the process (a per-thread cache of recent
  //! names first), the slot holding a pointer to it.
  std::string_view name;
  //! The same, already in storage that lives for the process (a string literal, or a kernel's interned name): stored
  //! as is. Preferred over `name` when set.
  const char* stable_name = nullptr;
  std::uint32_t grid[3] = {0, 0, 0};   //!< a launch's grid (0: not a launch)
  std::uint32_t block[3] = {0, 0, 0};  //!< a launch's block
  std::uint32_t shared_bytes = 0;      //!< a launch's dynamic shared memory
  std::uint32_t params = 0;            //!< a launch's parameter count
  std::uint64_t param_sizes = 0;       //!< the first 8 parameters' sizes, one byte each (lowest byte: parameter 0)
  std::uint64_t bytes = 0;             //!< a copy's or memset's size
  std::uint64_t src = 0, dst = 0;      //!< a copy's addresses (dst: a memset's)
  std::source_location where{};        //!< the issuing call site (default-constructed: unknown)
};

class ring;

//! The ring of `stream`, or null when it has none yet (then `open_ring`). Lock-free.
ring* find_ring(void* stream) noexcept;
//! The ring of `stream`, made with `id` when it has none. Null when no ring can be made (the table is full).
ring* open_ring(void* stream, const stream_identity& id) noexcept;
//! The ring of `stream` is retired (the stream is being destroyed).
void retire_ring(void* stream) noexcept;

//! A recorded operation, for marking how its call ended.
struct mark {
  ring* r = nullptr;
  std::uint64_t seq = 0;  //!< its number on its stream (from 1)
  explicit operator bool() const noexcept { return r != nullptr; }
};

//! Records `o` on ring `r` as issuing now, with the awaiter the calling thread set (awaiter_scope). Never throws.
mark note(ring* r, const op& o) noexcept;

//! A launch as its slot keeps it: the shape packed two 32-bit values a word (launch_shape), the name stable.
struct launch_record {
  const char* call = "";
  const char* stable_name = "";  //!< in storage that lives for the process (intern_name)
  std::uint64_t shape[5] = {};
  std::source_location where{};
};
//! Packs a launch's grid, block, dynamic shared bytes, parameter count and sizes (op's fields) as a slot keeps them.
inline void launch_shape(const std::uint32_t grid[3], const std::uint32_t block[3], std::uint32_t shared_bytes,
                         std::uint32_t params, std::uint64_t param_sizes, std::uint64_t (&shape)[5]) noexcept {
  auto pack = [](std::uint32_t lo, std::uint32_t hi) { return lo | std::uint64_t{hi} << 32; };
  shape[0] = pack(grid[0], grid[1]);
  shape[1] = pack(grid[2], block[0]);
  shape[2] = pack(block[1], block[2]);
  shape[3] = pack(shared_bytes, params);
  shape[4] = param_sizes;
}
//! `note` for a launch, its record made by the caller (the launch path's own: no `op` to fill and read back).
mark note_launch(ring* r, const launch_record& l) noexcept;
//! How the operation's call ended (`result`: the driver's status when failed).
void set_status(mark m, status s, int result = 0) noexcept;
//! The engine saw a wait after `m` complete: every operation on its stream up to `m` is done.
void seen_done(mark m) noexcept;
//! The engine saw a wait after `m` fail with `result` (`name`: the error's name, static storage): dumps, from the
//! watch thread, when asked to dump on faults (once per ring and fault).
void seen_fault(mark m, int result, const char* name) noexcept;

//! A copy of `name` that lives for the process, the same pointer for the same text (what `op::stable_name` takes: a
//! kernel's name, interned at its first noted launch). Never throws (out of memory: a fixed
//! text).
const char* intern_name(std::string_view name) noexcept;

//! Whether an awaiter_scope is active on this thread.
bool awaited_now() noexcept;

//! While it lives, operations recorded on this thread carry the C ABI completion that awaits them (`queue`: the
//! queue's handle, 0 when not known).
class awaiter_scope {
 public:
  awaiter_scope(std::uint64_t queue, std::uint64_t token) noexcept;
  ~awaiter_scope();
  awaiter_scope(const awaiter_scope&) = delete;
  awaiter_scope& operator=(const awaiter_scope&) = delete;

 private:
  std::uint64_t queue_, token_;
};

// ---- reading it back -----------------------------------------------------------------------------------------------

//! One recorded operation, as read back.
struct entry {
  std::uint64_t seq = 0;
  std::string call, name;
  std::uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  std::uint32_t shared_bytes = 0, params = 0;
  std::vector<std::uint32_t> param_sizes;  //!< the first (up to 8) parameters' sizes
  std::uint64_t bytes = 0, src = 0, dst = 0;
  std::string file, function;  //!< the call site ("" when unknown)
  std::uint32_t line = 0;
  std::uint64_t awaiter_queue = 0, awaiter_token = 0;  //!< the C ABI completion (0, 0: none)
  std::uint64_t thread = 0;                            //!< the issuing thread's ordinal (trace lanes)
  status state = status::issuing;
  int result = 0;
  std::int64_t issued_ns = 0;  //!< trace::now_ns() clock
  bool done = false;           //!< a later wait on the stream was seen complete
  std::int64_t done_ns = 0;    //!< when it was seen done (0: not seen, or only known done)
};

//! One stream's ring, as read back.
struct stream_history {
  std::uint64_t handle = 0;
  stream_identity identity;
  bool retired = false;
  std::uint64_t recorded = 0;  //!< operations recorded on it in all
  std::uint64_t done_up_to = 0;
  std::vector<entry> entries;  //!< oldest first (the last `per_stream` at most)
  //! Operations issued and not seen done.
  std::size_t in_flight() const noexcept;
};

//! What the recorder holds now, with the reason it is read.
struct snapshot {
  std::string reason;
  std::int64_t taken_ns = 0;    //!< trace::now_ns()
  std::int64_t wall_time_s = 0; //!< seconds since the epoch, at taken_ns
  std::uint64_t pid = 0;
  std::uint32_t per_stream = 0;
  std::uint64_t untracked_streams = 0;  //!< streams whose operations were not recorded (too many rings)
  std::vector<stream_history> streams;  //!< streams with operations in flight first, then by last issue
  std::vector<std::string> blocked_calls;  //!< host threads inside a driver call now (when the watchdog watches)
};

//! Reads every ring. Never blocks a writer.
snapshot take(std::string reason);
//! The dump's text: a headline naming what stalled or faulted, then each stream's in-flight operations and the
//! latest done ones, with calls, kernels, shapes, call sites, awaiters and times.
std::string text(const snapshot& s);
//! The dump as Chrome trace event JSON: one lane per stream, a span per operation (in-flight ones until the dump).
std::string chrome_json(const snapshot& s);

//! Where a dump went.
struct dump_result {
  std::string text;        //!< the dump's text
  std::string text_path;   //!< the files written ("" when writing failed)
  std::string json_path;
};
//! Takes a snapshot and writes it (files, and standard error when options::to_stderr). Safe to call from any thread
//! but a signal handler. Never throws.
dump_result dump(std::string reason) noexcept;
//! The dumps made so far in this process (by every cause).
std::uint64_t dumps() noexcept;
//! The last dump's result (empty before the first).
dump_result last_dump();

}  // namespace cuasync::trace::flight
