#include <cuasync/driver/error.hpp>

#include <catch2/catch.hpp>

TEST_CASE("cuda_error names the API, the error, the object and the call site", "[driver][error]") {
  try {
    cuasync::detail::throw_invalid("cuasync::copy_async", "zero-size copy on stream 0x1");
    FAIL("no throw");
  } catch (const cuasync::cuda_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("cuasync::copy_async: CUDA_ERROR_INVALID_VALUE"));
    CHECK_THAT(what, Catch::Contains("[zero-size copy on stream 0x1]"));
    CHECK_THAT(what, Catch::Contains("error_test.cpp:"));
    CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
    CHECK(e.code() == cuasync::make_error_code(CUDA_ERROR_INVALID_VALUE));
    CHECK(e.code().category().name() == std::string("cuda"));
    CHECK(e.api() == "cuasync::copy_async");
  }
}

TEST_CASE("a CUresult travels as a std::error_code", "[driver][error]") {
  std::error_code ec = cuasync::make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(ec.value() == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_THAT(ec.message(), Catch::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK(ec != cuasync::make_error_code(CUDA_ERROR_LAUNCH_FAILED));
}
