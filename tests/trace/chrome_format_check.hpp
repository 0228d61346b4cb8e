// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Checks a JSON document against the Chrome trace event format as cuasync writes it (the JSON object form with
// complete "X", metadata "M" and flow "s"/"f" events; docs: "Trace Event Format", Google): required keys and their
// types per phase, non-negative durations, names for every process and thread that has events, X events that nest
// or are disjoint on each thread (what Perfetto needs to draw them as slices), and flows whose start and end pair
// up by id and lie inside a slice of their thread (what Perfetto binds an arrow to).
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
  struct flow_event {
    std::size_t index;
    char phase;
    double id;
    thread on;
    double ts;
  };
  std::vector<flow_event> flows;
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
    } else if (ph->as_string() == "s" || ph->as_string() == "f") {
      const json::value* ts = e.find("ts");
      const json::value* id = e.find("id");
      const json::value* bp = e.find("bp");
      if (!ts || !ts->is_number()) problem(i, "flow event without a numeric \"ts\"");
      if (!id || !id->is_integer()) problem(i, "flow event without an integer \"id\"");
      if (ph->as_string() == "f" && (!bp || !bp->is_string() || bp->as_string() != "e"))
        problem(i, "flow end without \"bp\": \"e\" (it would bind to the next slice, not its own)");
      if (ts && ts->is_number() && id && id->is_integer())
        flows.push_back({i, ph->as_string()[0], id->as_number(), key, ts->as_number()});
    } else {
      problem(i, "phase \"" + ph->as_string() + "\" (cuasync writes only X, M, s and f)");
    }
  }
  std::map<double, std::pair<int, int>> ends_of;  // per flow id: starts, ends
  for (const flow_event& f : flows) {
    auto& [starts, ends] = ends_of[f.id];
    (f.phase == 's' ? starts : ends) += 1;
    const auto it = slices.find(f.on);
    if (it == slices.end() || std::none_of(it->second.begin(), it->second.end(), [&](const auto& slice) {
          return slice.first <= f.ts && f.ts <= slice.second;
        }))
      problem(f.index, "flow event outside every slice of its thread");
  }
  for (const auto& [id, count] : ends_of)
    if (count.first != 1 || count.second != 1)
      problems.push_back("flow " + std::to_string(id) + " has " + std::to_string(count.first) + " starts and " +
                         std::to_string(count.second) + " ends");
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
