// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/async_io: everything in one run, against raw driver baselines measured in the same process.
//   1. round trip of a 20 µs kernel (launch → resumed coroutine), per policy, against busy cuEventQuery,
//      cuStreamSynchronize, cuLaunchHostFunc + condition variable, and a blocking-sync event;
//   2. awaited operations per second on one io thread over 1, 8 and 64 streams, against the raw launch + record rate;
//   3. the cost of one poll pass with 10,000 pending waits over 64 streams, against 64 pending over 64 streams;
//   4. process CPU while one 1 s kernel is awaited, and while nothing is pending, per policy;
//   5. awaited pageable copies (staged, never blocking) against the synchronous staged copier, the driver's own
//      pageable copy and a pinned copy, at 64 MiB and 1 GiB, each direction;
//   6. admission: awaited throughput at 64 streams with the default bounds against no bounds.
// Usage: cuasync_async_io_bench [output folder]   (writes async_io.json and async_io.md)
//   CUASYNC_BENCH_ONLY=throughput runs section 2 alone (about a minute instead of many).
#include <cuasync/async_io.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include "bench.hpp"
#include "cpu_sampler.hpp"
#include "gpu.hpp"
#include "raw_closed_loop.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

namespace asio = boost::asio;
using namespace cuasync;
using bench_clock = cuasync::bench::clock;
using cuasync::bench::stats;
using cuasync::bench::summarize;
using cuasync::bench::us_since;

namespace {

const launch_config one{.grid = 1, .block = 1};
constexpr unsigned long long kernel_ns = 20'000;  // "a 20 µs kernel"
constexpr int round_trips = 2000, warmup = 100;

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

stats single(double v) {
  stats s;
  s.median = s.p99 = s.min = s.mean = v;
  s.n = 1;
  return s;
}

struct named_policy {
  const char* name;
  poll_policy policy;
};
const named_policy policies[] = {{"latency", poll_policy::latency()},
                                 {"balanced", poll_policy::balanced()},
                                 {"efficient", poll_policy::efficient()}};

// ---- 1. round trip -----------------------------------------------------------------------------------------------

template <class Once>
stats raw_round_trip(Once&& once) {
  std::vector<double> v;
  for (int i = 0; i < round_trips + warmup; ++i) {
    const auto t0 = bench_clock::now();
    once();
    if (i >= warmup) v.push_back(us_since(t0));
  }
  return summarize(std::move(v));
}

stats awaited_round_trip(const poll_policy& p, stream_ref s, kernel_ref k) {
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(p);
  std::vector<double> v;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < round_trips + warmup; ++i) {
          const auto t0 = bench_clock::now();
          co_await async_launch(s, k, one, kernel_ns);
          if (i >= warmup) v.push_back(us_since(t0));
        }
      },
      rethrow);
  io.run();
  return summarize(std::move(v));
}

struct host_func_state {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
};

// ---- 2. throughput -----------------------------------------------------------------------------------------------

constexpr int throughput_ops = 64'000, throughput_reps = 7;

// What the service did per operation in the last repetition ("queries/op, passes/op").
std::string per_op;

double awaited_ops_per_second(const std::vector<stream>& ss, const poll_policy& p, kernel_ref empty) {
  const int nstreams = static_cast<int>(ss.size());
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(p);
  const int coroutines = 64, per = throughput_ops / coroutines;
  for (int c = 0; c < coroutines; ++c)
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          stream_ref s = ss[c % nstreams];
          for (int i = 0; i < per; ++i) co_await async_launch(s, empty, one);
        },
        rethrow);
  const auto t0 = bench_clock::now();
  io.run();
  const double rate = coroutines * per / (us_since(t0) * 1e-6);
  const completion_service::statistics st = asio::use_service<completion_service>(io).stats();
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.3f queries/op, %.3f passes/op", double(st.queries) / (coroutines * per),
                double(st.passes) / (coroutines * per));
  per_op = buf;
  return rate;
}

// The strongest awaited loop a user could write by hand on Asio: 64 coroutines on one io_context, each launching and
// writing its host word (cuStreamWriteValue64, as the raw host-word loop), then awaiting the word through a minimal
// reactor in the same executor (a handler that reads the armed words with plain loads, resumes the finished
// coroutines inline and posts itself again while any wait is armed). No admission, no capture check, no fault check,
// no cancellation: what Asio's coroutines cost over the raw loop, the floor for any awaited engine.
// `capture_check`: each launch preceded by the capture check every awaited operation makes (cuStreamIsCapturing):
// what that driver call alone costs the loop.
double asio_host_word_per_second(const std::vector<stream>& ss, kernel_ref empty, bool capture_check = false) {
  const int nstreams = static_cast<int>(ss.size());
  constexpr int coroutines = 64;
  const int per = throughput_ops / coroutines;
  pinned_buffer words = pinned_buffer::allocate(ss.front().context(), coroutines * sizeof(std::uint64_t));
  auto* host = words.data<volatile std::uint64_t>();
  for (int i = 0; i < coroutines; ++i) host[i] = 0;
  const CUdeviceptr dev = words.device_pointer();
  struct reactor {
    asio::io_context io;
    volatile std::uint64_t* host = nullptr;
    std::uint64_t want[coroutines] = {};
    std::optional<asio::any_completion_handler<void()>> waiting[coroutines];  // emplaced: Boost 1.81's assignment recursed
    int armed = 0;
    bool scanning = false;
    void scan() {
      for (int i = 0; i < coroutines; ++i)
        if (waiting[i] && host[i] >= want[i]) {
          asio::any_completion_handler<void()> h(std::move(*waiting[i]));
          waiting[i].reset();
          --armed;
          std::move(h)();  // the coroutine runs on to its next wait, inline
        }
      if (armed > 0)
        asio::post(io, [this] { scan(); });
      else
        scanning = false;
    }
  } r;
  r.host = host;
  std::uint64_t seq = 0;
  for (int c = 0; c < coroutines; ++c)
    asio::co_spawn(
        r.io,
        [&, c]() -> asio::awaitable<void> {
          stream_ref s = ss[c % nstreams];
          for (int i = 0; i < per; ++i) {
            if (capture_check) {
              CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
              if (detail::driver().cuStreamIsCapturing(s.get(), &status) != CUDA_SUCCESS ||
                  status != CU_STREAM_CAPTURE_STATUS_NONE)
                throw std::runtime_error("the bench's stream is being captured");
            }
            launch(s, empty, one);
            r.want[c] = ++seq;
            if (CUresult e = detail::driver().cuStreamWriteValue64(s.get(), dev + 8 * c, r.want[c], 0);
                e != CUDA_SUCCESS)
              detail::throw_cu(e, "cuStreamWriteValue64", s.describe(), std::source_location::current());
            co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
                [&r, c](auto handler) {
                  r.waiting[c].emplace(std::move(handler));
                  ++r.armed;
                  if (!std::exchange(r.scanning, true)) asio::post(r.io, [&r] { r.scan(); });
                },
                asio::use_awaitable);
          }
        },
        rethrow);
  const auto t0 = bench_clock::now();
  r.io.run();
  const double rate = coroutines * per / (us_since(t0) * 1e-6);
  for (auto& s : ss) s.synchronize();
  return rate;
}

double raw_launch_record_per_second(const std::vector<stream>& ss, kernel_ref empty) {
  const int nstreams = static_cast<int>(ss.size());
  std::vector<event> es;
  for (int i = 0; i < nstreams; ++i) es.push_back(event::create(test::ctx()));
  const auto t0 = bench_clock::now();
  for (int i = 0; i < throughput_ops; ++i) {
    launch(ss[i % nstreams], empty, one);
    es[i % nstreams].record(ss[i % nstreams]);
  }
  const double rate = throughput_ops / (us_since(t0) * 1e-6);
  for (auto& s : ss) s.synchronize();
  return rate;
}

// ---- 3. poll-pass cost -------------------------------------------------------------------------------------------

stats pass_cost(int pending, int nstreams) {
  asio::io_context io;
  completion_service& svc = asio::use_service<completion_service>(io);
  poll_policy manual = poll_policy::balanced();
  manual.mode = poll_mode::in_executor;  // passes run only when called here (io is not run meanwhile)
  manual.watchdog = std::chrono::hours(1);
  svc.set_policy(manual);
  std::vector<stream> ss;
  for (int i = 0; i < nstreams; ++i) ss.push_back(stream::create(test::ctx()));
  stats result;
  {
    test::gate g;
    for (auto& s : ss) g.close(s);
    for (int i = 0; i < pending; ++i) async_wait(io.get_executor(), stream_ref(ss[i % nstreams]), asio::detached);
    result = bench::measure_us(200, 10, [&] { svc.poll_once(); });
    if (svc.stats().pending_operations != static_cast<std::size_t>(pending))
      std::fprintf(stderr, "warning: waits completed while the gate was closed\n");
  }  // the gate opens
  io.run();
  return result;
}

// ---- 4. CPU ------------------------------------------------------------------------------------------------------

constexpr unsigned long long long_kernel_ns = 1'000'000'000;

double cores_while_awaiting(const poll_policy& p, stream_ref s, kernel_ref k) {
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(p);
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { co_await async_launch(s, k, one, long_kernel_ns); }, rethrow);
  const double c0 = cuasync::bench::cpu_seconds();
  const auto t0 = bench_clock::now();
  io.run();
  return (cuasync::bench::cpu_seconds() - c0) / (us_since(t0) * 1e-6);
}

double cores_idle(const poll_policy* p, stream_ref s, kernel_ref empty) {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  if (p) {
    asio::use_service<completion_service>(io).set_policy(*p);
    // One wait first, so that the poller thread (or the executor's polling) has been running.
    asio::co_spawn(io, [&]() -> asio::awaitable<void> { co_await async_launch(s, empty, one); }, rethrow);
  }
  std::thread runner([&] { io.run(); });  // the io thread blocks in run(): nothing is pending
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double c0 = cuasync::bench::cpu_seconds();
  const auto t0 = bench_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cores = (cuasync::bench::cpu_seconds() - c0) / (us_since(t0) * 1e-6);
  guard.reset();
  runner.join();
  return cores;
}

// ---- 5. pageable copies ------------------------------------------------------------------------------------------

constexpr int copy_reps = 5;

// One timed copy each, in turn: awaited (async_copy), the synchronous staged copier, the driver's pageable copy, a
// pinned copy. GB/s.
struct copy_rates {
  std::vector<double> awaited, staged, driver, pinned;
};

copy_rates copy_rates_for(runtime::device_runtime& rt, std::size_t size, bool to_device) {
  stream s = stream::create(rt.context());
  std::vector<std::byte> host = test::random_bytes(size, 5);
  pinned_buffer pinned = pinned_buffer::allocate(rt.context(), size);
  device_buffer dev = device_buffer::allocate(rt.context(), size);
  const std::span<std::byte> h(host);
  auto gbps = [&](bench_clock::time_point t0) { return size / (us_since(t0) * 1e-6) / 1e9; };
  copy_rates r;
  for (int rep = 0; rep < copy_reps + 1; ++rep) {  // the first repetition warms up
    const bool keep = rep > 0;
    {
      asio::io_context io;
      double v = 0;
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            const auto t0 = bench_clock::now();
            if (to_device)
              co_await async_copy(s, dev.span(), std::span<const std::byte>(h));
            else
              co_await async_copy(s, h, dev.span());
            v = gbps(t0);
          },
          rethrow);
      io.run();
      if (keep) r.awaited.push_back(v);
    }
    auto t0 = bench_clock::now();
    if (to_device) {
      rt.staging().copy_to_device(s, dev.span(), h);
      s.synchronize();
    } else {
      rt.staging().copy_to_host(s, h, dev.span());
    }
    if (keep) r.staged.push_back(gbps(t0));
    t0 = bench_clock::now();
    if (to_device)
      copy_async(s, dev.span(), std::span<const std::byte>(h));
    else
      copy_async(s, h, dev.span());
    s.synchronize();
    if (keep) r.driver.push_back(gbps(t0));
    t0 = bench_clock::now();
    if (to_device)
      copy_async(s, dev.span(), std::span<const std::byte>(pinned.bytes()));
    else
      copy_async(s, pinned.bytes(), dev.span());
    s.synchronize();
    if (keep) r.pinned.push_back(gbps(t0));
  }
  return r;
}

// ---- 6. admission ------------------------------------------------------------------------------------------------

double bounded_ops_per_second(const std::vector<stream>& ss, kernel_ref empty, admission_limits limits) {
  const auto pool = event_pool::for_context(test::ctx());
  const admission_limits saved = pool->get_admission_limits();
  pool->set_admission_limits(limits);
  const double rate = awaited_ops_per_second(ss, poll_policy::balanced(), empty);
  pool->set_admission_limits(saved);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_async_io_bench needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const std::string out = bench::output_dir(argc, argv);
  bench::report rep("async_io");
  rep.note("device", test::ctx().device().name());
  rep.note("kernel", "sleep_ns(20 us) for round trips, empty_kernel for throughput, sleep_ns(1 s) for CPU");
  rep.note("policies", "latency: in-executor, spin 2 ms, 10-200 us sleeps; balanced: in-executor for 150 us after "
                       "activity, its own timer until 5 ms (divisor 30), then the poller thread with sleeps up to 2 ms, "
                       "predicted ends read closely by the io executor; efficient: poller thread, no spin, "
                       "50 us-5 ms sleeps");

  stream s = stream::create(test::ctx());
  kernel_ref sleep_k = test::kernels().kernel("sleep_ns");
  kernel_ref empty_k = test::kernels().kernel("empty_kernel");

  const char* only = std::getenv("CUASYNC_BENCH_ONLY");
  const bool throughput_only = only && std::string_view(only) == "throughput";
  // The process before any service exists.
  const double idle_before = throughput_only ? 0.0 : cores_idle(nullptr, s, empty_k);
  if (!throughput_only) {
    // 1. Round trip.
    event busy_ev = event::create(test::ctx());
    const stats busy = raw_round_trip([&] {
      launch(s, sleep_k, one, kernel_ns);
      busy_ev.record(s);
      while (busy_ev.query_result() == CUDA_ERROR_NOT_READY) {
      }
    });
    const stats sync = raw_round_trip([&] {
      launch(s, sleep_k, one, kernel_ns);
      s.synchronize();
    });
    host_func_state hf;
    const stats host_fn = raw_round_trip([&] {
      launch(s, sleep_k, one, kernel_ns);
      {
        std::lock_guard lock(hf.m);
        hf.done = false;
      }
      s.launch_host_func(
          [](void* p) {
            auto* st = static_cast<host_func_state*>(p);
            {
              std::lock_guard lock(st->m);
              st->done = true;
            }
            st->cv.notify_one();
          },
          &hf);
      std::unique_lock lock(hf.m);
      hf.cv.wait(lock, [&] { return hf.done; });
    });
    event blocking_ev = event::create(test::ctx(), {.blocking_sync = true});
    const stats blocking = raw_round_trip([&] {
      launch(s, sleep_k, one, kernel_ns);
      blocking_ev.record(s);
      blocking_ev.synchronize();
    });
    stats awaited[3];
    for (int i = 0; i < 3; ++i) awaited[i] = awaited_round_trip(policies[i].policy, s, sleep_k);
    rep.add({"round trip 20 us kernel, latency policy", "us", awaited[0], busy, "busy cuEventQuery", true, "<= 1.05"});
    rep.add({"round trip 20 us kernel, balanced policy", "us", awaited[1], host_fn,
             "cuLaunchHostFunc + condition variable", true, "<= 0.5"});
    rep.add({"round trip 20 us kernel, efficient policy", "us", awaited[2], host_fn,
             "cuLaunchHostFunc + condition variable", true, ""});
    rep.add({"round trip 20 us kernel, balanced policy", "us", awaited[1], busy, "busy cuEventQuery", true, ""});
    rep.add({"round trip 20 us kernel, balanced policy", "us", awaited[1], sync, "cuStreamSynchronize", true, ""});
    rep.add({"round trip 20 us kernel, balanced policy", "us", awaited[1], blocking, "blocking-sync event", true, ""});
  }

  // 2. Throughput (balanced, the default; and latency), against the open-loop launch + record rate (which never
  // learns of completion) and against hand-written closed loops (64 in flight, as the awaited runs): the ceiling of
  // seeing completion with cuEventQuery, and with a host word written by cuStreamWriteValue64. The five run in turn,
  // repetition after repetition, so that drift (clocks, other tenants) falls on all of them alike.
  const bench::closed_loop loop{.ops = throughput_ops, .slots = 64, .kernel = empty_k};
  for (int n : {1, 8, 64}) {
    std::vector<stream> ss;
    for (int i = 0; i < n; ++i) ss.push_back(stream::create(test::ctx()));
    (void)raw_launch_record_per_second(ss, empty_k);  // warm-up
    // awaited[0]: latency, [1]: balanced (the defaults: words alone), [2]: balanced with host completion words off
    // (events only), [3]: balanced with an event recorded beside each word (use_words_alone(false)).
    std::vector<double> raw, by_query, by_word, by_asio_word, by_asio_checked, awaited[4], balanced_over_raw;
    std::string service_per_op[4];
    for (int r = 0; r < throughput_reps; ++r) {
      raw.push_back(raw_launch_record_per_second(ss, empty_k));
      by_query.push_back(loop.by_event_query(ss));
      {
        bench::cpu_sampler::scope sampled("hostword-" + std::to_string(n));
        by_word.push_back(loop.by_host_word(ss));
      }
      {
        bench::cpu_sampler::scope sampled("asio-hostword-" + std::to_string(n));
        by_asio_word.push_back(asio_host_word_per_second(ss, empty_k));
      }
      by_asio_checked.push_back(asio_host_word_per_second(ss, empty_k, true));
      for (int i : {0, 1, 2, 3}) {
        cuda_completion_source::instance().use_host_words(i != 2);
        cuda_completion_source::instance().use_words_alone(i != 3);
        bench::cpu_sampler::scope sampled(i == 1 ? "awaited-" + std::to_string(n) : std::string());
        awaited[i].push_back(awaited_ops_per_second(ss, policies[i >= 2 ? 1 : i].policy, empty_k));
        service_per_op[i] = per_op;
      }
      cuda_completion_source::instance().use_host_words(true);
      cuda_completion_source::instance().use_words_alone(true);
      balanced_over_raw.push_back(awaited[1].back() / raw.back());
    }
    const stats raw_s = summarize(raw), closed_query = summarize(by_query), closed_word = summarize(by_word),
                asio_word = summarize(by_asio_word);
    const std::string streams = std::to_string(n) + " streams";
    const char* names[4] = {"latency", "balanced", "balanced, events only (host words off)",
                            "balanced, an event beside each word (words alone off)"};
    for (int i : {1, 3, 0, 2}) {
      const stats a = summarize(awaited[i]);
      rep.add({"awaited launches per second, one io thread, " + streams + ", " + names[i], "ops/s", a, raw_s,
               "raw launch + record", false, ""});
      rep.add({"awaited launches per second, one io thread, " + streams + ", " + names[i], "ops/s", a,
               closed_query, "raw closed loop, cuEventQuery", false, i == 1 ? ">= 0.9" : ""});
      rep.add({"awaited launches per second, one io thread, " + streams + ", " + names[i], "ops/s", a,
               closed_word, "raw closed loop, host word", false, i == 1 ? ">= 1.0 (issue 26)" : ""});
      rep.add({"awaited launches per second, one io thread, " + streams + ", " + names[i], "ops/s", a, asio_word,
               "hand-written Asio coroutines on host words", false, ""});
      rep.note(std::string("service per op, ") + streams + ", " + names[i], service_per_op[i]);
    }
    const stats per_rep = summarize(balanced_over_raw);
    char buf[160];
    std::snprintf(buf, sizeof buf, "median %.3f, min %.3f, max %.3f over %zu", per_rep.median, per_rep.min,
                  per_rep.p99, per_rep.n);
    rep.note("balanced / raw launch + record per repetition, " + streams, buf);
    rep.add({"raw closed loop (64 in flight), cuEventQuery, " + streams, "ops/s", closed_query, raw_s,
             "raw launch + record", false, "(ceiling with events)"});
    rep.add({"raw closed loop (64 in flight), host word, " + streams, "ops/s", closed_word, raw_s,
             "raw launch + record", false, "(ceiling with stream memory ops)"});
    rep.add({"hand-written Asio coroutines on host words (64 in flight), " + streams, "ops/s", asio_word, closed_word,
             "raw closed loop, host word", false, "(what Asio's coroutines cost)"});
    rep.add({"hand-written Asio coroutines on host words, a capture check per op, " + streams, "ops/s",
             summarize(by_asio_checked), asio_word, "hand-written Asio coroutines on host words", false,
             "(what awaited operations' cuStreamIsCapturing costs)"});
  }

  if (!throughput_only) {
    // 3. Poll-pass cost.
    const stats pass_64 = pass_cost(64, 64);
    const stats pass_10k = pass_cost(10'000, 64);
    const stats pass_8 = pass_cost(8, 8);
    rep.add({"poll pass, 10,000 pending over 64 streams", "us", pass_10k, pass_64, "64 pending over 64 streams", true,
             "~1 (grows with streams, not pending)"});
    rep.add({"poll pass, 64 pending over 64 streams", "us", pass_64, pass_8, "8 pending over 8 streams", true,
             "~8 (one query per stream head)"});

    // 4. CPU.
    const double sync_cores = [&] {
      launch(s, sleep_k, one, long_kernel_ns);
      const double c0 = cuasync::bench::cpu_seconds();
      const auto t0 = bench_clock::now();
      s.synchronize();
      return (cuasync::bench::cpu_seconds() - c0) / (us_since(t0) * 1e-6);
    }();
    for (const auto& p : policies) {
      const double busy_cores = cores_while_awaiting(p.policy, s, sleep_k);
      rep.add({std::string("CPU while a 1 s kernel is awaited, ") + p.name, "% of a core", single(100 * busy_cores),
               single(100 * sync_cores), "cuStreamSynchronize", true,
               std::string(p.name) == "balanced" ? "<= 5 % of a core (absolute)" : ""});
    }
    for (const auto& p : policies)
      rep.add({std::string("CPU with nothing pending, ") + p.name, "% of a core",
               single(100 * cores_idle(&p.policy, s, empty_k)), single(100 * idle_before),
               "process before any service", true, "<= 1 % of a core (absolute)"});

    // 5. Pageable copies.
    auto rt = runtime::device_runtime::for_device(0);
    for (std::size_t size : {std::size_t{64} << 20, std::size_t{1} << 30})
      for (bool to_device : {true, false}) {
        const copy_rates r = copy_rates_for(*rt, size, to_device);
        const std::string what = std::string("awaited pageable copy ") + (to_device ? "H2D " : "D2H ") +
                                 (size >= (std::size_t{1} << 30) ? "1 GiB" : "64 MiB");
        const stats awaited_s = summarize(r.awaited);
        rep.add({what, "GB/s", awaited_s, summarize(r.staged), "synchronous staged copier", false, ">= 0.9"});
        rep.add({what, "GB/s", awaited_s, summarize(r.driver), "driver pageable copy", false, "(several x)"});
        rep.add({what, "GB/s", awaited_s, summarize(r.pinned), "pinned copy (hardware bound)", false, ""});
      }

    // 6. Admission: the bounds cost nothing where they do not bind (64 streams, one in flight each).
    {
      std::vector<stream> ss;
      for (int i = 0; i < 64; ++i) ss.push_back(stream::create(test::ctx()));
      std::vector<double> bounded, unbounded;
      for (int r = 0; r < throughput_reps; ++r) {
        bounded.push_back(bounded_ops_per_second(ss, empty_k, admission_limits{}));
        unbounded.push_back(bounded_ops_per_second(ss, empty_k, admission_limits{0, 0}));
      }
      rep.add({"awaited launches per second, 64 streams, default admission bounds", "ops/s", summarize(bounded),
               summarize(unbounded), "no admission bounds", false, ">= 0.95"});
    }
  }

  rep.write(out);
  return 0;
}
