// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The POSIX file descriptor path of IPC: fd passing over a socketpair (no GPU), and on the GPU an allocation
// exported, passed and imported again in the same process (a second mapping of the same memory). Across two
// processes: examples/ipc/fd_producer_consumer.
#include <cuasync/driver/shareable_memory.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/fd_passing.hpp>
#include <cuasync/driver/stream.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

using namespace cuasync;

namespace {

struct socket_pair {
  unique_fd a, b;
  explicit socket_pair(int type = SOCK_STREAM) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) == 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

struct pipe_pair {
  unique_fd read, write;
  pipe_pair() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
};

// The errno a call failed with, and its message.
template <class F>
std::pair<int, std::string> system_failure(F&& f) {
  try {
    f();
  } catch (const std::system_error& e) {
    return {e.code().value(), e.what()};
  }
  return {0, "no throw"};
}

// What a producer sends beside its descriptor (as examples/ipc does).
struct fd_payload {
  std::uint64_t size = 0;
  std::int32_t device = -1;
};

}  // namespace

TEST_CASE("a descriptor and its payload cross a socketpair intact", "[driver][ipc][fd]") {
  pipe_pair p;
  const std::string message = "through the passed descriptor";
  SECTION("stream socket, small payload") {
    socket_pair s;
    const fd_payload sent{std::uint64_t{64} << 20, 3};
    send_fd(s.a.get(), p.write.get(), std::as_bytes(std::span(&sent, 1)));
    fd_payload got;
    unique_fd fd = receive_fd(s.b.get(), std::as_writable_bytes(std::span(&got, 1)));
    REQUIRE(fd);
    CHECK(fd.get() != p.write.get());
    CHECK(got.size == sent.size);
    CHECK(got.device == 3);
    CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
    p.write.reset();  // the received descriptor alone keeps the pipe's write end open
    REQUIRE(::write(fd.get(), message.data(), message.size()) == static_cast<ssize_t>(message.size()));
  }
  SECTION("stream socket, a payload larger than the socket buffer (sent in pieces)") {
    socket_pair s;
    const std::vector<std::byte> sent = test::random_bytes(std::size_t{1} << 20);
    std::thread sender([&] { send_fd(s.a.get(), p.write.get(), sent); });
    std::vector<std::byte> got(sent.size());
    unique_fd fd = receive_fd(s.b.get(), got);
    sender.join();
    CHECK(got == sent);
    REQUIRE(::write(fd.get(), message.data(), message.size()) == static_cast<ssize_t>(message.size()));
  }
  SECTION("seqpacket socket") {
    socket_pair s(SOCK_SEQPACKET);
    const std::array<std::byte, 3> sent{std::byte{1}, std::byte{2}, std::byte{3}};
    send_fd(s.a.get(), p.write.get(), sent);
    std::array<std::byte, 3> got{};
    unique_fd fd = receive_fd(s.b.get(), got);
    CHECK(got == sent);
    REQUIRE(::write(fd.get(), message.data(), message.size()) == static_cast<ssize_t>(message.size()));
  }
  std::string read_back(message.size(), '\0');
  REQUIRE(::read(p.read.get(), read_back.data(), read_back.size()) == static_cast<ssize_t>(message.size()));
  CHECK(read_back == message);
}

TEST_CASE("fd passing fails with errno on closed sockets and protocol mismatches", "[driver][ipc][fd]") {
  pipe_pair p;
  const std::array<std::byte, 4> payload{};
  std::array<std::byte, 4> into{};
  socket_pair s;
  SECTION("sending to a peer that closed its end") {
    s.b.reset();
    auto [err, what] = system_failure([&] { send_fd(s.a.get(), p.write.get(), payload); });
    CHECK(err == EPIPE);
    CHECK_THAT(what, Catch::Contains("cuasync::send_fd") && Catch::Contains("sendmsg"));
  }
  SECTION("receiving from a peer that closed its end") {
    s.a.reset();
    auto [err, what] = system_failure([&] { receive_fd(s.b.get(), into); });
    CHECK(err == ECONNRESET);
    CHECK_THAT(what, Catch::Contains("cuasync::receive_fd") && Catch::Contains("closed the connection"));
  }
  SECTION("a peer that closes in the middle of the payload") {
    send_fd(s.a.get(), p.write.get(), std::span(payload).first(2));
    s.a.reset();
    auto [err, what] = system_failure([&] { receive_fd(s.b.get(), into); });
    CHECK(err == ECONNRESET);
    CHECK_THAT(what, Catch::Contains("after 2 of 4 payload bytes"));
  }
  SECTION("bytes without a descriptor") {
    REQUIRE(::send(s.a.get(), payload.data(), payload.size(), 0) == 4);
    auto [err, what] = system_failure([&] { receive_fd(s.b.get(), into); });
    CHECK(err == EPROTO);
    CHECK_THAT(what, Catch::Contains("without a descriptor"));
  }
  SECTION("a closed socket, a closed descriptor, an empty payload") {
    const int closed = s.a.release();
    ::close(closed);
    CHECK(system_failure([&] { send_fd(closed, p.write.get(), payload); }).first == EBADF);
    CHECK(system_failure([&] { receive_fd(closed, into); }).first == EBADF);
    const int gone = p.write.release();
    ::close(gone);
    CHECK(system_failure([&] { send_fd(s.b.get(), gone, payload); }).first == EBADF);
    CHECK(system_failure([&] { send_fd(s.b.get(), p.read.get(), {}); }).first == EINVAL);
    CHECK(system_failure([&] { receive_fd(s.b.get(), {}); }).first == EINVAL);
  }
}

TEST_CASE("unique_fd owns one descriptor; shareable owners are move-only and refuse empty input", "[driver][ipc][fd]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<unique_fd>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<unique_fd>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<shareable_allocation>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<shareable_allocation>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<shareable_mapping>);
  {
    pipe_pair p;
    unique_fd moved(std::move(p.write));
    CHECK_FALSE(p.write);
    CHECK(moved);
    const int raw = moved.release();
    CHECK_FALSE(moved);
    CHECK(::fcntl(raw, F_GETFD) != -1);  // released, not closed
    moved.reset(raw);
    moved = unique_fd();  // closes it
    CHECK(::fcntl(raw, F_GETFD) == -1);
  }
  shareable_allocation none;
  CHECK_FALSE(none);
  CHECK(none.size() == 0);
  shareable_allocation moved(std::move(none));
  CHECK_FALSE(moved);
  CHECK_THROWS_WITH(moved.export_fd(), Catch::Contains("empty allocation"));
  CHECK_THROWS_WITH(shareable_allocation::allocate(context_ref(), 1), Catch::Contains("empty context"));
  CHECK_THROWS_WITH(shareable_mapping::open(context_ref(), 0, 1, 0), Catch::Contains("empty context"));
  shareable_mapping m;
  CHECK_FALSE(m);
  CHECK(m.span().size == 0);
}

TEST_CASE("shareable_allocation::supported agrees with what allocate does", "[driver][ipc][shareable][gpu]") {
  const device dev = test::ctx().device();
  if (shareable_allocation::supported(dev)) {
    shareable_allocation a = shareable_allocation::allocate(test::ctx(), 1);
    REQUIRE(a);
    CHECK(a.size() >= 1);
    CHECK(a.size() == detail::shareable_granularity(dev.ordinal(), std::source_location::current()));
    CHECK(a.span().ptr != 0);
    CHECK(a.context() == test::ctx());
  } else {
    try {
      shareable_allocation::allocate(test::ctx(), 1);
      FAIL("allocate succeeded on a device that supported() refuses");
    } catch (const cuda_error& e) {
      CHECK(e.result() == CUDA_ERROR_NOT_SUPPORTED);
      CHECK_THAT(e.what(), Catch::Contains("device " + std::to_string(dev.ordinal())));
    }
  }
}

TEST_CASE("memory exported as a descriptor, passed and imported again shows the same bytes",
          "[driver][ipc][shareable][gpu]") {
  if (!shareable_allocation::supported(test::ctx().device())) {
    WARN("skipped: device 0 cannot export memory as a POSIX file descriptor");
    return;
  }
  (void)test::ctx().take_deferred_error();  // an earlier test's, if any: this one checks its own at the end
  const std::size_t asked = (std::size_t{4} << 20) + 1;
  shareable_allocation a = shareable_allocation::allocate(test::ctx(), asked);
  REQUIRE(a.size() >= asked);
  // Through a socketpair, as another process would get it; the exported descriptor is closed once sent.
  unique_fd received;
  {
    socket_pair s;
    unique_fd exported = a.export_fd();
    REQUIRE(exported);
    const fd_payload sent{a.size(), a.context().device_ordinal()};
    send_fd(s.a.get(), exported.get(), std::as_bytes(std::span(&sent, 1)));
    fd_payload got;
    received = receive_fd(s.b.get(), std::as_writable_bytes(std::span(&got, 1)));
    REQUIRE(got.size == a.size());
    REQUIRE(got.device == 0);
  }
  shareable_mapping m = shareable_mapping::open(test::ctx(), received.get(), a.size(), 0);
  received.reset();  // the importer does not need the descriptor after open
  REQUIRE(m);
  CHECK(m.size() == a.size());
  CHECK(m.span().ptr != a.span().ptr);  // a second address range of the same memory

  stream s = stream::create(test::ctx());
  const std::vector<std::byte> data = test::random_bytes(a.size());
  std::vector<std::byte> out(a.size());
  copy_async(s, a.span(), std::span<const std::byte>(data));  // written through the allocation's range ...
  copy_async(s, std::span<std::byte>(out), m.span());        // ... read through the imported one
  s.synchronize();
  CHECK(out == data);

  constexpr std::uint32_t word = 0x5eedc0de;
  memset32_async(s, m.span(), word);  // and the other way round
  std::vector<std::uint32_t> words(a.size() / 4);
  copy_async(s, std::span<std::uint32_t>(words), a.span());
  s.synchronize();
  CHECK(std::count(words.begin(), words.end(), word) == static_cast<std::ptrdiff_t>(words.size()));

  // The exporter's release leaves the importer's mapping valid: the memory lives while something maps it.
  const std::size_t size = a.size();
  a = shareable_allocation();
  CHECK_FALSE(a);
  std::fill(words.begin(), words.end(), 0u);
  copy_async(s, std::span<std::uint32_t>(words), m.span().subspan(0, size));
  s.synchronize();
  CHECK(std::count(words.begin(), words.end(), word) == static_cast<std::ptrdiff_t>(words.size()));
  m = shareable_mapping();
  CHECK_FALSE(test::ctx().take_deferred_error());
}

TEST_CASE("a descriptor of device 0's memory is mapped on device 1 and read there",
          "[driver][ipc][shareable][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  if (!shareable_allocation::supported(device::get(0)) || !device::get(1).can_access_peer(device::get(0))) {
    WARN("skipped: device 0 exports no descriptors, or device 1 cannot reach device 0's memory");
    return;
  }
  primary_context other = primary_context::retain(1);
  shareable_allocation a = shareable_allocation::allocate(test::ctx(), std::size_t{8} << 20);
  stream s0 = stream::create(test::ctx());
  memset32_async(s0, a.span(), 0xfeedf00du);
  s0.synchronize();
  shareable_mapping m = shareable_mapping::open(other, a.export_fd().get(), a.size(), 0);
  stream s1 = stream::create(other);
  std::vector<std::uint32_t> words(a.size() / 4);
  copy_async(s1, std::span<std::uint32_t>(words), m.span());  // device 1 reads device 0's memory as a peer
  s1.synchronize();
  CHECK(std::count(words.begin(), words.end(), 0xfeedf00du) == static_cast<std::ptrdiff_t>(words.size()));
  m = shareable_mapping();
  CHECK_FALSE(other.take_deferred_error());
}
