// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// warm_start.hpp: the index read and filtered on the first loading thread, then the entries shared out to the
// others by one counter; each thread keeps its own counts, merged at the end.
#include <cuasync/runtime/warm_start.hpp>

#include <cuasync/driver/device.hpp>
#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/log.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace cuasync::runtime {
namespace {

constexpr std::size_t max_problems = 32;

// The targets a compile for a device of compute capability `cc` would choose. Known NVRTC: exactly those
// `select_target` picks for each request. Unknown: a CUBIN for `cc`, PTX and LTO-IR for `cc` or older.
struct target_filter {
  int cc = 0;
  std::optional<jit::target> automatic, ptx, ltoir;
  bool known = false;

  target_filter(int compute_capability, const jit::nvrtc_info* nvrtc) : cc(compute_capability), known(nvrtc) {
    if (!nvrtc) return;
    auto pick = [&](jit::output_request r) -> std::optional<jit::target> {
      try {
        return jit::select_target(cc, nvrtc->supported_archs, r);
      } catch (const std::exception&) {  // a device older than the NVRTC: nothing compiles for it
        return std::nullopt;
      }
    };
    automatic = pick(jit::output_request::automatic);
    ptx = pick(jit::output_request::ptx);
    ltoir = pick(jit::output_request::ltoir);
  }
  bool wants(const jit::target& t) const {
    if (!known) return t.kind == jit::output_kind::cubin ? t.arch == cc : t.arch <= cc;
    return t == automatic || t == ptx || t == ltoir || (t.kind == jit::output_kind::cubin && t.arch == cc);
  }
};

void note(warm_start_report& r, std::string line) {
  if (r.problems.size() < max_problems) r.problems.push_back(std::move(line));
}

}  // namespace

struct warm_start::state {
  kernel_cache* cache;
  int ordinal;
  warm_start_options options;
  std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
  std::atomic<bool> cancelled{false};
  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  bool done = false;
  warm_start_report report;
  std::thread thread;

  void run() noexcept;
  void load(const jit::cache_index_record& record, warm_start_report& r) noexcept;
  void merge(const warm_start_report& part);
};

void warm_start::state::load(const jit::cache_index_record& record, warm_start_report& r) noexcept {
  try {
    const jit::preload_result p = cache->compiler().preload(record.key);
    switch (p.outcome) {
      case jit::preload_outcome::not_on_disk:
        ++r.stale;
        note(r, record.name + " (" + record.key.hex() + "): no entry (evicted)");
        return;
      case jit::preload_outcome::rejected:
        ++r.rejected;
        note(r, record.name + " (" + record.key.hex() + "): entry rejected, deleted: " + p.rejection);
        return;
      case jit::preload_outcome::busy: ++r.already; return;
      case jit::preload_outcome::in_memory: ++r.already; break;
      case jit::preload_outcome::loaded: ++r.loaded; break;
    }
    const jit::compiled_program& prog = *p.result.program;
    if (!options.load_libraries || prog.target.kind == jit::output_kind::ltoir) return;
    if (prog.target != record.target) {  // the key is right (checked), the record is not: load nothing for it
      ++r.failed;
      note(r, record.name + " (" + record.key.hex() + "): the index says " + record.target.to_string() +
                  ", the entry is " + prog.target.to_string() + ": not loaded as a library");
      return;
    }
    const cuasync::library& lib = cache->load_library(p.result);
    ++r.libraries;
    if (options.functions_in)
      for (const auto& [expression, lowered] : prog.lowered_names) {
        (void)lib.kernel(options.functions_in, expression);
        ++r.functions;
      }
  } catch (const std::exception& e) {
    ++r.failed;
    note(r, record.name + " (" + record.key.hex() + "): " + e.what());
  }
}

void warm_start::state::merge(const warm_start_report& part) {
  std::lock_guard lock(mutex);
  report.loaded += part.loaded;
  report.already += part.already;
  report.libraries += part.libraries;
  report.functions += part.functions;
  report.stale += part.stale;
  report.rejected += part.rejected;
  report.failed += part.failed;
  for (const auto& line : part.problems) note(report, line);
}

void warm_start::state::run() noexcept {
  try {
    // The driver first: loading libcuda and cuInit are part of the start-up this thread takes off the caller's.
    const int cc = cuasync::device::get(ordinal).compute_capability();
    jit::compiler& compiler = cache->compiler();
    jit::disk_cache* disk = compiler.disk();
    if (!disk) throw std::runtime_error("the JIT disk cache is off (CUASYNC_CACHE=0): nothing to warm-start from");
    const jit::nvrtc_info* nvrtc = compiler.known_nvrtc_identity();
    const target_filter filter(cc, nvrtc);
    const jit::cache_index_contents index = jit::read_cache_index(disk->directory());
    std::vector<const jit::cache_index_record*> selected;
    for (const auto& r : index.records)
      if (r.name.starts_with(options.name_prefix) && filter.wants(r.target) &&
          (options.include_ptx || r.target.kind != jit::output_kind::ptx) &&
          (!nvrtc || r.nvrtc_version == nvrtc->version()))
        selected.push_back(&r);
    {
      std::lock_guard lock(mutex);
      report.index_records = index.records.size();
      report.index_bad_lines = index.bad_lines;
      report.selected = selected.size();
      report.nvrtc_identity_known = nvrtc != nullptr;
    }
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      warm_start_report part;
      for (std::size_t i; !cancelled.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < selected.size();)
        load(*selected[i], part);
      merge(part);
    };
    const std::size_t threads = std::min<std::size_t>(std::max(options.threads, 1u), selected.size());
    std::vector<std::thread> helpers;
    for (std::size_t t = 1; t < threads; ++t) try {
        helpers.emplace_back(work);
      } catch (const std::system_error&) {  // no more threads: the ones started share the work
        break;
      }
    work();
    for (auto& t : helpers) t.join();
    std::size_t stale;
    {
      std::lock_guard lock(mutex);
      stale = report.stale;
    }
    const std::size_t waste = index.bad_lines + index.duplicates + stale;
    if (options.compact_index && waste >= 64 && waste * 2 >= index.lines) {
      try {
        const std::size_t removed = jit::compact_cache_index(disk->directory());
        std::lock_guard lock(mutex);
        report.index_lines_removed = removed;
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        note(report, std::string("the index could not be rewritten: ") + e.what());
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex);
    report.error = e.what();
  }
  std::lock_guard lock(mutex);
  report.nvrtc_loaded = jit::nvrtc_loaded();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  logging::write_with(logging::level::info, [&] {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "JIT warm start: %zu of %zu indexed entries for the device, %zu loaded, %zu libraries, %zu already "
                  "there, %zu stale, %zu rejected, %zu failed (%.1f ms)",
                  report.selected, report.index_records, report.loaded, report.libraries, report.already,
                  report.stale, report.rejected, report.failed, report.seconds * 1e3);
    return report.error.empty() ? std::string(buf) : "JIT warm start failed: " + report.error;
  });
  done = true;
  cv.notify_all();
}

warm_start::warm_start(kernel_cache& cache, int device_ordinal, warm_start_options options)
    : state_(std::make_unique<state>()) {
  state_->cache = &cache;
  state_->ordinal = device_ordinal;
  state_->options = std::move(options);
  state_->thread = std::thread([s = state_.get()] { s->run(); });
}

warm_start::warm_start(warm_start&&) noexcept = default;

warm_start& warm_start::operator=(warm_start&& o) noexcept {
  if (this != &o) {
    cancel();
    if (state_ && state_->thread.joinable()) state_->thread.join();
    state_ = std::move(o.state_);
  }
  return *this;
}

warm_start::~warm_start() {
  if (!state_) return;
  cancel();
  if (state_->thread.joinable()) state_->thread.join();
}

bool warm_start::ready() const noexcept {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

const warm_start_report& warm_start::wait() const {
  static const warm_start_report empty{};
  if (!state_) return empty;
  std::unique_lock lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->report;
}

void warm_start::cancel() noexcept {
  if (state_) state_->cancelled.store(true, std::memory_order_relaxed);
}

}  // namespace cuasync::runtime
