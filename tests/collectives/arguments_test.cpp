// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bad arguments are refused before NCCL or the GPU sees them (no GPU needed: the checks come first).
#include <cuasync/collectives/collective_completion.hpp>
#include <cuasync/collectives/collective_ops.hpp>
#include <cuasync/collectives/communicator.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace cuasync;
using namespace cuasync::collectives;

namespace {

// The message of the cuda_error(CUDA_ERROR_INVALID_VALUE) that `f` throws.
template <class F>
std::string invalid_value_message(F&& f) {
  try {
    f();
  } catch (const cuda_error& e) {
    CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
    return e.what();
  }
  FAIL("nothing was thrown");
  return {};
}

// A fake device address: nothing dereferences it, the checks refuse the call first.
constexpr CUdeviceptr some_address = 0x10000;

}  // namespace

TEST_CASE("init_all refuses an empty or repeated device list", "[collectives][arguments]") {
  CHECK_THAT(invalid_value_message([] { communicator::init_all(std::vector<int>{}); }),
             Catch::Contains("no devices"));
  CHECK_THAT(invalid_value_message([] { communicator::init_all(std::vector<int>{1, 0, 1}); }),
             Catch::Contains("listed twice"));
  // A braced list, as the docs write it.
  CHECK_THAT(invalid_value_message([] { communicator::init_all({0, 0}); }), Catch::Contains("listed twice"));
  CHECK_THAT(invalid_value_message([] { communicator::init_all({}); }), Catch::Contains("no devices"));
}

TEST_CASE("init_rank refuses a rank outside the communicator and an id never generated", "[collectives][arguments]") {
  unique_id id;
  id.bytes[0] = 1;
  CHECK_THAT(invalid_value_message([&] { communicator::init_rank(id, 2, 2, 0); }), Catch::Contains("rank 2 outside [0, 2)"));
  CHECK_THAT(invalid_value_message([&] { communicator::init_rank(id, 2, -1, 0); }), Catch::Contains("rank -1"));
  CHECK_THAT(invalid_value_message([&] { communicator::init_rank(id, 0, 0, 0); }), Catch::Contains("nranks 0 < 1"));
  CHECK_THAT(invalid_value_message([] { communicator::init_rank(unique_id{}, 2, 0, 0); }),
             Catch::Contains("all zeros"));
}

TEST_CASE("collectives check buffer sizes against the element type and the communicator", "[collectives][arguments]") {
  const communicator none;
  const stream_ref s;
  const device_span eight{some_address, 8}, six{some_address, 6}, four{some_address, 4};
  SECTION("whole elements") {
    CHECK_THAT(invalid_value_message([&] { all_reduce(none, six, six, data_type::float32, reduce_op::sum, s); }),
               Catch::Contains("not a whole number of 4-byte elements"));
  }
  SECTION("recv matches send") {
    CHECK_THAT(invalid_value_message([&] { all_reduce(none, eight, four, data_type::float32, reduce_op::sum, s); }),
               Catch::Contains("recv is 4 B, expected 8 B"));
  }
  SECTION("an unknown data type") {
    CHECK_THAT(invalid_value_message([&] { all_reduce(none, eight, eight, static_cast<data_type>(42), reduce_op::sum, s); }),
               Catch::Contains("unknown data type 42"));
  }
  SECTION("a null buffer with a size") {
    CHECK_THAT(invalid_value_message([&] { all_reduce(none, device_span{0, 8}, eight, data_type::int32, reduce_op::sum, s); }),
               Catch::Contains("send is null"));
  }
  SECTION("an empty communicator, once the sizes are right") {
    CHECK_THAT(invalid_value_message([&] { all_reduce(none, eight, eight, data_type::float64, reduce_op::max, s); }),
               Catch::Contains("empty communicator"));
    CHECK_THAT(invalid_value_message([&] { all_gather(none, four, eight, data_type::int32, s); }),
               Catch::Contains("empty communicator"));
    CHECK_THAT(invalid_value_message([&] { send(none, four, data_type::int32, 0, s); }),
               Catch::Contains("peer 0 outside [0, 0)"));
    CHECK_THAT(invalid_value_message([&] { broadcast(none, four, four, data_type::int32, 0, s); }),
               Catch::Contains("root 0 outside [0, 0)"));
  }
  SECTION("waiting on an empty communicator") {
    CHECK_THAT(invalid_value_message([&] { collective_completion_source::instance().record(none, s); }),
               Catch::Contains("empty communicator"));
    const std::vector<rank_part> parts{{none, s}};
    CHECK_THAT(invalid_value_message([&] { collective_completion_source::instance().record(parts); }),
               Catch::Contains("empty communicator"));
    const std::span<const rank_part> no_parts;
    CHECK_THAT(invalid_value_message([&] { collective_completion_source::instance().record(no_parts); }),
               Catch::Contains("no rank parts"));
  }
}

TEST_CASE("element sizes follow NCCL's types", "[collectives][arguments]") {
  CHECK(element_size(data_type::int8) == 1);
  CHECK(element_size(data_type::bfloat16) == 2);
  CHECK(element_size(data_type::float32) == 4);
  CHECK(element_size(data_type::uint64) == 8);
  CHECK(element_size(static_cast<data_type>(99)) == 0);
  STATIC_REQUIRE(data_type_of<float>() == data_type::float32);
  STATIC_REQUIRE(data_type_of<std::int64_t>() == data_type::int64);
}

TEST_CASE("an empty communicator says so", "[collectives][arguments]") {
  const communicator none;
  CHECK_FALSE(none);
  CHECK(none.size() == 0);
  CHECK(none.rank() == -1);
  CHECK(none.describe() == "an empty communicator");
  CHECK_FALSE(none.fault());
}
