// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compile farm, callers' side: submitting compiles, the delivery thread that runs completions, the in-process
// fallback, the worker executable's search. The I/O thread that drives the workers is farm_io.cpp.
#include "farm_impl.hpp"

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/log.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#ifndef CUASYNC_INSTALL_LIBDIR
#define CUASYNC_INSTALL_LIBDIR "lib"
#endif

namespace cuasync::jit {

namespace {
constexpr const char* worker_name = "cuasync-jit-worker";

std::string compose_worker_error(const std::string& detail, const std::string& worker_stderr) {
  if (worker_stderr.empty()) return detail + " (it wrote nothing on stderr)";
  return detail + "; its last lines of stderr:\n" + worker_stderr;
}
}  // namespace

farm_worker_error::farm_worker_error(std::error_code code, std::string program_name, int signal, int exit_status,
                                     std::string worker_stderr, std::string detail, std::source_location where)
    : cuda_error(code, "cuasync::jit::compile_farm", compose_worker_error(detail, worker_stderr), where),
      program_name_(std::move(program_name)),
      signal_(signal),
      exit_status_(exit_status),
      stderr_(std::move(worker_stderr)) {}

compile_farm::impl::impl(farm_options o) : options(std::move(o)) {
  workers = options.workers ? options.workers : std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "cuasync::jit::compile_farm: pipe");
}

void compile_farm::impl::wake() noexcept {
  const char c = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_pipe[1], &c, 1);  // full pipe: the I/O thread is awake anyway
}

void compile_farm::impl::deliver(std::function<void()> f) {
  {
    std::lock_guard lock(delivery_mutex);
    deliveries.push_back(std::move(f));
  }
  delivery_ready.notify_one();
}

void compile_farm::impl::complete(const std::shared_ptr<job>& j, std::shared_ptr<const compiled_program> p,
                                  std::exception_ptr e) {
  (e ? count.failures : count.compiles).fetch_add(1, std::memory_order_relaxed);
  deliver([j, p = std::move(p), e]() mutable { j->done(std::move(p), e); });
}

void compile_farm::impl::run_delivery() {
  std::unique_lock lock(delivery_mutex);
  for (;;) {
    delivery_ready.wait(lock, [&] { return delivery_stop || !deliveries.empty(); });
    if (deliveries.empty()) return;  // stopping, and everything delivered
    auto f = std::move(deliveries.front());
    deliveries.pop_front();
    lock.unlock();
    try {
      f();
    } catch (...) {
      // A completion that throws has nobody to tell; the others still run.
    }
    f = nullptr;  // what the completion holds is released outside the lock
    lock.lock();
  }
}

void compile_farm::impl::go_in_process(const std::string& why) {
  {
    std::lock_guard lock(mutex);
    if (in_process || stopping) return;
    in_process = true;
    for (unsigned i = 0; i < workers; ++i) fallback.emplace_back([this] { run_fallback(); });
  }
  changed.notify_all();
  // Said once: a farm goes in process for good.
  logging::write_with(logging::level::info, [&] {
    return "JIT compile farm: no worker process could be started (" + why + "); compiling in this process instead";
  });
}

void compile_farm::impl::run_fallback() {
  std::unique_lock lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (stopping) return;  // the destructor fails what is still queued
    std::shared_ptr<job> j = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    std::shared_ptr<const compiled_program> p;
    std::exception_ptr e;
    try {
      p = std::make_shared<const compiled_program>(
          detail::compile_with_arguments(j->source, j->t, j->arguments, j->where));
    } catch (...) {
      e = std::current_exception();
    }
    complete(j, std::move(p), e);
    lock.lock();
  }
}

compile_farm::compile_farm(farm_options options) : impl_(std::make_unique<impl>(std::move(options))) {
  impl_->delivery = std::thread([i = impl_.get()] { i->run_delivery(); });
  try {
    impl_->io = std::thread([i = impl_.get()] { i->run_io(); });
  } catch (...) {
    {
      std::lock_guard lock(impl_->delivery_mutex);
      impl_->delivery_stop = true;
    }
    impl_->delivery_ready.notify_all();
    impl_->delivery.join();
    throw;
  }
}

compile_farm::~compile_farm() {
  impl& i = *impl_;
  {
    std::lock_guard lock(i.mutex);
    i.stopping = true;
  }
  i.changed.notify_all();
  i.wake();
  i.io.join();  // fails the queued and running compiles, ends the workers
  for (auto& t : i.fallback) t.join();
  {
    std::lock_guard lock(i.delivery_mutex);
    i.delivery_stop = true;
  }
  i.delivery_ready.notify_all();
  i.delivery.join();
  ::close(i.wake_pipe[0]);
  ::close(i.wake_pipe[1]);
}

void compile_farm::submit_prepared(const program& p, const target& t, std::vector<std::string> arguments,
                                   const cache_key& key, detail::farm::done_fn done, std::source_location where) {
  auto j = std::make_shared<impl::job>();
  j->source = p;
  j->t = t;
  j->arguments = std::move(arguments);
  j->key = key;
  j->where = where;
  j->done = std::move(done);
  {
    std::unique_lock lock(impl_->mutex);
    if (impl_->stopping) {  // a completion that compiles again while the farm is destroyed: nobody would answer
      lock.unlock();
      impl_->complete(j, nullptr,
                      std::make_exception_ptr(farm_worker_error(std::make_error_code(std::errc::owner_dead), p.name(),
                                                                0, -1, {}, "program '" + p.name() +
                                                                "': the farm was being destroyed", where)));
      return;
    }
    j->id = impl_->next_id++;
    impl_->queue.push_back(std::move(j));
  }
  impl_->changed.notify_one();  // a fallback thread, when the farm went in process
  impl_->wake();
}

void compile_farm::submit(const program& p, const target& t, const compile_options& o, callback done,
                          std::source_location where) {
  const nvrtc_info& nvrtc = nvrtc_library();
  std::vector<std::string> arguments = o.arguments(t, {}, where);
  const cache_key key = make_cache_key(p, t, o, nvrtc);
  submit_prepared(
      p, t, std::move(arguments), key,
      [done = std::move(done), key](std::shared_ptr<const compiled_program> program, std::exception_ptr e) {
        if (e) return done(compile_result{}, e);
        done(compile_result{std::move(program), cache_outcome::miss, key}, nullptr);
      },
      where);
}

std::shared_future<compile_result> compile_farm::submit(const program& p, const target& t, const compile_options& o,
                                                        std::source_location where) {
  auto promise = std::make_shared<std::promise<compile_result>>();
  std::shared_future<compile_result> future = promise->get_future().share();
  submit(
      p, t, o,
      [promise](compile_result r, std::exception_ptr e) {
        if (e) promise->set_exception(e);
        else promise->set_value(std::move(r));
      },
      where);
  return future;
}

void compile_farm::warm_up() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->warm = true;
    impl_->wanted = impl_->workers;
  }
  impl_->wake();
}

void compile_farm::wait_until_ready() {
  std::unique_lock lock(impl_->mutex);
  impl_->changed.wait(lock, [&] {
    return impl_->stopping || impl_->in_process || (impl_->starting == 0 && impl_->alive >= impl_->wanted);
  });
}

farm_stats compile_farm::stats() const noexcept {
  const impl& i = *impl_;
  farm_stats s;
  s.workers = i.workers;
  s.workers_started = i.count.started.load();
  s.workers_lost = i.count.lost.load();
  s.workers_recycled = i.count.recycled.load();
  s.start_failures = i.count.start_failures.load();
  s.compiles = i.count.compiles.load();
  s.failures = i.count.failures.load();
  s.timeouts = i.count.timeouts.load();
  s.peak_worker_rss_bytes = i.count.peak_rss.load();
  std::lock_guard lock(i.mutex);
  s.workers_alive = i.alive;
  s.queued = i.queue.size();
  s.in_process = i.in_process;
  return s;
}

const farm_options& compile_farm::options() const noexcept { return impl_->options; }

std::optional<farm_options> farm_options::from_environment(std::source_location where) {
  const char* v = std::getenv("CUASYNC_JIT_FARM");
  const std::string_view text = v ? v : "";
  if (text.empty() || text == "0" || text == "off" || text == "OFF") return std::nullopt;
  farm_options o;
  if (text == "auto") return o;
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n == 0 || n > 1024)
    cuasync::detail::throw_invalid("cuasync::jit::farm_options::from_environment",
                                   "CUASYNC_JIT_FARM='" + std::string(text) +
                                       "' is not a number of workers (1 to 1024), 'auto', '0' or 'off'",
                                   where);
  o.workers = n;
  return o;
}

std::vector<std::string> compile_farm::worker_candidates(const farm_options& options) {
  if (!options.worker_path.empty()) return {options.worker_path};
  if (const char* env = std::getenv("CUASYNC_JIT_WORKER"); env && *env) return {env};
  std::vector<std::string> out;
  Dl_info info{};
  // The binary holding this code: libcuasync.so, or a program that links cuasync statically.
  if (::dladdr(reinterpret_cast<void*>(&compile_farm::worker_candidates), &info) && info.dli_fname) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path self = fs::weakly_canonical(info.dli_fname, ec);
    if (ec) self = info.dli_fname;
    const fs::path dir = self.parent_path();
    out.push_back((dir / worker_name).string());
    // A program in <prefix>/bin finds the one installed beside the library in <prefix>/<libdir>.
    for (const char* libdir : {CUASYNC_INSTALL_LIBDIR, "lib"}) {
      const std::string candidate = (dir.parent_path() / libdir / worker_name).lexically_normal().string();
      if (std::find(out.begin(), out.end(), candidate) == out.end()) out.push_back(candidate);
    }
  }
  return out;
}

}  // namespace cuasync::jit
