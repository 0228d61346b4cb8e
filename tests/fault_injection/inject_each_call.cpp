// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Driver-level fault injection: runs the scenario on the simulated driver once cleanly, then once per driver call of
// its first round with that call failing (every call of the entry points that allocate — the out-of-memory sites —
// and the first, second, third and last call of every other entry point). Each run is a child process with a time
// bound. A run passes when
//   - it ends by itself (no hang) and normally (no crash),
//   - round 1 either reports an error that names the failed entry point, or absorbs the failure with correct results,
//   - rounds 2 and 3 succeed (cuasync is usable after the failure; round 2 may report, once, a failure that a
//     destructor of round 1 deferred, naming the call),
//   - no kind of driver object is left alive beyond what the clean run leaves (plus destroys the failure refused).
// Prints one line per entry point and every failing run; exits 1 when a run failed.
//   inject_each_call <scenario> <simulated libcuda> [--jobs N] [--timeout S]
#include "child_process.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct report {
  bool parsed = false;
  std::string round[4];           // "ok" or "error: ..." (empty: missing)
  bool fired = false;
  std::map<std::string, long> live, refused, calls;
};

std::map<std::string, long> pairs(const std::string& line) {
  std::map<std::string, long> m;
  std::istringstream in(line);
  std::string word;
  in >> word;  // the label
  while (in >> word)
    if (auto eq = word.find('='); eq != std::string::npos) m[word.substr(0, eq)] = std::atol(word.c_str() + eq + 1);
  return m;
}

report parse(const std::string& output) {
  report r;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    for (int n = 1; n <= 3; ++n)
      if (line.rfind("round" + std::to_string(n) + ": ", 0) == 0) {
        const std::string rest = line.substr(8);
        if (rest == "ok" || rest.rfind("error: ", 0) == 0) r.round[n] = rest;
      }
    if (line.rfind("injected=", 0) == 0) r.fired = line.find("fired=1") != std::string::npos;
    if (line.rfind("live ", 0) == 0) r.live = pairs(line), r.parsed = true;
    if (line.rfind("refused ", 0) == 0) r.refused = pairs(line);
    if (line.rfind("calls ", 0) == 0) r.calls = pairs(line);
  }
  return r;
}

// Entry points that observe the device: a failure there is a device fault, sticky (CUDA_ERROR_LAUNCH_FAILED); the
// error must say so (and name the fault), and round 2 runs on a new context.
const std::set<std::string> observing = {"cuEventQuery", "cuStreamQuery", "cuEventSynchronize",
                                         "cuStreamSynchronize", "cuCtxSynchronize"};

// Entry points whose every call is tried: the allocation sites (an out-of-memory failure at each) and the calls
// that create driver objects.
const std::set<std::string> every_call = {
    "cuMemAlloc",      "cuMemHostAlloc",       "cuMemAllocAsync",           "cuMemAllocFromPoolAsync",
    "cuMemAllocManaged", "cuMemPoolCreate",    "cuMemHostRegister",         "cuStreamCreateWithPriority",
    "cuEventCreate",   "cuModuleLoadDataEx",   "cuDevicePrimaryCtxRetain",  "cuCtxCreate"};

struct job {
  std::string entry;
  long nth;
};

struct outcome {
  job j;
  bool fired = false, named = false, absorbed = false;
  std::string failure;  // empty: passed
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

outcome judge(const job& j, const cuasync::test::child_result& c, const report& clean) {
  outcome o{j};
  const report r = parse(c.output);
  o.fired = r.fired;
  if (c.timed_out) {
    o.failure = "hang (killed at the time bound); round1: " + r.round[1];
    return o;
  }
  if (c.exit_code != 0 || !r.parsed) {
    o.failure = "crash (exit " + std::to_string(c.exit_code) + "): " + first_line(c.output.substr(
                                                                          c.output.size() > 600 ? c.output.size() - 600 : 0));
    return o;
  }
  if (r.round[1] == "ok") {
    o.absorbed = r.fired;
  } else if (r.round[1].rfind("error: ", 0) == 0) {
    const bool fault = observing.count(j.entry) != 0;
    const std::string must = fault ? "CUDA_ERROR_LAUNCH_FAILED" : j.entry;
    // cuasync's own words must name it: the simulated driver's log line, which the error carries, names it anyway.
    const std::string own = r.round[1].substr(0, r.round[1].find("; the driver says: "));
    o.named = own.find(must) != std::string::npos && (!fault || own.find("sticky") != std::string::npos);
    if (!o.named) o.failure = "the error does not name " + must + (fault ? " as sticky" : "") + ": " + r.round[1];
  } else {
    o.failure = "round 1 did not finish: '" + r.round[1] + "'";
  }
  // Round 2 may report a failure deferred from round 1's destructors (once, naming the call); round 3 must be clean.
  if (o.failure.empty() && r.round[2] != "ok" && r.round[2].find(j.entry) == std::string::npos)
    o.failure = "unusable after the failure: round 2: " + r.round[2];
  if (o.failure.empty() && r.round[3] != "ok") o.failure = "unusable after the failure: round 3: " + r.round[3];
  if (o.failure.empty())
    for (auto& [k, n] : r.live) {
      const long allowed = clean.live.count(k) ? clean.live.at(k) : 0;
      const long refused = r.refused.count(k) ? r.refused.at(k) : 0;
      if (n > allowed + refused)
        o.failure += "leak: " + std::to_string(n - allowed - refused) + " " + k + " (clean run " +
                     std::to_string(allowed) + ", now " + std::to_string(n) + ", refused destroys " +
                     std::to_string(refused) + "); ";
    }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: inject_each_call <scenario> <simulated libcuda> [--jobs N] [--timeout S]\n");
    return 2;
  }
  const std::string scenario = argv[1], libcuda = "CUASYNC_LIBCUDA=" + std::string(argv[2]);
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  long timeout_s = 60;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--jobs")) jobs = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--timeout")) timeout_s = std::atol(argv[i + 1]);
  }
  const auto limit = std::chrono::seconds(timeout_s);
  // No disk cache of anyone's home (the scenario loads PTX directly, but a runtime may open its cache).
  const std::vector<std::string> base_env = {libcuda, "CUASYNC_CACHE_DIR=/tmp/cuasync-fault-injection-cache"};

  const auto clean_child = cuasync::test::run_child({}, base_env, limit, scenario);
  const report clean = parse(clean_child.output);
  if (clean_child.exit_code != 0 || clean.round[1] != "ok" || clean.round[2] != "ok" || clean.round[3] != "ok" ||
      clean.calls.empty()) {
    std::fprintf(stderr, "inject_each_call: the scenario fails without any injected failure:\n%s\n",
                 clean_child.output.c_str());
    return 1;
  }

  std::vector<job> todo;
  for (auto& [entry, n] : clean.calls) {
    std::set<long> nths;
    if (every_call.count(entry)) {
      for (long k = 1; k <= n; ++k) nths.insert(k);
    } else {
      for (long k : {1L, 2L, 3L, n}) if (k <= n) nths.insert(k);
    }
    for (long k : nths) todo.push_back({entry, k});
  }

  std::vector<outcome> results(todo.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < jobs; ++w)
    workers.emplace_back([&] {
      for (std::size_t i; (i = next++) < todo.size();) {
        std::vector<std::string> env = base_env;
        env.push_back("FAKE_CUDA_FAIL=" + todo[i].entry + ":" + std::to_string(todo[i].nth));
        results[i] = judge(todo[i], cuasync::test::run_child({}, env, limit, scenario), clean);
      }
    });
  for (auto& t : workers) t.join();

  struct tally {
    long calls = 0, runs = 0, named = 0, absorbed = 0, not_reached = 0, failed = 0;
  };
  std::map<std::string, tally> by_entry;
  for (auto& [entry, n] : clean.calls) by_entry[entry].calls = n;
  long failed = 0;
  for (const outcome& o : results) {
    tally& t = by_entry[o.j.entry];
    ++t.runs;
    if (!o.failure.empty()) ++t.failed, ++failed;
    else if (!o.fired) ++t.not_reached;
    else if (o.named) ++t.named;
    else if (o.absorbed) ++t.absorbed;
  }
  std::printf("%-44s %6s %5s %6s %9s %12s %7s\n", "entry point (round 1)", "calls", "runs", "named", "absorbed",
              "not reached", "failed");
  for (auto& [entry, t] : by_entry)
    std::printf("%-44s %6ld %5ld %6ld %9ld %12ld %7ld\n", entry.c_str(), t.calls, t.runs, t.named, t.absorbed,
                t.not_reached, t.failed);
  std::printf("%zu runs, %ld failed\n", results.size(), failed);
  for (const outcome& o : results)
    if (!o.failure.empty()) std::printf("FAILED %s call %ld: %s\n", o.j.entry.c_str(), o.j.nth, o.failure.c_str());
  return failed ? 1 : 0;
}
