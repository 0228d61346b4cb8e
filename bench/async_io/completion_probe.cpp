// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A probe, not a benchmark of cuasync: what the driver charges for each way of learning that stream work finished,
// so the completion source is chosen on figures.
//   1. host cost per call: event record, stream write-value to mapped pinned memory, stream id, event and stream
//      queries on finished and pending work;
//   2. open-loop rates over 1, 8 and 64 streams: launch alone, launch + record, launch + write-value;
//   3. closed-loop rates (64 operations in flight on one thread, each relaunched once its completion is seen):
//      completion seen by cuEventQuery, against completion seen by reading a host word written by the stream;
//   4. the same closed loops with the completion check on a second thread (a poller), so the launching thread only
//      launches: does the driver let the two threads run in parallel?
//   5. host cost of a launch, a record and a write-value onto idle streams (their work all done: what a closed loop
//      with one operation per stream does) against busy ones (work queued behind a gate);
//   6. where an awaited operation's time goes: closed loops (64 in flight) over the raw driver, over the CUDA
//      completion source alone, over the service with callbacks, and with coroutines (as bench/async_io);
//   7. events by their flags: record, finished and pending queries (also without a current context), closed loops;
//   8. (only when named, and last: it faults the context) what the driver answers after a kernel faults, for calls
//      that a completion source could use as its fault check instead of an event recorded after each operation:
//      a query of an event recorded after the fault, of one finished before it, of one never recorded, an idle
//      stream's query, id and capture status.
// Usage: cuasync_completion_probe [parts, e.g. 56]   (all but 8 by default)
#include <cuasync/async_io.hpp>

#include "bench.hpp"
#include "gpu.hpp"
#include "raw_closed_loop.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;
using cuasync::bench::measure_us;
using cuasync::bench::stats;
using cuasync::bench::us_since;
using bench_clock = cuasync::bench::clock;

namespace {
const launch_config one{.grid = 1, .block = 1};
const detail::driver_entry_points& d() { return detail::driver(); }

void print(const char* what, const stats& s) {
  std::printf("%-58s p50 %8.3f  p99 %8.3f  min %8.3f\n", what, s.median, s.p99, s.min);
}

std::vector<stream> make_streams(context_ref ctx, int n) {
  std::vector<stream> ss;
  for (int i = 0; i < n; ++i) ss.push_back(stream::create(ctx));
  return ss;
}
std::vector<event> make_events(context_ref ctx, int n, event_options options = {}) {
  std::vector<event> es;
  for (int i = 0; i < n; ++i) es.push_back(event::create(ctx, options));
  return es;
}
void synchronize(const std::vector<stream>& ss) {
  for (const auto& s : ss) s.synchronize();
}

template <class F>
double rate(int ops, F&& body) {
  const auto t0 = bench_clock::now();
  body();
  return ops / (us_since(t0) * 1e-6);
}
}  // namespace

int main(int argc, char** argv) {
  // argv[1]: the parts to run, e.g. "56" (default: all).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out at once, even into a pipe cut short by a timeout
  const auto want = [&](int part) {
    return argc < 2 ? part != 8 : std::strchr(argv[1], '0' + part) != nullptr;
  };
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_completion_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  context_ref ctx = test::ctx();
  scoped_context current(ctx);
  kernel_ref empty = test::kernels().kernel("empty_kernel");
  pinned_buffer words = pinned_buffer::allocate(ctx, 64 * 64 * sizeof(std::uint64_t));
  auto* host = words.data<volatile std::uint64_t>();
  const CUdeviceptr dev = words.device_pointer();
  for (int i = 0; i < 64 * 64; ++i) host[i] = 0;

  std::uint64_t v = 0;  // the last value written to a host word

  // 1. Per-call costs.
  if (want(1)) {
    std::printf("== host cost per call (us) ==\n");
    stream s = stream::create(ctx);
    event e = event::create(ctx);
    print("cuEventRecord (timing disabled), idle stream", measure_us(
                                                              200, 50, [&] { e.record(s); }, [&] { s.synchronize(); }));
    print("cuStreamWriteValue64 (host word), idle stream",
          measure_us(
              200, 50, [&] { d().cuStreamWriteValue64(s.get(), dev, ++v, 0); }, [&] { s.synchronize(); }));
    print("cuStreamWriteValue64 NO_MEMORY_BARRIER",
          measure_us(
              200, 50, [&] { d().cuStreamWriteValue64(s.get(), dev, ++v, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER); },
              [&] { s.synchronize(); }));
    print("cuStreamWriteValue32 (host word)",
          measure_us(
              200, 50, [&] { d().cuStreamWriteValue32(s.get(), dev, static_cast<cuuint32_t>(++v), 0); },
              [&] { s.synchronize(); }));
    print("cuStreamGetId", measure_us(200, 100, [&] { (void)s.id(); }));
    {
      // First query of a finished event vs a repeated one.
      std::vector<event> evs = make_events(ctx, 100);
      std::vector<double> first, again, pending, squery_done, squery_pending;
      for (int rep = 0; rep < 50; ++rep) {
        for (auto& x : evs) {
          launch(s, empty, one);
          x.record(s);
        }
        s.synchronize();
        auto t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        first.push_back(us_since(t0) / evs.size());
        t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        again.push_back(us_since(t0) / evs.size());
        t0 = bench_clock::now();
        for (int i = 0; i < 100; ++i) (void)d().cuStreamQuery(s.get());
        squery_done.push_back(us_since(t0) / 100);
      }
      test::gate g;
      g.close(s);
      for (auto& x : evs) x.record(s);
      for (int rep = 0; rep < 50; ++rep) {
        auto t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        pending.push_back(us_since(t0) / evs.size());
        t0 = bench_clock::now();
        for (int i = 0; i < 100; ++i) (void)d().cuStreamQuery(s.get());
        squery_pending.push_back(us_since(t0) / 100);
      }
      g.open();
      s.synchronize();
      print("cuEventQuery, finished event, first query", bench::summarize(first));
      print("cuEventQuery, finished event, again", bench::summarize(again));
      print("cuEventQuery, pending event", bench::summarize(pending));
      print("cuStreamQuery, finished stream", bench::summarize(squery_done));
      print("cuStreamQuery, pending stream", bench::summarize(squery_pending));
    }

  }  // part 1

  // 2. Open-loop rates.
  constexpr int ops = 64'000, reps = 5;
  if (want(2))
    for (int n : {1, 8, 64}) {
      std::vector<stream> ss = make_streams(ctx, n);
      std::vector<event> es = make_events(ctx, n);
      auto sync = [&] { synchronize(ss); };
      std::vector<double> l, lr, lw, lrq;
      for (int rep = 0; rep < reps; ++rep) {
        l.push_back(rate(ops, [&] {
          for (int i = 0; i < ops; ++i) launch(ss[i % n], empty, one);
        }));
        sync();
        lr.push_back(rate(ops, [&] {
          for (int i = 0; i < ops; ++i) {
            launch(ss[i % n], empty, one);
            es[i % n].record(ss[i % n]);
          }
        }));
        sync();
        lw.push_back(rate(ops, [&] {
          for (int i = 0; i < ops; ++i) {
            launch(ss[i % n], empty, one);
            d().cuStreamWriteValue64(ss[i % n].get(), dev + 8 * (i % n), ++v, 0);
          }
        }));
        sync();
        const auto t0 = bench_clock::now();
        for (int i = 0; i < ops; ++i) {
          launch(ss[i % n], empty, one);
          es[i % n].record(ss[i % n]);
        }
        sync();
        lrq.push_back(ops / (us_since(t0) * 1e-6));
      }
      std::printf("== open loop, %d streams (ops/s) ==\n", n);
      print("launch", bench::summarize(l));
      print("launch + record", bench::summarize(lr));
      print("launch + write-value", bench::summarize(lw));
      print("launch + record, until the GPU finished (GPU-bound?)", bench::summarize(lrq));
    }

  // 3. Closed loop: 64 in flight, one thread.
  const bench::closed_loop loop{.ops = ops, .slots = 64, .kernel = empty};
  if (want(3))
    for (int n : {1, 8, 64}) {
      std::vector<stream> ss = make_streams(ctx, n);
      std::vector<double> by_query, by_word;
      for (int rep = 0; rep < reps; ++rep) {
        by_query.push_back(loop.by_event_query(ss));
        by_word.push_back(loop.by_host_word(ss));
      }
      std::printf("== closed loop, 64 in flight, %d streams (ops/s) ==\n", n);
      print("launch + record, completion by cuEventQuery", bench::summarize(by_query));
      print("launch + write-value, completion by host word", bench::summarize(by_word));
    }

  // 4. Closed loop, two threads: the launcher relaunches what the checker
  // marked done; the checker checks the rest.
  if (want(4))
    for (int n : {1, 8, 64}) {
      std::vector<stream> ss = make_streams(ctx, n);
      constexpr int slots = 64;
      std::vector<event> es = make_events(ctx, slots);
      std::vector<double> by_query, by_word, checker_cores;
      for (int mode = 0; mode < 2; ++mode)
        for (int rep = 0; rep < reps; ++rep) {
          std::vector<std::atomic<int>> done_flag(slots);  // 1: the checker saw it finish; 0: in flight
          std::vector<std::uint64_t> want(slots, 0);
          std::atomic<bool> stop{false};
          auto submit = [&](int i) {
            launch(ss[i % n], empty, one);
            if (mode == 0) {
              es[i].record(ss[i % n]);
            } else {
              want[i] = ++v;
              d().cuStreamWriteValue64(ss[i % n].get(), dev + 8 * i, want[i], 0);
            }
            done_flag[i].store(0, std::memory_order_release);
          };
          for (int i = 0; i < slots; ++i) submit(i);
          std::thread checker([&] {
            scoped_context cur(ctx);
            while (!stop.load(std::memory_order_relaxed))
              for (int i = 0; i < slots; ++i) {
                if (done_flag[i].load(std::memory_order_acquire) != 0) continue;
                const bool finished = mode == 0 ? es[i].query_result() == CUDA_SUCCESS : host[i] >= want[i];
                if (finished) done_flag[i].store(1, std::memory_order_release);
              }
          });
          long long done = 0;
          const double r = rate(ops, [&] {
            while (done < ops)
              for (int i = 0; i < slots && done < ops; ++i)
                if (done_flag[i].load(std::memory_order_acquire) == 1) {
                  ++done;
                  submit(i);
                }
          });
          stop = true;
          checker.join();
          (mode == 0 ? by_query : by_word).push_back(r);
          synchronize(ss);
        }
      std::printf(
          "== closed loop, 64 in flight, %d streams, checks on a "
          "second thread (ops/s) ==\n",
          n);
      print("launch + record, checker: cuEventQuery", bench::summarize(by_query));
      print("launch + write-value, checker: host word", bench::summarize(by_word));
    }
  // 5. Idle against busy streams: 64 streams, one call on each, timed per call.
  if (want(5)) {
    constexpr int n = 64;
    std::vector<stream> ss = make_streams(ctx, n);
    std::vector<event> es = make_events(ctx, n);
    auto sync_all = [&] { synchronize(ss); };
    auto per_call = [&](auto&& call, bool busy) {
      std::vector<double> v;
      for (int rep = 0; rep < 50; ++rep) {
        test::gate g;
        if (busy)
          for (auto& x : ss) g.close(x);
        else
          sync_all();
        const auto t0 = bench_clock::now();
        for (int i = 0; i < n; ++i) call(i);
        v.push_back(us_since(t0) / n);
        g.open();
        sync_all();
      }
      return bench::summarize(std::move(v));
    };
    auto do_launch = [&](int i) { launch(ss[i], empty, one); };
    auto do_record = [&](int i) { es[i].record(ss[i]); };
    auto do_word = [&](int i) { d().cuStreamWriteValue64(ss[i].get(), dev + 8 * i, ++v, 0); };
    auto do_all = [&](int i) {
      launch(ss[i], empty, one);
      d().cuStreamWriteValue64(ss[i].get(), dev + 8 * i, ++v, 0);
      es[i].record(ss[i]);
    };
    std::printf("== host cost per call onto 64 idle vs 64 busy streams (us) ==\n");
    print("launch, idle streams", per_call(do_launch, false));
    print("launch, busy streams", per_call(do_launch, true));
    print("record, idle streams", per_call(do_record, false));
    print("record, busy streams", per_call(do_record, true));
    print("write-value, idle streams", per_call(do_word, false));
    print("write-value, busy streams", per_call(do_word, true));
    print("launch + write-value + record, idle streams", per_call(do_all, false));
    print("launch + write-value + record, busy streams", per_call(do_all, true));
  }
  // 6. Breakdown of an awaited operation, 64 in flight.
  if (want(6))
    for (int n : {8, 64}) {
      std::vector<stream> ss = make_streams(ctx, n);
      constexpr int slots = 64;
      cuda_completion_source& src = cuda_completion_source::instance();
      std::vector<double> raw_word, raw_event, source_only, callbacks, coroutines;
      for (int rep = 0; rep < reps; ++rep) {
        raw_word.push_back(loop.by_host_word(ss));
        raw_event.push_back(loop.by_event_query(ss));
        // The source alone: launch + record (word and event as the service
        // would), query, release.
        source_only.push_back(rate(ops, [&] {
          std::vector<std::uintptr_t> tokens(slots);
          auto submit = [&](int i) {
            launch(ss[i % n], empty, one);
            tokens[i] = src.record(ss[i % n]).into_target().token;
          };
          for (int i = 0; i < slots; ++i) submit(i);
          for (long long done = 0; done < ops;)
            for (int i = 0; i < slots && done < ops; ++i)
              if (src.query(tokens[i]).status == poll_status::ready) {
                src.release(tokens[i]);
                ++done;
                submit(i);
              }
          for (int i = 0; i < slots; ++i) {
            while (src.query(tokens[i]).status == poll_status::pending) {
            }
            src.release(tokens[i]);
          }
        }));
        // The service with plain callbacks (no coroutine frames).
        {
          asio::io_context io;
          asio::use_service<completion_service>(io).set_policy(poll_policy::balanced());
          struct relauncher {
            asio::io_context& io;
            stream_ref s;
            kernel_ref k;
            int left;
            void start() {
              launch(s, k, one);
              async_wait(io.get_executor(), s, [this](std::error_code) {
                if (--left > 0) start();
              });
            }
          };
          std::vector<relauncher> rs;
          for (int i = 0; i < slots; ++i) rs.push_back({io, ss[i % n], empty, ops / slots});
          callbacks.push_back(rate(ops, [&] {
            for (auto& r : rs) r.start();
            io.run();
          }));
        }
        // Coroutines, as bench/async_io.
        {
          asio::io_context io;
          asio::use_service<completion_service>(io).set_policy(poll_policy::balanced());
          for (int c = 0; c < slots; ++c)
            asio::co_spawn(
                io,
                [&, c]() -> asio::awaitable<void> {
                  for (int i = 0; i < ops / slots; ++i) co_await async_launch(ss[c % n], empty, one);
                },
                asio::detached);
          coroutines.push_back(rate(ops, [&] { io.run(); }));
        }
      }
      std::printf("== breakdown, closed loop, 64 in flight, %d streams (ops/s) ==\n", n);
      print("raw: launch + write-value, host word", bench::summarize(raw_word));
      print("raw: launch + record, cuEventQuery", bench::summarize(raw_event));
      print("launch + cuda_completion_source record/query/release", bench::summarize(source_only));
      print("service, callbacks (async_wait(stream))", bench::summarize(callbacks));
      print("service, coroutines (co_await async_launch)", bench::summarize(coroutines));
    }
  // 7. Event flags: record, finished and pending queries, and a closed loop over 64 streams, per kind of event (in
  // turn, twice, in opposite orders, so that warm-up and drift show).
  if (want(7)) {
    struct variant {
      const char* name;
      event_options options;
    };
    // Blocking-sync and interprocess events are left out: in one run on the H200 (commit after 1e92089) this part
    // did not finish within 40 s once it reached the blocking-sync variant; not investigated yet.
    const variant variants[] = {{"timing disabled", {}}, {"timing enabled", {.timing = true}}};
    stream s = stream::create(ctx);
    const std::vector<stream> ss64 = make_streams(ctx, 64), ss1 = make_streams(ctx, 1);
    auto measure = [&](const variant& var) {
      std::vector<event> evs = make_events(ctx, 100, var.options);
      std::vector<double> record, finished, again, other_thread, pending;
      for (int rep = 0; rep < 30; ++rep) {
        s.synchronize();
        auto t0 = bench_clock::now();
        for (auto& x : evs) x.record(s);
        record.push_back(us_since(t0) / evs.size());
        for (auto& x : evs) {
          launch(s, empty, one);
          x.record(s);
        }
        s.synchronize();
        t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        finished.push_back(us_since(t0) / evs.size());
        for (auto& x : evs)
          if (CUresult r = x.query_result(); r != CUDA_SUCCESS) {
            std::printf("-- %s: a finished event's query returned %d: skipped --\n", var.name, int(r));
            return;
          }
        t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        again.push_back(us_since(t0) / evs.size());
        std::thread t([&] {  // no current context on this thread
          const auto t1 = bench_clock::now();
          for (auto& x : evs) (void)x.query_result();
          other_thread.push_back(us_since(t1) / evs.size());
        });
        t.join();
        test::gate g;
        g.close(s);
        for (auto& x : evs) x.record(s);
        t0 = bench_clock::now();
        for (auto& x : evs) (void)x.query_result();
        pending.push_back(us_since(t0) / evs.size());
        g.open();
      }
      std::vector<double> loop64, loop1;
      for (int rep = 0; rep < 3; ++rep) {
        loop64.push_back(loop.by_event_query(ss64, var.options));
        loop1.push_back(loop.by_event_query(ss1, var.options));
      }
      std::printf("-- %s --\n", var.name);
      print("  record (us)", bench::summarize(record));
      print("  query, finished (us)", bench::summarize(finished));
      print("  query, finished, again (us)", bench::summarize(again));
      print("  query, finished, thread without a current context (us)", bench::summarize(other_thread));
      print("  query, pending (us)", bench::summarize(pending));
      print("  closed loop 64 in flight, 64 streams (ops/s)", bench::summarize(loop64));
      print("  closed loop 64 in flight, 1 stream (ops/s)", bench::summarize(loop1));
    };
    std::printf("== events by flags, in order ==\n");
    for (const variant& var : variants) measure(var);
    std::printf("== events by flags, in reverse order ==\n");
    for (int i = static_cast<int>(std::size(variants)) - 1; i >= 0; --i) measure(variants[i]);
  }
  if (want(8)) {
    // A trapped kernel makes the context's error sticky. Whether every later query in the context reports it (and
    // not only one recorded after the faulting work) decides whether one probe per context can replace an event
    // recorded beside each host word.
    std::printf("== after a fault (CUresult) ==\n");
    stream s = stream::create(ctx), idle = stream::create(ctx);
    event done = event::create(ctx), never = event::create(ctx), after = event::create(ctx);
    done.record(s);
    s.synchronize();
    launch(s, test::kernels().kernel("trap_kernel"), one);
    const CUresult recorded = d().cuEventRecord(after.get(), s.get());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto name = [](CUresult r) {
      const char* n = nullptr;
      return d().cuGetErrorName(r, &n) == CUDA_SUCCESS && n ? n : "?";
    };
    std::printf("cuEventRecord after the trapping launch: %s\n", name(recorded));
    std::printf("cuEventQuery, recorded after the fault: %s\n", name(d().cuEventQuery(after.get())));
    std::printf("cuEventQuery, finished before the fault: %s\n", name(d().cuEventQuery(done.get())));
    std::printf("cuEventQuery, never recorded: %s\n", name(d().cuEventQuery(never.get())));
    CUresult other = CUDA_SUCCESS;
    std::thread([&] { other = d().cuEventQuery(done.get()); }).join();
    std::printf("cuEventQuery, finished before the fault, thread without a current context: %s\n", name(other));
    std::printf("cuStreamQuery, idle stream: %s\n", name(d().cuStreamQuery(idle.get())));
    unsigned long long id = 0;
    std::printf("cuStreamGetId, idle stream: %s\n", name(d().cuStreamGetId(idle.get(), &id)));
    CUstreamCaptureStatus cs{};
    std::printf("cuStreamIsCapturing, idle stream: %s\n", name(d().cuStreamIsCapturing(idle.get(), &cs)));
    std::printf("cuStreamWriteValue64, idle stream: %s\n", name(d().cuStreamWriteValue64(idle.get(), dev, 1, 0)));
    std::printf("host word after that write: %llu\n", static_cast<unsigned long long>(host[0]));
    std::fflush(stdout);
    std::_Exit(0);  // the context is gone: nothing to tear down
  }
  return 0;
}
