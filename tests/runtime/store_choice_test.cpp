// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The store kind chosen by measurement (runtime/store_choice.hpp), and staged copies byte-exact at the sizes where
// their ramped first and last chunks begin, both ways, with each store kind (on the simulated driver).
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/runtime/staged_copy.hpp>
#include <cuasync/runtime/store_choice.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <cstring>

using namespace cuasync;
using namespace cuasync::runtime;
using namespace std::chrono_literals;

TEST_CASE("the store chooser times both kinds alternately, then keeps the faster per size class", "[runtime][staged]") {
  store_chooser c;
  constexpr std::size_t copy = std::size_t{64} << 20, chunk = std::size_t{8} << 20;
  CHECK(c.decision(copy) == 0);
  CHECK_FALSE(c.streaming(copy));  // regular stores until decided
  CHECK_FALSE(c.next(copy, 4096).sample);  // too small to time
  int streaming_samples = 0, regular_samples = 0;
  std::vector<store_chooser::pick> picks;
  for (int i = 0; i < 2 * store_chooser::samples_per_kind; ++i) {
    const store_chooser::pick p = c.next(copy, chunk);
    REQUIRE(p.sample);
    (p.streaming ? streaming_samples : regular_samples) += 1;
    picks.push_back(p);
  }
  CHECK(streaming_samples == store_chooser::samples_per_kind);
  CHECK(regular_samples == store_chooser::samples_per_kind);
  CHECK_FALSE(c.next(copy, chunk).sample);  // every sample handed out: regular stores until the results are in
  // Streaming stores twice as fast here: decided once the last result is in, for this size class only.
  for (std::size_t i = 0; i < picks.size(); ++i) {
    CHECK(c.decision(copy) == 0);
    c.report(copy, picks[i].streaming, chunk, picks[i].streaming ? 1ms : 2ms);
  }
  CHECK(c.decision(copy) == 2);
  CHECK(c.streaming(copy));
  CHECK(c.next(copy, chunk).streaming);
  CHECK_FALSE(c.next(copy, chunk).sample);
  CHECK(c.decision(std::size_t{1} << 30) == 0);  // another size class decides on its own
  CHECK(c.decision(copy + 1) == 2);              // the same class

  store_chooser forced(store_kind::streaming);
  CHECK(forced.streaming(copy));
  CHECK_FALSE(forced.next(copy, chunk).sample);
  CHECK(store_chooser(store_kind::regular).next(copy, chunk).streaming == false);
}

TEST_CASE("staged copies are byte-exact where their ramped chunks begin, both ways, with each store kind",
          "[runtime][staged][cold][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  constexpr std::size_t chunk = 64 << 10;
  const store_kind kind = GENERATE(store_kind::automatic, store_kind::regular, store_kind::streaming);
  const bool ramp = GENERATE(true, false);
  staged_copier copier(ctx, {.chunk_bytes = chunk, .chunks = 3, .threads = 2, .h2d_stores = kind,
                             .d2h_stores = kind, .ramp = ramp});
  for (std::size_t size : {4 * chunk - 1, 4 * chunk, 4 * chunk + 1, 7 * chunk + 5, 2 * chunk / 8 * 7 + 4 * chunk,
                           23 * chunk + 4095}) {
    CAPTURE(static_cast<int>(kind), ramp, size);
    std::vector<std::byte> src(size), back(size);
    for (std::size_t i = 0; i < size; ++i) src[i] = static_cast<std::byte>(i * 7 + (i >> 8) + size);
    device_buffer d = device_buffer::allocate(ctx, size);
    copier.copy_to_device(s, d.span(), src);
    copier.copy_to_host(s, back, d.span());
    CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  }
}
