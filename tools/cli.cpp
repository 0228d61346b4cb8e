// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The shared part of the `cuasync` subcommands: failures as text and as JSON, a library error's text for a user.
#include "cli.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/driver/error.hpp>
#ifdef CUASYNC_TOOL_COMPILE
#include <cuasync/jit/error.hpp>
#endif
#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cuasync::tools {

const std::string_view exit_status_help = R"(
exit status:
  0  success
  1  failure: the command could not do its work (a compile error, an unreadable trace, a file not written)
  2  usage error: an unknown option, a missing or unusable argument
  3  no usable GPU: no NVIDIA driver, the toolkit's stub libcuda, no device, or a driver too old
)";

namespace {
const invocation* running = nullptr;  // the one invocation main() runs, for exit_gpu_hung
}

void exit_gpu_hung(const std::string& what) {
  const std::string message = "the GPU did not finish " + what + " in time: is it hung? Exiting without cleanup";
  if (running)
    running->fail(exit_failure, "gpu_timeout", message);
  else
    std::fprintf(stderr, "cuasync: %s\n", message.c_str());
  std::fflush(nullptr);
  std::_Exit(exit_failure);
}

invocation::invocation(const command& c, bool json) : cmd_(c), json_(json) { running = this; }

namespace {
void print_error_json(std::string_view command, int status, std::string_view kind, const std::string& message,
                      const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  trace::json::writer w;
  w.begin_object().key("error").begin_object().member("command", command).member("status", status);
  w.member("kind", kind).member("message", message);
  for (const auto& [k, v] : extra) w.member(k, v);
  w.end_object().end_object();
  std::printf("%s\n", w.str().c_str());
}
}  // namespace

int usage_error(std::string_view command, bool json, const std::string& message) {
  std::fprintf(stderr, "cuasync: %s\n", message.c_str());
  if (json) print_error_json(command, exit_usage, "usage", message);
  return exit_usage;
}

int invocation::usage_error(const std::string& message) const {
  std::fprintf(stderr, "cuasync %.*s: %s (cuasync %.*s --help)\n", static_cast<int>(cmd_.name.size()),
               cmd_.name.data(), message.c_str(), static_cast<int>(cmd_.name.size()), cmd_.name.data());
  if (json_) print_error_json(cmd_.name, exit_usage, "usage", message);
  return exit_usage;
}

int invocation::fail(int status, std::string_view kind, const std::string& message,
                     const std::vector<std::pair<std::string, std::string>>& extra) const {
  std::fprintf(stderr, "cuasync %.*s: %s\n", static_cast<int>(cmd_.name.size()), cmd_.name.data(), message.c_str());
  if (json_) print_error_json(cmd_.name, status, kind, message, extra);
  return status;
}

bool is_no_gpu_error(const cuda_error& e) noexcept {
  return dynamic_cast<const driver_not_found_error*>(&e) || dynamic_cast<const stub_library_error*>(&e) ||
         dynamic_cast<const no_device_error*>(&e) || dynamic_cast<const driver_too_old_error*>(&e);
}

std::string why_no_gpu(int device) {
  try {
    const int count = device::count();
    if (count == 0) return "the driver reports no device";
    if (device >= count) return "no device " + std::to_string(device) + ": there are " + std::to_string(count);
    return {};
  } catch (const cuda_error& e) {
    if (!is_no_gpu_error(e)) throw;
    return error_text(e);
  }
}

int invocation::fail_within(trace::json::writer& w, int status, std::string_view kind,
                            const std::string& message) const {
  std::fprintf(stderr, "cuasync %.*s: %s\n", static_cast<int>(cmd_.name.size()), cmd_.name.data(), message.c_str());
  if (json_) {
    w.key("error").begin_object().member("command", cmd_.name).member("status", status);
    w.member("kind", kind).member("message", message).end_object().end_object();
    std::printf("%s\n", w.str().c_str());
  }
  return status;
}

int invocation::fail(const cuda_error& e, std::string_view kind) const {
  if (is_no_gpu_error(e)) return fail(exit_no_gpu, "no_gpu", "no usable GPU: " + error_text(e));
  return fail(exit_failure, kind, error_text(e));
}

std::string error_text(const cuda_error& e) {
  if (const char* debug = std::getenv("CUASYNC_DEBUG"); debug && !std::strcmp(debug, "1")) return e.what();
  // The loaders' messages are whole sentences: what could not be loaded, why, and what to install or set.
  bool loader = is_no_gpu_error(e);
#ifdef CUASYNC_TOOL_COMPILE
  loader = loader || dynamic_cast<const jit::nvrtc_not_found_error*>(&e);
#endif
  if (loader && !e.detail().empty()) return e.detail();
  std::string text = e.api() + ": " + e.code().message();
  if (!e.detail().empty()) text += " [" + e.detail() + "]";
  if (e.sticky())
    text += ". The error is sticky: the GPU context can run nothing more; run the command again (a fault that "
            "repeats is the kernel's, or the GPU's: see `nvidia-smi`)";
  return text;
}

}  // namespace cuasync::tools
