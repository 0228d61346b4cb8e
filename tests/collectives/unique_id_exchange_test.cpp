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
  { std::ofstream(path) << "left over"; }
  const unique_id id = some_id();
  auto got = std::async(std::launch::async, [&] { return fetch_unique_id(path, 10s); });
  publish_unique_id(id, path, 1, 10s);
  CHECK(got.get() == id);
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
