// What a failed operation throws (use_awaitable, use_future), and the stream wait's start.
#include <cuasync/async_io/detail/initiate.hpp>
#include <cuasync/async_io/error_tokens.hpp>

#include <cuasync/driver/error.hpp>

namespace cuasync::detail {

std::exception_ptr make_wait_error(std::error_code ec, const char* api) {
  return std::make_exception_ptr(cuda_error(ec, api,
                                            ec == std::errc::operation_canceled
                                                ? "the operation was cancelled (GPU work already enqueued goes on)"
                                                : "the awaited GPU work failed"));
}

void stream_starter::operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h,
                                wait_hints hints) && {
  pooled_event e;
  try {
    e = cuda_completion_source::instance().record(s, where);
  } catch (const cuda_error& err) {
    svc.fail_wait(std::move(ex), err.code(), std::move(h));
    return;
  }
  svc.start_wait(std::move(ex), std::move(e).into_target(std::move(keep_alive)), std::move(h), hints);
}

}  // namespace cuasync::detail
