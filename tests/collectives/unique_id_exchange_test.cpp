// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The unique-id hand-off over a Unix socket, fully on the CPU: threads stand in for the ranks' processes.
#include <cuasync/collectives/unique_id_exchange.hpp>

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

using namespace cuasync;
using namespace cuasync::collectives;
using namespace std::chrono_literals;

namespace {

std::string socket_path(const char* name) {
  return (std::filesystem::temp_directory_path() / ("cuasync-" + std::string(name) + "-" + std::to_string(::getpid())))
      .string();
}

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  return a;
}

unique_id some_id() {
  unique_id id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<char>(i * 7 + 3);
  return id;
}

}  // namespace

TEST_CASE("rank 0's id reaches every other rank over a Unix socket", "[collectives][unique_id]") {
  const std::string path = socket_path("id");
  const unique_id id = some_id();
  // The receivers start first: they wait for the socket to appear.
  auto a = std::async(std::launch::async, [&] { return fetch_unique_id(path, 10s); });
  auto b = std::async(std::launch::async, [&] { return fetch_unique_id(path, 10s); });
  std::this_thread::sleep_for(20ms);
  publish_unique_id(id, path, 2, 10s);
  CHECK(a.get() == id);
  CHECK(b.get() == id);
  CHECK_FALSE(std::filesystem::exists(path));  // the publisher removed its socket
}

TEST_CASE("a stale socket file is replaced", "[collectives][unique_id]") {
  const std::string path = socket_path("stale");
  {
    // What a publisher that died leaves: a bound socket's file, nobody listening.
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    const sockaddr_un a = address(path);
    ::unlink(path.c_str());
    REQUIRE(::bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    ::close(s);
  }
  REQUIRE(std::filesystem::is_socket(path));
  const unique_id id = some_id();
  auto got = std::async(std::launch::async, [&] { return fetch_unique_id(path, 10s); });
  publish_unique_id(id, path, 1, 10s);
  CHECK(got.get() == id);
}

TEST_CASE("a path that is not a socket is refused, and left as it is", "[collectives][unique_id]") {
  const std::string file = socket_path("regular");
  { std::ofstream(file) << "somebody's data"; }
  CHECK_THROWS_WITH(publish_unique_id(some_id(), file, 1, 100ms),
                    Catch::Contains(file) && Catch::Contains("not a socket"));
  std::string kept;
  std::getline(std::ifstream(file), kept);
  CHECK(kept == "somebody's data");
  std::filesystem::remove(file);

  const std::string dir = socket_path("dir");
  std::filesystem::create_directory(dir);
  CHECK_THROWS_WITH(publish_unique_id(some_id(), dir, 1, 100ms),
                    Catch::Contains(dir) && Catch::Contains("not a socket"));
  CHECK(std::filesystem::is_directory(dir));
  std::filesystem::remove(dir);
}

TEST_CASE("a publisher leaving removes its own socket only, not a later publisher's", "[collectives][unique_id]") {
  const std::string path = socket_path("two");
  const unique_id first = some_id();
  unique_id second = some_id();
  second.bytes[0] = 'B';
  // A waits for a rank that never comes; B replaces A's socket file meanwhile (the one that counts is B's now).
  auto a = std::async(std::launch::async, [&] { publish_unique_id(first, path, 1, 300ms); });
  while (!std::filesystem::exists(path)) std::this_thread::sleep_for(1ms);
  auto b = std::async(std::launch::async, [&] { publish_unique_id(second, path, 1, 10s); });
  CHECK_THROWS_AS(a.get(), cuda_error);  // timed out, and left
  CHECK(fetch_unique_id(path, 2s) == second);
  b.get();
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a fetcher that leaves before the id is sent does not stop the publisher", "[collectives][unique_id]") {
  const std::string path = socket_path("dead");
  const unique_id id = some_id();
  auto published = std::async(std::launch::async, [&] { publish_unique_id(id, path, 1, 10s); });
  while (!std::filesystem::exists(path)) std::this_thread::sleep_for(1ms);
  {
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    const sockaddr_un a = address(path);
    REQUIRE(::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
    ::shutdown(s, SHUT_RDWR);
    ::close(s);
  }
  std::this_thread::sleep_for(50ms);
  CHECK(fetch_unique_id(path, 5s) == id);
  CHECK_NOTHROW(published.get());
}

TEST_CASE("fetching times out when nobody publishes", "[collectives][unique_id]") {
  const std::string path = socket_path("nobody");
  const auto start = std::chrono::steady_clock::now();
  try {
    fetch_unique_id(path, 50ms);
    FAIL("an id arrived from nowhere");
  } catch (const cuda_error& e) {
    CHECK(e.code() == std::errc::timed_out);
    CHECK_THAT(std::string(e.what()), Catch::Contains(path));
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("publishing times out when a rank never comes", "[collectives][unique_id]") {
  const std::string path = socket_path("absent");
  try {
    publish_unique_id(some_id(), path, 1, 50ms);
    FAIL("publish returned without a receiver");
  } catch (const cuda_error& e) {
    CHECK(e.code() == std::errc::timed_out);
    CHECK_THAT(std::string(e.what()), Catch::Contains("0 of 1 ranks"));
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a peer that is not a cuasync publisher is a protocol error", "[collectives][unique_id]") {
  const std::string path = socket_path("garbage");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  ::unlink(path.c_str());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s, 1) == 0);
  std::thread server([&] {
    int c = ::accept(s, nullptr, nullptr);
    const char junk[] = "HTTP/1.1 400 Bad Request\r\n";
    (void)!::write(c, junk, sizeof junk);
    ::close(c);
  });
  try {
    fetch_unique_id(path, 5s);
    FAIL("junk was taken for an id");
  } catch (const cuda_error& e) {
    CHECK(e.code() == std::errc::protocol_error);
  }
  server.join();
  ::close(s);
  ::unlink(path.c_str());
}

TEST_CASE("socket paths too long for an address and bad ranks are refused", "[collectives][unique_id]") {
  const std::string long_path(200, 'x');
  CHECK_THROWS_WITH(fetch_unique_id(long_path, 10ms), Catch::Contains("longer than"));
  CHECK_THROWS_WITH(publish_unique_id(some_id(), "", 1, 10ms), Catch::Contains("empty"));
  CHECK_THROWS_WITH(exchange_unique_id(2, 2, socket_path("rank")), Catch::Contains("rank 2 of 2"));
}
