// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What every `cuasync` subcommand shares: the exit statuses, the command table's entry (its options declared through
// options.hpp), the invocation (--json) and how failures are reported (a line on stderr naming the command, the cause
// and the fix; with --json also one JSON object on stdout).
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuasync {
class cuda_error;
}
namespace cuasync::trace::json {
class writer;
}

namespace cuasync::tools {

//! The exit statuses of every subcommand (printed by every --help).
enum exit_status : int {
  exit_ok = 0,
  exit_failure = 1,  //!< the command could not do its work (a compile error, an unreadable trace, a write failure)
  exit_usage = 2,    //!< an unknown command or option, a missing argument, a value it cannot use (--arch sm_999)
  exit_no_gpu = 3,   //!< no usable GPU: no driver, the toolkit's stub libcuda, no device, or a driver too old
};

class invocation;
class option_set;

//! What runs a command with the options its `declare` bound.
using runner = std::function<int(invocation&)>;

struct command {
  std::string_view name;
  std::string_view summary;      //!< one line in `cuasync --help`
  std::string_view description;  //!< the --help text between the usage line and the options (reflowed)
  //! Declares the command's options (bound to state the returned runner owns and reads once they are parsed).
  runner (*declare)(option_set&);
  std::string_view notes = {};  //!< the --help text after the options (environment variables, ...), if any
};

//! One run of a subcommand: which one, and whether --json was given (before or after it).
class invocation {
 public:
  invocation(const command& c, bool json);

  const command& cmd() const noexcept { return cmd_; }
  bool json() const noexcept { return json_; }

  //! A usage error: "cuasync CMD: message (cuasync CMD --help)" on stderr, the JSON error with --json. Returns
  //! exit_usage.
  int usage_error(const std::string& message) const;
  //! A failure with `status`: "cuasync CMD: message" on stderr; with --json, also
  //! {"error": {"command", "status", "kind", "message", extra...}} on stdout. Returns `status`.
  int fail(int status, std::string_view kind, const std::string& message,
           const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  //! The same, for a command whose --json object carries more than the error: adds the "error" member to the open
  //! object `w`, closes it and prints it (with --json); the line on stderr either way. Returns `status`.
  int fail_within(trace::json::writer& w, int status, std::string_view kind, const std::string& message) const;
  //! A cuda_error (its text from `error_text`): exit_no_gpu with kind "no_gpu" for the loader's errors (no driver,
  //! stub, no device, driver too old), else exit_failure with `kind`.
  int fail(const cuda_error& e, std::string_view kind = "cuda_error") const;

 private:
  const command& cmd_;
  bool json_ = false;
};

//! A usage error of the command line as a whole (no command, an unknown one): "cuasync: message" on stderr, with
//! `json` also {"error": {"command": `command`, "status": 2, "kind": "usage", "message"}}. Returns exit_usage.
int usage_error(std::string_view command, bool json, const std::string& message);

//! A cuda_error's text for the person at the command line: what failed and why, with the fix where the library's
//! message gives one (the loaders' do), without cuasync's own source file, line and function (they tell a user
//! nothing); with CUASYNC_DEBUG=1 the whole `what()`, call site included, for a bug report.
std::string error_text(const cuda_error& e);

//! True for the driver loader's errors that mean "no usable GPU" (no driver, the stub, no device, a driver too old).
bool is_no_gpu_error(const cuda_error& e) noexcept;

//! Why there is no usable GPU `device` (the loader's message, or "the driver reports no device", or "no device N:
//! there are K"); empty when there is one. @throws cuda_error for other driver errors
std::string why_no_gpu(int device = 0);

//! The GPU did not finish `what` in time (a hung GPU or a kernel that never ends): reports it as the running
//! command's failure (status 1, kind "gpu_timeout", with --json the error object) and exits at once, without
//! destructors, since freeing device or pinned memory would wait for that GPU.
[[noreturn]] void exit_gpu_hung(const std::string& what);

//! The exit statuses, as every command's help ends with them.
extern const std::string_view exit_status_help;

}  // namespace cuasync::tools
