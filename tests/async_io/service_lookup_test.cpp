// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// completion_service::of: the initiation's service lookup without Asio's registry lock, cached per thread. It must
// never hand out a destroyed context's service to a context created later at the same address.
#include <cuasync/async_io.hpp>

#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <new>

using namespace cuasync;
namespace asio = boost::asio;

TEST_CASE("completion_service::of finds each io_context's own service, also one created where another was",
          "[async_io]") {
  alignas(asio::io_context) unsigned char storage[sizeof(asio::io_context)];
  auto* first = new (storage) asio::io_context;
  completion_service& a = completion_service::of(*first);
  CHECK(&a == &asio::use_service<completion_service>(*first));
  CHECK(&completion_service::of(*first) == &a);  // the cached answer
  asio::io_context other;
  CHECK(&completion_service::of(other) == &asio::use_service<completion_service>(other));
  CHECK(&completion_service::of(*first) == &a);
  std::destroy_at(first);
  auto* second = new (storage) asio::io_context;  // same address, a new service
  CHECK(&completion_service::of(*second) == &asio::use_service<completion_service>(*second));
  std::destroy_at(second);
}
