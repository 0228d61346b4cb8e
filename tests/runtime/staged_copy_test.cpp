#include <cuasync/runtime/copy.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("staged pageable copies are byte-exact at every size and offset", "[runtime][staged][gpu]") {
  auto rt = device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  const std::size_t size = GENERATE(std::size_t{1}, std::size_t{4097}, std::size_t{(4 << 20) + 3},
                                    std::size_t{1} << 30);
  const std::size_t offset = GENERATE(std::size_t{0}, std::size_t{3});
  CAPTURE(size, offset);
  const auto src = test::random_bytes(size + offset, static_cast<unsigned>(size * 7 + offset));
  device_buffer d = device_buffer::allocate(rt->context(), size + 16);
  std::vector<std::byte> back(size + offset + 8, std::byte{0});
  staged_copier& staging = rt->staging();
  staging.copy_to_device(s, d.subspan(offset, size), std::span(src).subspan(offset, size));
  staging.copy_to_host(s, std::span(back).subspan(offset, size), d.subspan(offset, size));
  CHECK(std::memcmp(back.data() + offset, src.data() + offset, size) == 0);
  // Bytes around the range are untouched.
  CHECK(back[offset + size] == std::byte{0});
  if (offset) CHECK(back[offset - 1] == std::byte{0});
}

TEST_CASE("runtime copies stage large pageable memory and count it", "[runtime][staged][gpu]") {
  auto rt = device_runtime::create(0);
  stream s = stream::create(rt->context());
  const std::size_t size = 64 << 20;  // above the staging threshold
  const auto src = test::random_bytes(size);
  std::vector<std::byte> back(size);
  device_buffer d = device_buffer::allocate(rt->context(), size);
  copy_async(*rt, s, d.span(), std::span<const std::byte>(src));   // staged
  copy_async(*rt, s, std::span<std::byte>(back), d.span());         // staged
  s.synchronize();
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  CHECK(rt->stats().staged_copies == 2);
  std::vector<std::byte> small(1000);  // below the threshold
  copy_async(*rt, s, std::span<std::byte>(small), d.subspan(0, 1000));  // small: straight to the driver
  copy_async(*rt, s, std::span<std::byte>(back), d.span(), {.stage_pageable = false});
  s.synchronize();
  CHECK(rt->stats().staged_copies == 2);
  CHECK(rt->stats().pageable_copies == 2);
  CHECK(std::memcmp(small.data(), src.data(), 1000) == 0);
  CHECK_THROWS_WITH(rt->staging().copy_to_device(s, d.subspan(0, 10), std::span<const std::byte>(src).first(11)),
                    Catch::Contains("copy of 11 bytes into a destination of 10 bytes"));
}

namespace {
// Owns the copier it reports for, and destroys it in `done` (as a keep-alive holding the last reference to a runtime
// does), on the thread that completes the copy.
struct destroying_callback final : staged_copy_callback {
  std::unique_ptr<staged_copier> copier;
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::error_code error;
  void enqueued() noexcept override {}
  void done(std::error_code ec, std::exception_ptr) noexcept override {
    copier.reset();
    std::lock_guard lock(mutex);
    error = ec;
    finished = true;
    cv.notify_all();
  }
};
}  // namespace

TEST_CASE("a staged copier destroyed in its own done callback lets the copy finish and nothing wait forever",
          "[runtime][staged][gpu]") {
  stream s = stream::create(test::ctx());
  const std::size_t size = (8 << 20) + 5;  // several chunks of the default ring
  const auto src = test::random_bytes(size);
  device_buffer d = device_buffer::allocate(test::ctx(), size);
  destroying_callback cb;
  cb.copier = std::make_unique<staged_copier>(test::ctx(), staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 3});
  cb.copier->start_to_device(s, d.span(), std::span<const std::byte>(src), &cb);
  {
    std::unique_lock lock(cb.mutex);
    REQUIRE(cb.cv.wait_for(lock, std::chrono::seconds(30), [&] { return cb.finished; }));
  }
  CHECK_FALSE(cb.error);
  CHECK(cb.copier == nullptr);
  std::vector<std::byte> back(size);
  copy_async(s, std::span<std::byte>(back), d.span());  // pageable: the driver's copy returns once it is done
  s.synchronize();
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
}

TEST_CASE("a staged copier destroyed in a device-to-host done call on its copy thread lets that thread go",
          "[runtime][staged][gpu]") {
  stream s = stream::create(test::ctx());
  const std::size_t size = (8 << 20) + 5;
  const auto src = test::random_bytes(size);
  device_buffer d = device_buffer::allocate(test::ctx(), size);
  copy_async(s, d.span(), std::span<const std::byte>(src));
  s.synchronize();
  std::vector<std::byte> back(size);
  destroying_callback cb;
  cb.copier = std::make_unique<staged_copier>(test::ctx(), staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 3});
  cb.copier->start_to_host(s, std::span<std::byte>(back), d.span(), &cb);  // done comes from a copy thread
  {
    std::unique_lock lock(cb.mutex);
    REQUIRE(cb.cv.wait_for(lock, std::chrono::seconds(30), [&] { return cb.finished; }));
  }
  CHECK_FALSE(cb.error);
  CHECK(cb.copier == nullptr);
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
}
