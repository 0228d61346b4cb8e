// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Group bookkeeping without a GPU (NCCL's group calls only count, when nothing is queued in them): the per-call
// awaitables refuse to run inside an open group, whose collectives are issued only when it ends.
#include <cuasync/collectives/async_collectives.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/use_future.hpp>

using namespace cuasync;
using namespace cuasync::collectives;

TEST_CASE("awaitable collectives refuse to run inside an open group", "[collectives][group]") {
  try {
    collectives::detail::nccl();
  } catch (const nccl_not_found_error& e) {
    WARN("skipped: no NCCL here: " << e.what());
    return;
  }
  const communicator none;
  const device_span four{0x10000, 4};
  const stream_ref s;
  auto awaited = [&] {
    return async_all_reduce(none, four, four, data_type::float32, reduce_op::sum, s, boost::asio::use_future);
  };
  CHECK(group::depth() == 0);
  {
    group outer;
    {
      group inner;
      CHECK(group::depth() == 2);
      CHECK_THROWS_WITH(awaited(), Catch::Contains("inside an open group"));
      inner.end();
    }
    CHECK(group::depth() == 1);
    outer.end();
    CHECK_THROWS_WITH(outer.end(), Catch::Contains("ended already"));
  }
  CHECK(group::depth() == 0);
  CHECK_THROWS_WITH(awaited(), Catch::Contains("empty communicator"));  // outside a group, the next check speaks
}
