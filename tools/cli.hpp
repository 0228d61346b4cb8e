#pragma once
// What every `cuasync` subcommand shares: the exit statuses, the command table's entry, the parsed invocation
// (--json, --help) and how failures are reported (a line on stderr; with --json also one JSON object on stdout).
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
  exit_usage = 2,    //!< unknown option, missing argument
  exit_no_gpu = 3,   //!< no usable GPU: no driver, the toolkit's stub libcuda, no device, or a driver too old
};

class invocation;

struct command {
  std::string_view name;
  std::string_view summary;  //!< one line in `cuasync --help`
  std::string_view usage;    //!< the command's --help, before the options and exit statuses every command shares
  int (*run)(invocation&);
};

//! One run of a subcommand: its arguments, with --json and --help taken out (they mean the same everywhere).
class invocation {
 public:
  invocation(const command& c, int argc, char** argv);

  const command& cmd() const noexcept { return cmd_; }
  bool json() const noexcept { return json_; }
  bool help() const noexcept { return help_; }
  const std::vector<std::string>& args() const noexcept { return args_; }

  //! Prints the command's help to stdout.
  void print_help() const;
  //! A usage error: the message and a pointer to --help on stderr, the JSON error with --json. Returns exit_usage.
  int usage_error(const std::string& message) const;
  //! A failure with `status`: "cuasync CMD: message" on stderr; with --json, also
  //! {"error": {"command", "status", "kind", "message", extra...}} on stdout. Returns `status`.
  int fail(int status, std::string_view kind, const std::string& message,
           const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  //! The same, for a command whose --json object carries more than the error: adds the "error" member to the open
  //! object `w`, closes it and prints it (with --json); the line on stderr either way. Returns `status`.
  int fail_within(trace::json::writer& w, int status, std::string_view kind, const std::string& message) const;
  //! A cuda_error: exit_no_gpu with kind "no_gpu" for the loader's errors (no driver, stub, no device, driver too
  //! old), else exit_failure with `kind`.
  int fail(const cuda_error& e, std::string_view kind = "cuda_error") const;

 private:
  const command& cmd_;
  std::vector<std::string> args_;
  bool json_ = false, help_ = false;
};

//! True for the driver loader's errors that mean "no usable GPU" (no driver, the stub, no device, a driver too old).
bool is_no_gpu_error(const cuda_error& e) noexcept;

//! Why there is no usable GPU `device` (the loader's message, or "the driver reports no device", or "no device N:
//! there are K"); empty when there is one. @throws cuda_error for other driver errors
std::string why_no_gpu(int device = 0);

//! The GPU did not finish `what` in time (a hung GPU or a kernel that never ends): reports it as the running
//! command's failure (status 1, kind "gpu_timeout", with --json the error object) and exits at once, without
//! destructors, since freeing device or pinned memory would wait for that GPU.
[[noreturn]] void exit_gpu_hung(const std::string& what);

//! The options and exit statuses every command's help ends with.
extern const std::string_view common_help;

//! Walks a command's arguments: options with values, positionals.
class argument_walker {
 public:
  explicit argument_walker(const std::vector<std::string>& args) : args_(args) {}
  bool done() const noexcept { return i_ >= args_.size(); }
  //! The next argument.
  const std::string& next() { return args_[i_++]; }
  //! The value after the option just read; false (and nothing taken) when there is none.
  bool value(std::string& out) {
    if (done()) return false;
    out = args_[i_++];
    return true;
  }

 private:
  const std::vector<std::string>& args_;
  std::size_t i_ = 0;
};

}  // namespace cuasync::tools
