// A probe, not a benchmark of cuasync: what the driver charges for each way of learning that stream work finished,
// so the completion source is chosen on figures. Raw driver calls only.
//   1. host cost per call: event record, stream write-value to mapped pinned memory, stream id, event and stream
//      queries on finished and pending work;
//   2. open-loop rates over 1, 8 and 64 streams: launch alone, launch + record, launch + write-value;
//   3. closed-loop rates (64 operations in flight on one thread, each relaunched once its completion is seen):
//      completion seen by cuEventQuery, against completion seen by reading a host word written by the stream;
//   4. the same closed loops with the completion check on a second thread (a poller), so the launching thread only
//      launches: does the driver let the two threads run in parallel?
// Usage: cuasync_completion_probe
#include "bench.hpp"
#include "gpu.hpp"
#include "raw_closed_loop.hpp"

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

using namespace cuasync;
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

template <class F>
double rate(int ops, F&& body) {
  const auto t0 = bench_clock::now();
  body();
  return ops / (us_since(t0) * 1e-6);
}
}  // namespace

int main() {
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

  // 1. Per-call costs.
  std::printf("== host cost per call (us) ==\n");
  stream s = stream::create(ctx);
  event e = event::create(ctx);
  print("cuEventRecord (timing disabled), idle stream",
        measure_us(200, 50, [&] { e.record(s); }, [&] { s.synchronize(); }));
  std::uint64_t v = 0;
  print("cuStreamWriteValue64 (host word), idle stream",
        measure_us(200, 50, [&] { d().cuStreamWriteValue64(s.get(), dev, ++v, 0); }, [&] { s.synchronize(); }));
  print("cuStreamWriteValue64 NO_MEMORY_BARRIER",
        measure_us(200, 50, [&] { d().cuStreamWriteValue64(s.get(), dev, ++v, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER); },
                   [&] { s.synchronize(); }));
  print("cuStreamWriteValue32 (host word)",
        measure_us(200, 50, [&] { d().cuStreamWriteValue32(s.get(), dev, static_cast<cuuint32_t>(++v), 0); },
                   [&] { s.synchronize(); }));
  print("cuStreamGetId", measure_us(200, 100, [&] { (void)s.id(); }));
  {
    // First query of a finished event vs a repeated one.
    std::vector<event> evs;
    for (int i = 0; i < 100; ++i) evs.push_back(event::create(ctx));
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

  // 2. Open-loop rates.
  constexpr int ops = 64'000, reps = 5;
  for (int n : {1, 8, 64}) {
    std::vector<stream> ss;
    std::vector<event> es;
    for (int i = 0; i < n; ++i) {
      ss.push_back(stream::create(ctx));
      es.push_back(event::create(ctx));
    }
    auto sync = [&] {
      for (auto& x : ss) x.synchronize();
    };
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
  for (int n : {1, 8, 64}) {
    std::vector<stream> ss;
    for (int i = 0; i < n; ++i) ss.push_back(stream::create(ctx));
    std::vector<double> by_query, by_word;
    for (int rep = 0; rep < reps; ++rep) {
      by_query.push_back(loop.by_event_query(ss));
      by_word.push_back(loop.by_host_word(ss));
    }
    std::printf("== closed loop, 64 in flight, %d streams (ops/s) ==\n", n);
    print("launch + record, completion by cuEventQuery", bench::summarize(by_query));
    print("launch + write-value, completion by host word", bench::summarize(by_word));
  }

  // 4. Closed loop, two threads: the launcher relaunches what the checker marked done; the checker checks the rest.
  for (int n : {1, 8, 64}) {
    std::vector<stream> ss;
    for (int i = 0; i < n; ++i) ss.push_back(stream::create(ctx));
    constexpr int slots = 64;
    std::vector<event> es;
    for (int i = 0; i < slots; ++i) es.push_back(event::create(ctx));
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
              const bool finished =
                  mode == 0 ? es[i].query_result() == CUDA_SUCCESS : host[i] >= want[i];
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
        for (auto& x : ss) x.synchronize();
      }
    std::printf("== closed loop, 64 in flight, %d streams, checks on a second thread (ops/s) ==\n", n);
    print("launch + record, checker: cuEventQuery", bench::summarize(by_query));
    print("launch + write-value, checker: host word", bench::summarize(by_word));
  }
  return 0;
}
