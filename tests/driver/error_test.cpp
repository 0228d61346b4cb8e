// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/error.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "gpu.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/host_registration.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>

#include <array>

TEST_CASE("cuda_error names the API, the error, the object and the call site", "[driver][error]") {
  try {
    cuasync::detail::throw_invalid("cuasync::copy_async", "zero-size copy on stream 0x1", std::source_location::current());
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

TEST_CASE("what() is the documented text: the status once, then the object and the call site", "[driver][error]") {
  // std::system_error(code, text) would append ": " and the status again.
  const cuasync::cuda_error e(cuasync::make_error_code(CUDA_ERROR_INVALID_VALUE), "cuasync::copy_async",
                              "zero-size copy on stream 0x1");
  const std::string what = e.what();
  INFO(what);
  CHECK(what.find("CUDA_ERROR_INVALID_VALUE") == what.rfind("CUDA_ERROR_INVALID_VALUE"));
  CHECK_THAT(what, Catch::StartsWith("cuasync::copy_async: CUDA_ERROR_INVALID_VALUE"));
  CHECK_THAT(what, Catch::EndsWith(std::string(" in ") + e.where().function_name()));
  const cuasync::cuda_error copy = e;  // exceptions are copied: the text travels
  CHECK(std::string(copy.what()) == what);
  const std::string sticky = cuasync::cuda_error(cuasync::make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS), "cuEventQuery",
                                                 "").what();
  CHECK(sticky.find("CUDA_ERROR_ILLEGAL_ADDRESS") == sticky.rfind("CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK_THAT(sticky, Catch::EndsWith("start anew"));
}

TEST_CASE("a CUresult travels as a std::error_code", "[driver][error]") {
  std::error_code ec = cuasync::make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(ec.value() == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_THAT(ec.message(), Catch::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK(ec != cuasync::make_error_code(CUDA_ERROR_LAUNCH_FAILED));
}

TEST_CASE("refused arguments are errors that name the caller's line rather than cuasync's", "[driver][error]") {
  // Each is refused before any driver call, so no GPU (and no driver) is needed.
  using namespace cuasync;
  using test::check_call_site;
  using test::error_of;
  const std::array<std::byte, 8> host{};
  check_call_site(error_of([&] { stream::create(context_ref{}); }));
  check_call_site(error_of([&] { stream_ref::adopt(nullptr); }));
  check_call_site(error_of([&] { context_ref::adopt(nullptr); }));
  check_call_site(error_of([&] { event::create(context_ref{}); }));
  check_call_site(error_of([&] { device_buffer::allocate(context_ref{}, 0); }));
  check_call_site(error_of([&] { host_registration::register_memory(context_ref{}, nullptr, 8); }));
  check_call_site(error_of([&] { copy_async(stream_ref{}, device_span{0x1000, 8}, std::span(host)); }));
  check_call_site(error_of([&] { device_span{0x1000, 8}.subspan(4, 5); }));
  check_call_site(error_of([&] { module::load(context_ref{}, std::string_view("not a CUDA image"), "junk.bin"); }));
  // A CUBIN too short for its ELF header: refused by the image check, with CUDA_ERROR_INVALID_IMAGE.
  const std::string elf = "\x7f" "ELF, and nothing more";
  const cuda_error corrupt = error_of([&] { module::load(context_ref{}, std::as_bytes(std::span(elf))); });
  CHECK(corrupt.result() == CUDA_ERROR_INVALID_IMAGE);
  check_call_site(error_of([&] { module::load(context_ref{}, std::as_bytes(std::span(elf)), "short.cubin"); }));
}

TEST_CASE("driver errors name the caller's line rather than cuasync's", "[driver][error][gpu][api_error]") {
  using namespace cuasync;
  using test::check_call_site;
  using test::ctx;
  using test::error_of;
  const stream s = stream::create(ctx());
  const kernel_ref k = test::kernels().kernel("saxpy");
  const int optin = ctx().device().properties().max_shared_memory_per_block_optin;
  check_call_site(error_of([&] { device::get(device::count() + 3); }));
  check_call_site(error_of([&] { primary_context::retain(-1); }));
  check_call_site(error_of([&] { pinned_buffer::allocate(ctx(), 0); }));
  check_call_site(error_of([&] { memory_pool_ref::device_default(ctx()).allocate_async(s, 0); }));
  check_call_site(error_of([&] { test::kernels().kernel("no_such_kernel"); }));
  check_call_site(error_of([&] { k.set_max_dynamic_shared_memory(optin + 1); }));
  check_call_site(error_of([&] { launch(s, k, {.grid = 1, .block = 32}, 2.0f); }));
  const cuda_error e = error_of([&] { test::kernels().kernel("no_such_kernel"); });
  CHECK(e.result() == CUDA_ERROR_NOT_FOUND);  // from the driver, yet at the caller's line
  CHECK_THAT(e.where().file_name(), Catch::EndsWith("error_test.cpp"));
  s.synchronize();
}
