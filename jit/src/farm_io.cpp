// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compile farm's I/O thread: the only thread that starts, talks to, times out and ends worker processes. One
// poll over every worker's socket and stderr pipe and a self-pipe that callers write to when they queue a compile.
#include "farm_impl.hpp"

#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/log.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace cuasync::jit {
namespace {

using detail::farm::frame;
using detail::farm::frame_type;
using slot = compile_farm::impl::slot;
using job = compile_farm::impl::job;

void raise_peak(std::atomic<std::uint64_t>& peak, std::uint64_t value) noexcept {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

std::string seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// The exception a worker's failure frame describes, as jit::compile would have thrown it here.
std::exception_ptr rebuild(const detail::farm::compile_failure& f, const job& j) {
  using kind = detail::farm::compile_failure::kind;
  const auto r = static_cast<nvrtcResult>(f.result);
  switch (f.what) {
    case kind::compile:
      return std::make_exception_ptr(compile_error(r, j.source.name(), j.arguments, f.log, f.first_error, j.where));
    case kind::nvrtc_not_found:
      return std::make_exception_ptr(nvrtc_not_found_error(make_error_code(r), f.api, f.message, j.where));
    case kind::nvrtc_call: return std::make_exception_ptr(cuda_error(make_error_code(r), f.api, f.message, j.where));
    case kind::other: break;
  }
  return std::make_exception_ptr(cuda_error(make_error_code(NVRTC_ERROR_INTERNAL_ERROR), "cuasync-jit-worker",
                                            "program '" + j.source.name() + "': " + f.message, j.where));
}

}  // namespace

namespace {
// The I/O thread's work, one object per farm (it holds nothing the farm does not).
struct io_loop {
  compile_farm::impl& f;

  std::unique_lock<std::mutex> lock() { return std::unique_lock(f.mutex); }

  // Starts workers until the pool has `wanted`; on a start that fails with no worker running, the farm goes in
  // process.
  void keep_pool() {
    unsigned wanted, running;
    bool warm;
    {
      auto l = lock();
      if (f.in_process || f.stopping) return;
      const std::size_t busy = static_cast<std::size_t>(
          std::count_if(f.slots.begin(), f.slots.end(), [](const auto& s) { return s->current != nullptr; }));
      // Every queued compile wants a worker of its own, up to the bound.
      const std::size_t demand = std::min<std::size_t>(f.workers, busy + f.queue.size());
      f.wanted = std::max(f.wanted, static_cast<unsigned>(demand));
      wanted = f.wanted;
      warm = f.warm;
      running = static_cast<unsigned>(f.slots.size());
    }
    for (; running < wanted; ++running) {
      std::string error;
      if (!f.worker_path) f.worker_path = find_worker(f.worker_path_error);
      if (f.worker_path->empty()) error = f.worker_path_error;
      auto p = f.worker_path->empty() ? std::nullopt
                                      : detail::farm::worker_process::spawn(*f.worker_path, f.options, warm, error);
      if (!p) {
        start_failed(error);
        return;
      }
      f.slots.push_back(std::make_unique<slot>(std::move(*p)));
      // Its hello is due within the compile timeout (at least a minute: NVRTC's first load can be slow).
      const auto due = std::max<std::chrono::milliseconds>(f.options.compile_timeout, std::chrono::minutes(1));
      f.slots.back()->deadline = compile_farm::impl::clock::now() + due;
      auto l = lock();
      ++f.starting;
    }
  }

  std::string find_worker(std::string& error) {
    std::string tried;
    for (const auto& c : compile_farm::worker_candidates(f.options)) {
      if (::access(c.c_str(), X_OK) == 0) return c;
      tried += (tried.empty() ? "" : ", ") + c;
    }
    error = "no cuasync-jit-worker executable found (tried " + (tried.empty() ? std::string("nothing") : tried) +
            "; set CUASYNC_JIT_WORKER or farm_options::worker_path)";
    return {};
  }

  void start_failed(const std::string& why) {
    f.count.start_failures.fetch_add(1, std::memory_order_relaxed);
    bool none_running;
    {
      auto l = lock();
      none_running = f.alive == 0 && f.starting == 0;
      if (!none_running) f.wanted = f.alive + f.starting;  // run with the workers that did start
    }
    f.changed.notify_all();
    if (none_running) return f.go_in_process(why);
    if (!std::exchange(f.told_shrink, true))
      logging::write_with(logging::level::info, [&] {
        return "JIT compile farm: a worker could not be started (" + why + "); running with fewer";
      });
  }

  // Hands queued compiles to ready, idle workers.
  void dispatch() {
    const unsigned most = f.options.max_compiles_per_worker;
    for (auto& s : f.slots) {
      if (!s->ready || s->current || (most && s->compiles >= most)) continue;  // the last: recycled by `pass`
      std::shared_ptr<job> j;
      {
        auto l = lock();
        if (f.queue.empty()) return;
        j = std::move(f.queue.front());
        f.queue.pop_front();
      }
      s->current = j;
      s->deadline = compile_farm::impl::clock::now() + f.options.compile_timeout;
      s->outbox = encode(frame{frame_type::request, j->id, 0,
                               detail::farm::encode_request(j->key, j->source, j->t, j->arguments)});
      s->sent = 0;
      flush(*s);
    }
  }

  // Writes what the socket takes now; false when the worker is gone.
  bool flush(slot& s) {
    while (s.sent < s.outbox.size()) {
      const ssize_t n = ::send(s.process.socket(), s.outbox.data() + s.sent, s.outbox.size() - s.sent, MSG_NOSIGNAL);
      if (n > 0) {
        s.sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      }
    }
    s.outbox.clear();
    s.sent = 0;
    return true;
  }

  // Reads what the socket holds and handles each whole frame; false when the worker is gone or talks nonsense.
  bool receive(slot& s, std::string& why) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(s.process.socket(), buf, sizeof buf, 0);
      if (n > 0) {
        s.parser.feed(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      const bool open = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      while (auto fr = s.parser.next(why))
        if (!handle(s, *fr, why)) return false;
      if (!why.empty()) return false;
      return open;
    }
  }

  bool handle(slot& s, frame& fr, std::string& why) {
    raise_peak(f.count.peak_rss, fr.aux);
    if (fr.type == frame_type::hello && !s.ready) return hello(s, fr, why);
    if (!s.current || fr.id != s.current->id || (fr.type != frame_type::result && fr.type != frame_type::failure)) {
      why = "an unexpected frame";
      return false;
    }
    std::shared_ptr<job> j = std::move(s.current);
    if (fr.type == frame_type::result) {
      std::string bad;
      auto p = detail::decode_entry(std::move(fr.payload), j->key, bad);
      if (!p) {
        s.current = j;  // fails as a lost worker: its answer cannot be trusted
        why = "a malformed result (" + bad + ")";
        return false;
      }
      f.complete(j, std::make_shared<const compiled_program>(std::move(*p)), nullptr);
    } else {
      auto failure = detail::farm::decode_failure(fr.payload);
      f.complete(j, nullptr,
                 failure ? rebuild(*failure, *j)
                         : std::make_exception_ptr(cuda_error(make_error_code(NVRTC_ERROR_INTERNAL_ERROR),
                                                              "cuasync-jit-worker", "a malformed failure", j->where)));
    }
    ++s.compiles;
    return true;
  }

  bool hello(slot& s, const frame& fr, std::string& why) {
    auto h = detail::farm::decode_hello(fr.payload);
    if (!h) {
      why = "a malformed hello";
      return false;
    }
    if (!h->ok) {
      why = "it could not load NVRTC: " + h->error;
      return false;
    }
    if (const nvrtc_info* mine = detail::loaded_nvrtc_info();
        mine && (mine->major != h->nvrtc_major || mine->minor != h->nvrtc_minor)) {
      why = "it loaded NVRTC " + std::to_string(h->nvrtc_major) + "." + std::to_string(h->nvrtc_minor) + " from " +
            h->library + ", this process " + mine->version_string() + " from " + mine->library;
      return false;
    }
    s.ready = true;
    f.count.started.fetch_add(1, std::memory_order_relaxed);
    {
      auto l = lock();
      --f.starting;
      ++f.alive;
    }
    f.changed.notify_all();
    return true;
  }

  // Ends the worker of `s` and fails its compile with `code` and `detail`; a worker that never said hello is a start
  // failure instead.
  void lose(slot& s, std::error_code code, const std::string& what, int grace_ms) {
    const auto e = s.process.end(grace_ms);
    raise_peak(f.count.peak_rss, e.peak_rss);
    const std::string tail = s.process.stderr_tail();
    if (!s.ready) {
      {
        auto l = lock();
        --f.starting;
      }
      return start_failed("worker pid " + std::to_string(s.process.pid()) + " " + e.describe() + " before it was " +
                          "ready: " + what + (tail.empty() ? "" : "; stderr: " + tail));
    }
    {
      auto l = lock();
      --f.alive;
    }
    f.count.lost.fetch_add(1, std::memory_order_relaxed);
    if (s.current) {
      const job& j = *s.current;
      const std::string how = code == std::errc::timed_out ? what
                                                           : e.describe() + (what.empty() ? "" : " (" + what + ")");
      const std::string detail = "the compile worker (pid " + std::to_string(s.process.pid()) +
                                 ") compiling program '" + j.source.name() + "' " + how;
      f.complete(s.current, nullptr,
                 std::make_exception_ptr(farm_worker_error(code, j.source.name(), e.signal, e.exit_status, tail,
                                                           detail, j.where)));
      s.current.reset();
    }
  }

  // One pass: wait for anything to happen (or the nearest deadline), then handle it.
  void pass() {
    std::vector<pollfd> fds{{f.wake_pipe[0], POLLIN, 0}};
    auto deadline = compile_farm::impl::clock::time_point::max();
    for (auto& s : f.slots) {
      fds.push_back({s->process.socket(), static_cast<short>(POLLIN | (s->outbox.empty() ? 0 : POLLOUT)), 0});
      fds.push_back({s->process.stderr_fd(), POLLIN, 0});  // -1 once closed: poll skips it
      if (s->current || !s->ready) deadline = std::min(deadline, s->deadline);
    }
    int timeout = -1;
    if (deadline != compile_farm::impl::clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - compile_farm::impl::clock::now());
      timeout = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    if (fds[0].revents) {
      char drain[256];
      while (::read(f.wake_pipe[0], drain, sizeof drain) > 0) {
      }
    }
    const auto now = compile_farm::impl::clock::now();
    std::vector<std::unique_ptr<slot>> kept;
    for (std::size_t i = 0; i < f.slots.size(); ++i) {
      slot& s = *f.slots[i];
      const pollfd& sock = fds[1 + 2 * i];
      if (fds[2 + 2 * i].revents) s.process.drain_stderr();
      std::string why;
      bool gone = false;
      if (sock.revents & (POLLIN | POLLHUP | POLLERR)) gone = !receive(s, why);
      if (!gone && (sock.revents & POLLOUT)) gone = !flush(s);
      if (gone) {
        // At the end of its stream a worker is exiting: let it, to read how it ended. One that talks nonsense is not.
        lose(s, std::make_error_code(std::errc::owner_dead), why, why.empty() ? 2000 : 0);
      } else if (!s.ready && now >= s.deadline) {
        lose(s, std::make_error_code(std::errc::timed_out), "it did not say it was ready in time", 0);
      } else if (s.current && now >= s.deadline) {
        f.count.timeouts.fetch_add(1, std::memory_order_relaxed);
        lose(s, std::make_error_code(std::errc::timed_out), "timed out after " + seconds(f.options.compile_timeout),
             0);
      } else if (!s.current && f.options.max_compiles_per_worker && s.compiles >= f.options.max_compiles_per_worker) {
        s.process.end(0);  // idle: nothing is lost
        f.count.recycled.fetch_add(1, std::memory_order_relaxed);
        auto l = lock();
        --f.alive;
      } else {
        kept.push_back(std::move(f.slots[i]));
      }
    }
    f.slots = std::move(kept);
  }

  // The farm is being destroyed: fail what is queued and running, end the workers.
  void shut_down() {
    std::deque<std::shared_ptr<job>> left;
    {
      auto l = lock();
      left.swap(f.queue);
    }
    auto destroyed = [](const job& j) {
      return std::make_exception_ptr(farm_worker_error(std::make_error_code(std::errc::owner_dead), j.source.name(),
                                                       0, -1, {}, "program '" + j.source.name() +
                                                       "': the farm was destroyed before it was compiled", j.where));
    };
    for (auto& s : f.slots) ::shutdown(s->process.socket(), SHUT_RDWR);  // idle ones exit at once
    for (auto& s : f.slots) {
      s->process.end(s->current ? 0 : 200);  // busy ones are killed: their compiles fail anyway
      if (s->current) left.push_back(std::move(s->current));
    }
    for (auto& j : left) f.complete(j, nullptr, destroyed(*j));
    f.slots.clear();
  }
};
}  // namespace

void compile_farm::impl::run_io() {
  io_loop loop{*this};
  for (;;) {
    {
      std::lock_guard l(mutex);
      if (stopping) break;
    }
    try {
      loop.keep_pool();
      loop.dispatch();
      loop.pass();
    } catch (const std::exception& e) {  // out of memory, most likely: the farm goes on, more slowly
      logging::write_with(logging::level::info, [&] { return std::string("JIT compile farm: ") + e.what(); });
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  loop.shut_down();
}

}  // namespace cuasync::jit
