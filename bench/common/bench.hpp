// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// A small harness for bench/ programs: timed samples → median / p99, results side by side with the raw driver API
// (or a peer) as ratios, written as JSON and a markdown table. Header-only; no timing in unit tests.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace cuasync::bench {

struct stats {
  double median = 0, p99 = 0, min = 0, mean = 0;
  std::size_t n = 0;
};

inline stats summarize(std::vector<double> v) {
  stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.min = v.front();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.p99 = v[std::min(v.size() - 1, static_cast<std::size_t>(std::ceil(0.99 * v.size())) - 1)];
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  return s;
}

using clock = std::chrono::steady_clock;
inline double us_since(clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
}

//! Runs `body()` `iters` times per sample, `samples` times; each sample's time per call in microseconds.
//! `between()` runs untimed after each sample (e.g. to drain a stream).
template <class Body, class Between>
stats measure_us(int samples, int iters, Body&& body, Between&& between) {
  std::vector<double> v;
  v.reserve(samples);
  for (int s = 0; s < samples; ++s) {
    const auto t0 = clock::now();
    for (int i = 0; i < iters; ++i) body();
    v.push_back(us_since(t0) / iters);
    between();
  }
  return summarize(std::move(v));
}
template <class Body>
stats measure_us(int samples, int iters, Body&& body) {
  return measure_us(samples, iters, std::forward<Body>(body), [] {});
}

//! One row: cuasync against a baseline, with what "better" means for the ratio.
struct row {
  std::string name, unit;
  stats ours, baseline;
  std::string baseline_name = "raw driver";
  bool lower_is_better = true;  // times: lower is better; bandwidths: higher is better
  std::string target;           // e.g. "<= 1.05"
  double ratio() const { return baseline.median != 0 ? ours.median / baseline.median : 0; }
};

class report {
 public:
  explicit report(std::string bench) : bench_(std::move(bench)) {}
  void add(row r) { rows_.push_back(std::move(r)); }
  void note(std::string key, std::string value) { notes_.emplace_back(std::move(key), std::move(value)); }

  //! Writes `<dir>/<bench>.json` and `<dir>/<bench>.md` and prints the table.
  void write(const std::string& dir) const {
    const char* commit = std::getenv("CUASYNC_COMMIT");
    std::ofstream j(dir + "/" + bench_ + ".json");
    j << "{\n  \"bench\": \"" << bench_ << "\",\n  \"commit\": \"" << (commit ? commit : "unknown") << "\",\n";
    for (auto& [k, v] : notes_) j << "  \"" << k << "\": \"" << v << "\",\n";
    j << "  \"results\": [\n";
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const row& r = rows_[i];
      j << "    {\"name\": \"" << r.name << "\", \"unit\": \"" << r.unit << "\", \"baseline\": \"" << r.baseline_name
        << "\", \"cuasync\": " << json(r.ours) << ", \"raw\": " << json(r.baseline) << ", \"ratio\": " << r.ratio()
        << ", \"target\": \"" << r.target << "\"}" << (i + 1 < rows_.size() ? "," : "") << "\n";
    }
    j << "  ]\n}\n";
    std::ofstream m(dir + "/" + bench_ + ".md");
    m << table(commit ? commit : "unknown");
    std::fputs(table(commit ? commit : "unknown").c_str(), stdout);
  }

  std::string table(const std::string& commit) const {
    std::string t = "### " + bench_ + " (commit " + commit.substr(0, 12) + ")\n\n";
    for (auto& [k, v] : notes_) t += "- " + k + ": " + v + "\n";
    t += "\n| measure | unit | cuasync p50 | cuasync p99 | baseline | baseline p50 | baseline p99 | ratio | target |\n"
         "|---|---|---|---|---|---|---|---|---|\n";
    char buf[512];
    for (const row& r : rows_) {
      std::snprintf(buf, sizeof buf, "| %s | %s | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %s |\n", r.name.c_str(),
                    r.unit.c_str(), r.ours.median, r.ours.p99, r.baseline_name.c_str(), r.baseline.median,
                    r.baseline.p99, r.ratio(), r.target.c_str());
      t += buf;
    }
    return t + "\n";
  }

 private:
  static std::string json(const stats& s) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "{\"median\": %.4f, \"p99\": %.4f, \"min\": %.4f, \"mean\": %.4f, \"n\": %zu}",
                  s.median, s.p99, s.min, s.mean, s.n);
    return buf;
  }
  std::string bench_;
  std::vector<row> rows_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

//! CPU time (user + system) of the whole process so far, in seconds: for "CPU while waiting" measurements.
inline double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

//! The output folder: argv[1] or ".".
inline std::string output_dir(int argc, char** argv) { return argc > 1 ? argv[1] : "."; }

}  // namespace cuasync::bench
