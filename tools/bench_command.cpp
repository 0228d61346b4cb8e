// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync bench`: runs the benchmark executables (bench/<suite>/cuasync_<suite>_bench), reads the JSON each writes,
// and prints one table: every measure's ratio against the raw driver (or its baseline), its target and a verdict.
#include "commands.hpp"
#include "progress.hpp"

#include <cuasync/driver/error.hpp>
#include <cuasync/trace/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

extern char** environ;

namespace cuasync::tools {
namespace {

namespace fs = std::filesystem;
namespace json = trace::json;
const std::vector<std::string> all_suites = {"driver", "jit", "runtime", "async_io", "c_abi"};

struct measure {
  std::string name, unit, target, verdict;
  double ratio = 0, ours = 0, baseline = 0;
  std::string baseline_name;
};
struct suite_result {
  std::string name, executable, log, status = "not found";  // "ok", "failed", "timed out", "not found"
  int exit_code = -1;
  std::vector<measure> measures;
};

// "<= 1.05" / ">= 0.9" / "0.95 .. 1.05" against the ratio; "(absolute)" targets against cuasync's own median;
// others are notes.
std::string verdict(const measure& m) {
  const std::string& t = m.target;
  if (const auto dots = t.find(" .. "); dots != std::string::npos) {
    char *end_lo = nullptr, *end_hi = nullptr;
    const double lo = std::strtod(t.c_str(), &end_lo), hi = std::strtod(t.c_str() + dots + 4, &end_hi);
    if (end_lo == t.c_str() || end_hi == t.c_str() + dots + 4) return "-";
    return m.ratio >= lo && m.ratio <= hi ? "ok" : "MISSED";
  }
  if (t.size() < 3 || (t.compare(0, 2, "<=") && t.compare(0, 2, ">="))) return "-";
  char* end = nullptr;
  const double bound = std::strtod(t.c_str() + 2, &end);
  if (end == t.c_str() + 2) return "-";
  const double value = t.find("absolute") != std::string::npos ? m.ours : m.ratio;
  const bool ok = t[0] == '<' ? value <= bound : value >= bound;
  return ok ? "ok" : "MISSED";
}

// The executable of `suite` beside this command (an installed tree) or under BUILD/bench.
std::string find_executable(const std::string& suite, const fs::path& build) {
  const std::string name = "cuasync_" + suite + "_bench";
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / name)) return (self.parent_path() / name).string();
  for (const char* dir : {"bench", "bench/plugins"}) {
    for (const fs::path& p : {build / dir / suite / name, build / dir / name})
      if (fs::exists(p, ec)) return p.string();
  }
  return {};
}

// Runs `exe OUT` with its output in `log`; kills it after `timeout`. Returns the exit code, -1 when it timed out.
int run_logged(const std::string& exe, const std::string& out, const std::string& log, std::chrono::seconds timeout) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), const_cast<char*>(out.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<measure> read_results(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const json::value doc = json::parse(text.str());
  std::vector<measure> out;
  const json::value* results = doc.find("results");
  if (!results || !results->is_array()) return out;
  for (const json::value& row : results->as_array()) {
    measure m;
    auto str = [&](const char* k) {
      const json::value* v = row.find(k);
      return v && v->is_string() ? v->as_string() : std::string();
    };
    auto median = [&](const char* k) {
      const json::value* v = row.find(k);
      const json::value* med = v ? v->find("median") : nullptr;
      return med && med->is_number() ? med->as_number() : 0.0;
    };
    m.name = str("name");
    m.unit = str("unit");
    m.target = str("target");
    m.baseline_name = str("baseline");
    const json::value* ratio = row.find("ratio");
    m.ratio = ratio && ratio->is_number() ? ratio->as_number() : 0;
    m.ours = median("cuasync");
    m.baseline = median("raw");
    m.verdict = verdict(m);
    out.push_back(std::move(m));
  }
  return out;
}

// The results object, left open (the caller closes it, or adds the error and closes it).
json::writer results_json(const std::vector<suite_result>& suites, const std::string& out, std::size_t missed) {
  json::writer w;
  w.begin_object().member("results_directory", out).member("missed_targets", static_cast<std::uint64_t>(missed));
  w.key("suites").begin_array();
  for (const suite_result& s : suites) {
    w.begin_object().member("name", s.name).member("status", s.status).member("exit_code", s.exit_code);
    w.member("executable", s.executable).member("log", s.log).key("measures").begin_array();
    for (const measure& m : s.measures) {
      w.begin_object().member("name", m.name).member("unit", m.unit).member("ratio", m.ratio);
      w.member("cuasync", m.ours).member("baseline", m.baseline_name).member("baseline_value", m.baseline);
      w.member("target", m.target).member("verdict", m.verdict).end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
  return w;
}

void print_text(const std::vector<suite_result>& suites, const std::string& out, std::size_t missed) {
  std::printf("cuasync bench (results in %s)\n\n%-9s %-78s %8s  %-12s %s\n", out.c_str(), "suite", "measure",
              "ratio", "target", "verdict");
  for (const suite_result& s : suites) {
    if (s.status != "ok") std::printf("%-9s %s (%s)\n", s.name.c_str(), s.status.c_str(), s.log.c_str());
    for (const measure& m : s.measures)
      std::printf("%-9s %-78.78s %8.3f  %-12.12s %s\n", s.name.c_str(), (m.name + " / " + m.baseline_name).c_str(),
                  m.ratio, m.target.c_str(), m.verdict.c_str());
  }
  std::printf("\n%zu target%s missed\n", missed, missed == 1 ? "" : "s");
}

// The build directory this command was built in (it lives in BUILD/tools), else ./build.
std::string default_build() {
  std::error_code ec;
  const fs::path build = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  return !ec && fs::is_directory(build / "bench", ec) ? build.string() : "build";
}

struct bench_args {
  std::string build = default_build(), out;
  std::vector<std::string> suites;
  std::size_t timeout_s = 300;
};

int run(invocation& inv, bench_args a) {
  const std::string& build = a.build;
  std::string& out = a.out;
  std::vector<std::string>& suites = a.suites;
  const auto timeout_s = static_cast<long>(a.timeout_s);
  if (suites.empty()) suites = all_suites;
  try {
    if (const std::string why = why_no_gpu(); !why.empty())
      return inv.fail(exit_no_gpu, "no_gpu", "no usable GPU: " + why);
  } catch (const cuda_error& e) {
    return inv.fail(e);
  }
  std::error_code ec;
  if (out.empty()) out = (fs::temp_directory_path() / ("cuasync-bench-" + std::to_string(getpid()))).string();
  fs::create_directories(out, ec);
  if (ec) return inv.fail(exit_failure, "io_error", "cannot create '" + out + "': " + ec.message());

  progress prog("cuasync bench");
  std::vector<suite_result> results;
  std::size_t missed = 0, broken = 0;
  for (std::size_t i = 0; i < suites.size(); ++i) {
    suite_result s;
    s.name = suites[i];
    s.executable = find_executable(s.name, build);
    if (!s.executable.empty()) {
      prog.phase(s.name + " (" + std::to_string(i + 1) + "/" + std::to_string(suites.size()) + ")");
      s.log = out + "/bench-" + s.name + ".log";
      s.exit_code = run_logged(s.executable, out, s.log, std::chrono::seconds(timeout_s));
      s.status = s.exit_code == 0 ? "ok" : s.exit_code == -1 ? "timed out" : "failed";
      try {
        if (s.exit_code == 0) s.measures = read_results(fs::path(out) / (s.name + ".json"));
      } catch (const std::exception& e) {
        s.status = std::string("unreadable results: ") + e.what();
      }
      if (s.status == "ok" && s.measures.empty()) s.status = "no results";
    }
    broken += s.status != "ok";
    for (const measure& m : s.measures) missed += m.verdict == "MISSED";
    results.push_back(std::move(s));
  }
  prog.done();
  const std::string why =
      std::to_string(broken) + " suite" + (broken == 1 ? "" : "s") + " did not run to the end (build: " + build + ")";
  if (inv.json()) {
    json::writer w = results_json(results, out, missed);
    if (broken) return inv.fail_within(w, exit_failure, "suite_failed", why);  // the documented error object
    w.end_object();
    std::printf("%s\n", w.str().c_str());
    return exit_ok;
  }
  print_text(results, out, missed);
  if (broken) std::fprintf(stderr, "cuasync bench: %s\n", why.c_str());
  return broken ? exit_failure : exit_ok;
}

runner declare(option_set& o) {
  auto a = std::make_shared<bench_args>();
  o.choices("--suite", a->suites, all_suites, "NAME",
            "driver, jit, runtime, async_io or c_abi; repeatable (default: all that are built)");
  o.text("--build", a->build, "DIR", "the build directory (default: the one this command is in, else ./build)");
  o.text("-o,--out", a->out, "DIR", "where the suites' JSON, markdown and logs go (default: a new folder under /tmp)");
  o.number("--timeout", a->timeout_s, 1, 86'400, "S", "per suite, in seconds (default 300)", "a number of seconds");
  return [a](invocation& inv) { return run(inv, *a); };
}

}  // namespace

const command bench_command{
    .name = "bench",
    .summary = "run the benchmark suites and print their ratios against the raw driver, with targets and verdicts",
    .description =
        "Runs each benchmark executable (cuasync_<suite>_bench, beside this command or under DIR/bench), which "
        "measures cuasync against the raw driver (or a bound) in the same process, reads the JSON it writes, and "
        "prints one table: measure, ratio, target and verdict (ok, MISSED, or - where the row has no target). Needs a "
        "GPU. Status 1 when a suite failed, timed out or wrote no results; missed targets are reported, not a failure.",
    .declare = declare,
    .notes = "A progress line goes to standard error (CUASYNC_PROGRESS=0: none).",
};

}  // namespace cuasync::tools
