// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The library itself (ABI 1.2): its version, and where its log goes.
#include "calls.hpp"

#include <cuasync/log.hpp>
#include <cuasync/version.hpp>

#include <cstdlib>

namespace cuasync::c_api {

cuasync_error* library_version(cuasync_library_version_args* a) noexcept {
  return call("library_version", a, [](args<cuasync_library_version_args>& x) {
    const version_info v = version();
    x->major = static_cast<std::uint32_t>(v.major);
    x->minor = static_cast<std::uint32_t>(v.minor);
    x->patch = static_cast<std::uint32_t>(v.patch);
    x->version = v.text;
  });
}

cuasync_error* log_sink_set(cuasync_log_sink_set_args* a) noexcept {
  return call("log_sink_set", a, [](args<cuasync_log_sink_set_args>& x) {
    logging::level l = logging::level::off;
    if (x->level == CUASYNC_LOG_FROM_ENVIRONMENT) {
      const char* env = std::getenv("CUASYNC_LOG");
      if (!logging::parse_level(env ? env : "", l))
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string("log_sink_set: CUASYNC_LOG=") + env +
                                                 " is not one of info, debug, off: fix the variable or pass a level");
    } else if (x->level >= CUASYNC_LOG_OFF && x->level <= CUASYNC_LOG_DEBUG) {
      l = static_cast<logging::level>(x->level);
    } else {
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "log_sink_set: level " + std::to_string(x->level) +
                                               " is not a cuasync_log_level (CUASYNC_LOG_FROM_ENVIRONMENT, _OFF, "
                                               "_INFO or _DEBUG)");
    }
    if (!x->sink) {
      logging::set_sink({}, l);
      return;
    }
    // No lock is held here while set_sink waits for the previous sink's calls: one of them may be setting a sink.
    logging::set_sink([fn = x->sink, user = x->user](logging::level level, const char* message) {
      fn(user, static_cast<int>(level), message);
    }, l);
  });
}

}  // namespace cuasync::c_api
