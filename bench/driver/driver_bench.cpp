// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/driver: cuasync's driver layer against raw driver calls in the same process, side by side.
//   launch()          vs cuLaunchKernel (host time per launch; empty kernel and a 4-argument kernel), and a C++
//                     kernel (types checked) vs the extern "C" one (sizes only)
//   launch() with tracing off vs the same launch without the hook check (what "off costs one branch" costs), and
//                     with tracing on (the recorder, then NVTX only) vs off: the cost of the hooks, measured
//   event.record()    vs cuEventRecord
//   pool alloc/free   vs cuMemAllocAsync + cuMemFreeAsync
//   copy_async        vs cuMemcpyHtoDAsync / cuMemcpyDtoHAsync (pinned and pageable bandwidth)
// Samples of the two sides alternate, so drift in the machine affects both alike.
#include <cuasync/driver.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/recorder.hpp>

#include "bench.hpp"
#include "cpu_sampler.hpp"
#include "gpu.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <x86intrin.h>

using namespace cuasync;
namespace b = cuasync::bench;

namespace {

const detail::driver_entry_points& raw() { return detail::driver(); }

void must(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw cuda_error(make_error_code(r), what, "bench");
}

// Alternates samples of `ours` and `theirs`: {ours stats, theirs stats}, per-call microseconds.
template <class A, class B, class Between>
std::pair<b::stats, b::stats> alternate(int samples, int iters, A&& ours, B&& theirs, Between&& between) {
  std::vector<double> x, y;
  for (int s = 0; s < samples; ++s) {
    auto t0 = b::clock::now();
    for (int i = 0; i < iters; ++i) ours();
    x.push_back(b::us_since(t0) / iters);
    between();
    t0 = b::clock::now();
    for (int i = 0; i < iters; ++i) theirs();
    y.push_back(b::us_since(t0) / iters);
    between();
  }
  return {b::summarize(x), b::summarize(y)};
}

double gbps(std::size_t bytes, double us) { return bytes / us / 1e3; }

}  // namespace

int main(int argc, char** argv) {
  const std::string out = b::output_dir(argc, argv);
  context_ref ctx = test::ctx();
  const auto& props = ctx.device().properties();
  b::report rep("driver");
  rep.note("device", props.name);
  rep.note("driver", driver_version_string());

  stream s = stream::create(ctx);
  scoped_context guard(ctx);
  auto sync = [&] { s.synchronize(); };

  // ---- launch host time
  {
    kernel_ref k = test::kernels().kernel("empty_kernel");
    launch_config cfg{.grid = 1, .block = 32};
    auto [ours, theirs] = alternate(
        200, 500, [&] { launch(s, k, cfg); },
        [&] { must(raw().cuLaunchKernel(k.get(), 1, 1, 1, 32, 1, 1, 0, s.get(), nullptr, nullptr), "cuLaunchKernel"); },
        sync);
    rep.add({.name = "launch, empty kernel (host time)", .unit = "us", .ours = ours, .baseline = theirs,
             .baseline_name = "cuLaunchKernel", .target = "<= 1.05"});
  }
  {
    kernel_ref k = test::kernels().kernel("saxpy");
    device_buffer x = device_buffer::allocate(ctx, 4096), y = device_buffer::allocate(ctx, 4096);
    float a = 2.f;
    const float* xp = x.data<const float>();
    float* yp = y.data<float>();
    int n = 1024;
    void* params[] = {&a, &xp, &yp, &n};
    launch_config cfg{.grid = 4, .block = 256};
    auto [ours, theirs] = alternate(
        200, 500, [&] { launch(s, k, cfg, a, xp, yp, n); },
        [&] { must(raw().cuLaunchKernel(k.get(), 4, 1, 1, 256, 1, 1, 0, s.get(), params, nullptr), "cuLaunchKernel"); },
        sync);
    rep.add({.name = "launch, saxpy 4 args checked (host time)", .unit = "us", .ours = ours, .baseline = theirs,
             .baseline_name = "cuLaunchKernel", .target = "<= 1.05"});
  }
  {
    // The same kernel as C++ (a mangled name): each argument's type is checked too, against the extern "C" one's
    // launch, which checks sizes only.
    kernel_ref typed = test::kernels().kernel("_Z11typed_saxpyIfEvT_PKS0_PS0_i");
    kernel_ref plain = test::kernels().kernel("saxpy");
    if (typed.param_types().size() != 4) throw std::runtime_error("typed_saxpy's parameter types were not decoded");
    device_buffer x = device_buffer::allocate(ctx, 4096), y = device_buffer::allocate(ctx, 4096);
    float a = 2.f;
    const float* xp = x.data<const float>();
    float* yp = y.data<float>();
    int n = 1024;
    launch_config cfg{.grid = 4, .block = 256};
    auto [ours, theirs] = alternate(
        200, 500, [&] { launch(s, typed, cfg, a, xp, yp, n); }, [&] { launch(s, plain, cfg, a, xp, yp, n); }, sync);
    rep.add({.name = "launch, C++ saxpy, 4 argument types checked (host time)", .unit = "us", .ours = ours,
             .baseline = theirs, .baseline_name = "launch() of the extern \"C\" saxpy (sizes only)",
             .target = "<= 1.02"});
  }
  // ---- what tracing costs a launch: off (the one branch) and on
  {
    kernel_ref k = test::kernels().kernel("empty_kernel");
    launch_config cfg{.grid = 1, .block = 32};
    const detail::kernel_info& info = k.info();
    auto unhooked = [&] {  // launch() as it was before the hooks: the same checks, then the enqueue
      const std::source_location where = std::source_location::current();
      detail::check_arguments<>(info, s, where);
      if (!detail::config_fits(info, cfg) || !(info.ctx == s.context()) || !s) [[unlikely]]
        detail::check_config_slow(info, cfg, s, where);
      detail::launch_unhooked(s, info, cfg, nullptr, where);
    };
    auto [off, bare] = alternate(400, 500, [&] { launch(s, k, cfg); }, unhooked, sync);
    rep.add({.name = "launch, empty kernel, tracing off: launch() / launch without the hook check", .unit = "us",
             .ours = off, .baseline = bare, .baseline_name = "launch_unhooked", .target = "<= 1.01"});
    // On: a GPU span (one pooled timing event after the launch), the host issue span, the watchdog slot bit off. The collector's
    // thread converts spans meanwhile; the recorder is cleared between samples so its buffers stay small.
    // Samples alternate: the "between" after each sample flips the state (on for ours, off for the baseline).
    bool on_now = true;
    auto flip = [&](auto set) {
      sync();
      on_now = !on_now;
      set(on_now);
    };
    auto set_recording = [](bool on) {
      if (on) {
        trace::enable({.output = {}, .max_records = 10'000'000});
      } else {
        trace::disable();
        trace::clear();
      }
    };
    set_recording(true);
    std::optional<b::cpu_sampler::scope> sampled(std::in_place, "tracing");  // where its time goes
    auto [on, off2] = alternate(100, 500, [&] { launch(s, k, cfg); }, [&] { launch(s, k, cfg); },
                                [&] { flip(set_recording); });
    sampled.reset();
    set_recording(false);
    rep.add({.name = "launch, empty kernel, tracing on (recorder): launch() on / off", .unit = "us", .ours = on,
             .baseline = off2, .baseline_name = "launch() with tracing off", .target = "<= 1.3"});
    // The floor of "one timing event per op": the raw launch with a timing event recorded after it, and with the two
    // stream queries the recorder makes (capturing? the stream's id), each against the raw launch alone.
    {
      CUevent timing = nullptr;
      must(raw().cuEventCreate(&timing, CU_EVENT_DEFAULT), "cuEventCreate");
      void* no_args[] = {nullptr};
      auto raw_launch = [&] {
        must(raw().cuLaunchKernel(info.function, 1, 1, 1, 32, 1, 1, 0, s.get(), no_args, nullptr), "cuLaunchKernel");
      };
      auto [timed, bare2] = alternate(
          200, 500,
          [&] {
            raw_launch();
            must(raw().cuEventRecord(timing, s.get()), "cuEventRecord");
          },
          raw_launch, sync);
      rep.add({.name = "floor of tracing: cuLaunchKernel + cuEventRecord of a timing event / cuLaunchKernel",
               .unit = "us", .ours = timed, .baseline = bare2, .baseline_name = "cuLaunchKernel", .target = ""});
      // The same floor with the timing read as a tracer must read it: another thread takes each event's elapsed time
      // after a reference as it completes (cuEventElapsedTime answers NOT_READY until then), as the span collector
      // does, against the launches with their events alone (that thread idle). The two differ only by the reads'
      // driver calls, made beside the launches.
      {
        constexpr int per_sample = 500;
        std::vector<CUevent> ring(per_sample);
        for (CUevent& e : ring) must(raw().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
        CUevent reference = nullptr;
        must(raw().cuEventCreate(&reference, CU_EVENT_DEFAULT), "cuEventCreate");
        must(raw().cuEventRecord(reference, s.get()), "cuEventRecord");
        sync();
        std::atomic<long long> issued{0}, read{0};
        std::atomic<bool> reading{false}, stop{false};
        std::atomic<double> sink{0};  // the elapsed times are used: summed
        std::thread reader([&] {
          scoped_context current(ctx);
          long long next = 0;
          double sum = 0;
          bool idle = false;
          while (!stop.load(std::memory_order_relaxed)) {
            if (!reading.load(std::memory_order_acquire)) {
              idle = true;
              continue;
            }
            if (std::exchange(idle, false)) next = read.load(std::memory_order_acquire);  // stored before `reading`
            if (next >= issued.load(std::memory_order_acquire)) continue;
            float ms = 0;
            const CUresult r = raw().cuEventElapsedTime(&ms, reference, ring[next % per_sample]);
            if (r == CUDA_ERROR_NOT_READY) continue;
            must(r, "cuEventElapsedTime");
            sum += ms;
            read.store(++next, std::memory_order_release);
          }
          sink.store(sum);
        });
        bool with_reads = true;
        auto timed_launch = [&] {
          const long long k = issued.load(std::memory_order_relaxed);
          raw_launch();
          must(raw().cuEventRecord(ring[k % per_sample], s.get()), "cuEventRecord");
          issued.store(k + 1, std::memory_order_release);
        };
        auto settle = [&] {  // the events of a sample are read (or skipped) before the next records them again
          sync();
          if (with_reads)
            while (read.load(std::memory_order_acquire) < issued.load(std::memory_order_acquire)) {
            }
          read.store(issued.load());
          with_reads = !with_reads;
          reading.store(with_reads, std::memory_order_release);
        };
        reading.store(true, std::memory_order_release);
        auto [read_on, read_off] = alternate(200, per_sample, timed_launch, timed_launch, settle);
        stop = true;
        reader.join();
        rep.add({.name = "floor of tracing with its reads: launch + timing event, another thread reading each one's "
                         "elapsed time / the same without the reads",
                 .unit = "us", .ours = read_on, .baseline = read_off,
                 .baseline_name = "cuLaunchKernel + cuEventRecord", .target = ""});
        rep.add({.name = "floor of tracing with its reads / cuLaunchKernel", .unit = "us", .ours = read_on,
                 .baseline = bare2, .baseline_name = "cuLaunchKernel (earlier samples)", .target = ""});
        rep.note("elapsed times read (their sum, so that the reads are used)", std::to_string(sink.load()));
        for (CUevent e : ring) raw().cuEventDestroy(e);
        raw().cuEventDestroy(reference);
      }
      auto [queried, bare3] = alternate(
          200, 500,
          [&] {
            CUstreamCaptureStatus st{};
            unsigned long long id = 0;
            must(raw().cuStreamIsCapturing(s.get(), &st), "cuStreamIsCapturing");
            must(raw().cuStreamGetId(s.get(), &id), "cuStreamGetId");
            raw_launch();
          },
          raw_launch, sync);
      rep.add({.name = "cuStreamIsCapturing + cuStreamGetId + cuLaunchKernel / cuLaunchKernel", .unit = "us",
               .ours = queried, .baseline = bare3, .baseline_name = "cuLaunchKernel", .target = ""});
      raw().cuEventDestroy(timing);
    }
    on_now = true;
    trace::set_nvtx(true);
    auto [nvtx, off3] = alternate(200, 500, [&] { launch(s, k, cfg); }, [&] { launch(s, k, cfg); },
                                  [&] { flip(trace::set_nvtx); });
    trace::set_nvtx(false);
    rep.add({.name = "launch, empty kernel, NVTX ranges only: launch() on / off", .unit = "us", .ours = nvtx,
             .baseline = off3, .baseline_name = "launch() with NVTX off", .target = ""});
    // The flight recorder (trace/flight_recorder.hpp): a ring slot per launch. Its watch thread runs (no stall
    // check); only its hook bit is flipped between samples, which alternate and swap order every other sample. The
    // budget is 50 ns per launch: the second row is the paired difference per launch, in ns.
    {
      trace::flight::options fo;
      fo.stall = std::chrono::milliseconds(0);
      fo.signal = 0;
      fo.to_stderr = false;
      trace::flight::enable(fo);
      std::vector<double> with, without, added;
      b::cpu_sampler::scope sampled("flight");  // where the added time goes (CUASYNC_BENCH_SAMPLES)
      for (int i = 0; i < 400; ++i) {
        double t[2];
        for (int v = 0; v < 2; ++v) {
          const bool flown = (v == 0) == (i % 2 == 0);
          trace::set_flight(flown);
          const auto t0 = b::clock::now();
          for (int j = 0; j < 500; ++j) launch(s, k, cfg);
          t[flown ? 0 : 1] = b::us_since(t0) / 500;
          sync();
        }
        with.push_back(t[0]);
        without.push_back(t[1]);
        added.push_back((t[0] - t[1]) * 1e3);
      }
      trace::flight::disable();
      trace::flight::reset();
      rep.add({.name = "launch, empty kernel, flight recorder on: launch() on / off", .unit = "us",
               .ours = b::summarize(with), .baseline = b::summarize(without),
               .baseline_name = "launch() with every hook off", .target = "<= 1.02"});
      rep.add({.name = "launch, flight recorder: host time added per launch (paired samples)", .unit = "ns",
               .ours = b::summarize(added), .baseline = b::summarize(added), .baseline_name = "itself",
               .target = "<= 50 (absolute)"});
    }
    // What a ring slot costs beside a launch, written by the bench itself (no recorder): the clock and 16 plain
    // stores into a 256-slot ring of 128-byte slots, and the same with the one locked add a shared ring's sequence
    // takes, each against launch() alone. A locked instruction waits for every earlier store to drain, the driver's
    // writes to the GPU's command buffer included; this row says what that wait costs here.
    {
      struct alignas(128) bench_slot {
        std::uint64_t word[16];
      };
      std::vector<bench_slot> ring(256);
      std::atomic<std::uint64_t> next{0};
      std::uint64_t plain_next = 0;
      auto write_slot = [&](std::uint64_t seq) {
        bench_slot& sl = ring[seq & 255];
        const std::uint64_t t = __rdtsc();
        for (int w = 0; w < 16; ++w) {
          sl.word[w] = t + w;
          std::atomic_signal_fence(std::memory_order_release);  // stores kept, in order, as the recorder's are
        }
      };
      auto [stores, bare4] = alternate(
          300, 500, [&] { write_slot(++plain_next), launch(s, k, cfg); }, [&] { launch(s, k, cfg); }, sync);
      auto [locked, bare5] = alternate(
          300, 500, [&] { write_slot(next.fetch_add(1, std::memory_order_relaxed) + 1), launch(s, k, cfg); },
          [&] { launch(s, k, cfg); }, sync);
      std::uint64_t check = 0;
      for (const bench_slot& sl : ring) check += sl.word[15];
      rep.add({.name = "flight recorder's floor: the clock + a 128-byte slot written beside launch() / launch()",
               .unit = "us", .ours = stores, .baseline = bare4, .baseline_name = "launch() with every hook off",
               .target = ""});
      rep.add({.name = "flight recorder's floor: the same with a locked add for the slot's sequence / launch()",
               .unit = "us", .ours = locked, .baseline = bare5, .baseline_name = "launch() with every hook off",
               .target = ""});
      rep.note("ring words written (their sum, so that the stores are used)", std::to_string(check));
    }
  }
  // ---- event record
  {
    event e = event::create(ctx);
    auto [ours, theirs] = alternate(
        200, 1000, [&] { e.record(s); }, [&] { must(raw().cuEventRecord(e.get(), s.get()), "cuEventRecord"); }, sync);
    rep.add({.name = "event record", .unit = "us", .ours = ours, .baseline = theirs, .baseline_name = "cuEventRecord",
             .target = "<= 1.05"});
  }
  // ---- stream-ordered allocation
  {
    memory_pool_ref pool = memory_pool_ref::device_default(ctx);
    pool.set_release_threshold(UINT64_MAX);
    auto [ours, theirs] = alternate(
        200, 500,
        [&] {
          CUdeviceptr p = pool.allocate_async(s, 1 << 20);
          memory_pool_ref::free_async(s, p);
        },
        [&] {
          CUdeviceptr p = 0;
          must(raw().cuMemAllocAsync(&p, 1 << 20, s.get()), "cuMemAllocAsync");
          must(raw().cuMemFreeAsync(p, s.get()), "cuMemFreeAsync");
        },
        sync);
    rep.add({.name = "pool alloc+free 1 MiB", .unit = "us", .ours = ours, .baseline = theirs,
             .baseline_name = "cuMemAllocAsync+cuMemFreeAsync", .target = "<= 1.1"});
  }
  // ---- copy bandwidth (GB/s; higher is better)
  {
    const std::size_t size = std::size_t{256} << 20;
    pinned_buffer host = pinned_buffer::allocate(ctx, size);
    auto rnd = test::random_bytes(size);
    std::memcpy(host.get(), rnd.data(), size);
    std::vector<std::byte> pageable(rnd);
    device_buffer dev = device_buffer::allocate(ctx, size);
    auto bw = [&](const char* name, auto&& ours_fn, auto&& raw_fn, const char* raw_name) {
      std::vector<double> x, y;
      for (int i = 0; i < 12; ++i) {
        auto t0 = b::clock::now();
        ours_fn();
        sync();
        x.push_back(gbps(size, b::us_since(t0)));
        t0 = b::clock::now();
        raw_fn();
        sync();
        y.push_back(gbps(size, b::us_since(t0)));
      }
      rep.add({.name = name, .unit = "GB/s", .ours = b::summarize(x), .baseline = b::summarize(y),
               .baseline_name = raw_name, .lower_is_better = false, .target = ">= 0.98"});
    };
    bw("copy H2D pinned 256 MiB", [&] { copy_async(s, dev.span(), std::span<const std::byte>(host.bytes())); },
       [&] { must(raw().cuMemcpyHtoDAsync(dev.get(), host.get(), size, s.get()), "cuMemcpyHtoDAsync"); },
       "cuMemcpyHtoDAsync");
    bw("copy D2H pinned 256 MiB", [&] { copy_async(s, host.bytes(), dev.span()); },
       [&] { must(raw().cuMemcpyDtoHAsync(host.get(), dev.get(), size, s.get()), "cuMemcpyDtoHAsync"); },
       "cuMemcpyDtoHAsync");
    bw("copy H2D pageable 256 MiB", [&] { copy_async(s, dev.span(), std::span<const std::byte>(pageable)); },
       [&] { must(raw().cuMemcpyHtoDAsync(dev.get(), pageable.data(), size, s.get()), "cuMemcpyHtoDAsync"); },
       "cuMemcpyHtoDAsync");
    bw("copy D2H pageable 256 MiB", [&] { copy_async(s, std::span<std::byte>(pageable), dev.span()); },
       [&] { must(raw().cuMemcpyDtoHAsync(pageable.data(), dev.get(), size, s.get()), "cuMemcpyDtoHAsync"); },
       "cuMemcpyDtoHAsync");
  }
  rep.write(out);
  return 0;
}
