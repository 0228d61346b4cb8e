#pragma once
// Checks a JSON document against the Chrome trace event format as cuasync writes it (the JSON object form with
// complete "X" and metadata "M" events; docs: "Trace Event Format", Google): required keys and their types per
// phase, non-negative durations, names for every process and thread that has events, and X events that nest or are
// disjoint on each thread (what Perfetto needs to draw them as slices).
#include <cuasync/trace/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace cuasync::trace::test {

inline std::vector<std::string> chrome_format_problems(const json::value& root) {
  std::vector<std::string> problems;
  auto problem = [&](std::size_t i, const std::string& what) {
    problems.push_back("event " + std::to_string(i) + ": " + what);
  };
  const json::value* events = root.find("traceEvents");
  if (!root.is_object() || !events || !events->is_array()) return {"no \"traceEvents\" array in a JSON object"};
  if (const json::value* unit = root.find("displayTimeUnit"))
    if (!unit->is_string() || (unit->as_string() != "ms" && unit->as_string() != "ns"))
      problems.push_back("displayTimeUnit is neither \"ms\" nor \"ns\"");

  using thread = std::pair<double, double>;
  std::set<double> named_processes, pids_used;
  std::set<thread> named_threads;
  std::map<thread, std::vector<std::pair<double, double>>> slices;
  const json::array& list = events->as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json::value& e = list[i];
    if (!e.is_object()) {
      problem(i, "not an object");
      continue;
    }
    const json::value* ph = e.find("ph");
    const json::value* name = e.find("name");
    const json::value* pid = e.find("pid");
    const json::value* tid = e.find("tid");
    const json::value* args = e.find("args");
    if (!ph || !ph->is_string() || ph->as_string().size() != 1) problem(i, "\"ph\" is not a one-letter string");
    if (!name || !name->is_string()) problem(i, "\"name\" is not a string");
    if (!pid || !pid->is_integer()) problem(i, "\"pid\" is not an integer");
    if (!tid || !tid->is_integer()) problem(i, "\"tid\" is not an integer");
    if (args && !args->is_object()) problem(i, "\"args\" is not an object");
    if (!ph || !ph->is_string() || !name || !name->is_string() || !pid || !pid->is_integer() || !tid ||
        !tid->is_integer())
      continue;
    const thread key{pid->as_number(), tid->as_number()};
    if (ph->as_string() == "X") {
      const json::value* ts = e.find("ts");
      const json::value* dur = e.find("dur");
      if (!ts || !ts->is_number()) problem(i, "X without a numeric \"ts\"");
      if (!dur || !dur->is_number()) problem(i, "X without a numeric \"dur\"");
      else if (dur->as_number() < 0) problem(i, "negative \"dur\"");
      if (const json::value* cat = e.find("cat"); cat && !cat->is_string()) problem(i, "\"cat\" is not a string");
      pids_used.insert(key.first);
      if (ts && ts->is_number() && dur && dur->is_number())
        slices[key].push_back({ts->as_number(), ts->as_number() + dur->as_number()});
    } else if (ph->as_string() == "M") {
      const std::string& n = name->as_string();
      const json::value* arg_name = args ? args->find("name") : nullptr;
      const json::value* sort_index = args ? args->find("sort_index") : nullptr;
      if (n == "process_name" || n == "thread_name") {
        if (!arg_name || !arg_name->is_string()) problem(i, n + " without a string args.name");
        else if (n == "process_name") named_processes.insert(key.first);
        else named_threads.insert(key);
      } else if (n == "process_sort_index" || n == "thread_sort_index") {
        if (!sort_index || !sort_index->is_integer()) problem(i, n + " without an integer args.sort_index");
      } else if (n != "process_labels") {
        problem(i, "unknown metadata event \"" + n + "\"");
      }
    } else {
      problem(i, "phase \"" + ph->as_string() + "\" (cuasync writes only X and M)");
    }
  }
  for (double pid : pids_used)
    if (!named_processes.count(pid)) problems.push_back("pid " + std::to_string(pid) + " has no process_name");
  for (auto& [key, intervals] : slices) {
    if (!named_threads.count(key))
      problems.push_back("pid/tid " + std::to_string(key.first) + "/" + std::to_string(key.second) +
                         " has no thread_name");
    std::sort(intervals.begin(), intervals.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;  // ends of the enclosing slices
    for (auto [begin, end] : intervals) {
      while (!open.empty() && open.back() <= begin) open.pop_back();
      if (!open.empty() && end > open.back())
        problems.push_back("slices overlap without nesting on pid/tid " + std::to_string(key.first) + "/" +
                           std::to_string(key.second));
      open.push_back(end);
    }
  }
  return problems;
}

}  // namespace cuasync::trace::test
