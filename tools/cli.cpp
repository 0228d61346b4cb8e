// The shared part of the `cuasync` subcommands: --json and --help, help text, failures as text and as JSON.
#include "cli.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cuasync::tools {

const std::string_view common_help = R"(
options of every command:
  --json      print one JSON object on standard output for scripts (failures too:
              {"error": {"command", "status", "kind", "message"}}); messages still go to standard error;
              before the command too (cuasync --json info)
  -h, --help  this help

exit status:
  0  success
  1  failure: the command could not do its work (a compile error, an unreadable trace, a file not written)
  2  usage error: an unknown option or a missing argument
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

invocation::invocation(const command& c, int argc, char** argv) : cmd_(c) {
  running = this;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json"))
      json_ = true;
    else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))
      help_ = true;
    else
      args_.emplace_back(argv[i]);
  }
}

void invocation::print_help() const {
  std::fwrite(cmd_.usage.data(), 1, cmd_.usage.size(), stdout);
  std::fwrite(common_help.data(), 1, common_help.size(), stdout);
}

int invocation::usage_error(const std::string& message) const {
  std::fprintf(stderr, "cuasync %.*s: %s (cuasync %.*s --help)\n", static_cast<int>(cmd_.name.size()),
               cmd_.name.data(), message.c_str(), static_cast<int>(cmd_.name.size()), cmd_.name.data());
  if (json_) {
    trace::json::writer w;
    w.begin_object().key("error").begin_object().member("command", cmd_.name).member("status", int{exit_usage});
    w.member("kind", "usage").member("message", message).end_object().end_object();
    std::printf("%s\n", w.str().c_str());
  }
  return exit_usage;
}

int invocation::fail(int status, std::string_view kind, const std::string& message,
                     const std::vector<std::pair<std::string, std::string>>& extra) const {
  std::fprintf(stderr, "cuasync %.*s: %s\n", static_cast<int>(cmd_.name.size()), cmd_.name.data(), message.c_str());
  if (json_) {
    trace::json::writer w;
    w.begin_object().key("error").begin_object().member("command", cmd_.name).member("status", status);
    w.member("kind", kind).member("message", message);
    for (const auto& [k, v] : extra) w.member(k, v);
    w.end_object().end_object();
    std::printf("%s\n", w.str().c_str());
  }
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
    return e.detail().empty() ? std::string(e.what()) : e.detail();  // the loader's sentence, without the call site
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
  if (is_no_gpu_error(e)) return fail(exit_no_gpu, "no_gpu", std::string("no usable GPU: ") + e.what());
  return fail(exit_failure, kind, e.what());
}

}  // namespace cuasync::tools
