// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder's dumps as text (for the engineer reading a log after a hang) and as Chrome trace event JSON
// (one lane per stream, for Perfetto).
#include "flight_state.hpp"

#include <cuasync/trace/json.hpp>

#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace cuasync::trace::flight {
namespace {

std::string hex(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

// "5.02 s", "61.3 ms", "850 us"
std::string duration(std::int64_t ns) {
  char b[32];
  if (ns < 0) ns = 0;
  if (ns >= 1'000'000'000)
    std::snprintf(b, sizeof b, "%.2f s", ns / 1e9);
  else if (ns >= 1'000'000)
    std::snprintf(b, sizeof b, "%.1f ms", ns / 1e6);
  else
    std::snprintf(b, sizeof b, "%.0f us", ns / 1e3);
  return b;
}

std::string stream_name(const stream_history& h) {
  std::string s = "stream " + hex(h.handle);
  if (h.handle == 0x1) s = "the legacy default stream";
  if (h.handle == 0x2) s = "the per-thread default stream";
  if (h.identity.stream_id) s += " (id " + std::to_string(h.identity.stream_id) + ")";
  if (h.identity.device >= 0) s += " on device " + std::to_string(h.identity.device);
  if (h.retired) s += ", destroyed";
  return s;
}

std::string what(const entry& e) {
  std::string s = e.call;
  if (!e.name.empty()) s += " " + e.name;
  return s;
}

std::string dims(const std::uint32_t (&d)[3]) {
  char b[48];
  std::snprintf(b, sizeof b, "(%u,%u,%u)", d[0], d[1], d[2]);
  return b;
}

std::string shape(const entry& e) {
  std::string s;
  if (e.grid[0]) {
    s = "grid " + dims(e.grid) + " block " + dims(e.block);
    if (e.shared_bytes) s += " shared " + std::to_string(e.shared_bytes) + " B";
    s += ", " + std::to_string(e.params) + " parameter" + (e.params == 1 ? "" : "s");
    if (!e.param_sizes.empty()) {
      s += " (";
      for (std::size_t i = 0; i < e.param_sizes.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(e.param_sizes[i]);
      }
      s += std::string(e.params > e.param_sizes.size() ? ",..." : "") + " bytes)";
    }
  } else if (e.bytes) {
    s = std::to_string(e.bytes) + " bytes";
    if (e.src) s += " from " + hex(e.src);
    if (e.dst) s += " to " + hex(e.dst);
  }
  return s;
}

std::string site(const entry& e) {
  if (e.file.empty()) return "";
  std::string s = e.file + ":" + std::to_string(e.line);
  if (!e.function.empty()) s += " in `" + e.function + "`";
  return s;
}

std::string awaiter(const entry& e) {
  if (!e.awaiter_queue && !e.awaiter_token) return "";
  if (!e.awaiter_queue) return "C ABI completion: token " + hex(e.awaiter_token);
  return "C ABI completion: queue " + std::to_string(e.awaiter_queue) + ", token " + hex(e.awaiter_token);
}

std::string state(const entry& e, std::int64_t now) {
  if (e.state == status::failed) return "refused by the driver (CUresult " + std::to_string(e.result) + ")";
  if (e.state == status::issuing && !e.done) return "IN THE DRIVER CALL for " + duration(now - e.issued_ns);
  if (e.done) return e.done_ns ? "done, seen " + duration(now - e.done_ns) + " ago" : "done";
  return "IN FLIGHT for " + duration(now - e.issued_ns);
}

// The first operation of a stream not seen done: what a hang is most likely about.
const entry* oldest_in_flight(const stream_history& h) {
  for (const entry& e : h.entries)
    if (!e.done && e.state != status::failed) return &e;
  return nullptr;
}

void line(std::string& out, const entry& e, std::int64_t now) {
  out += "    #" + std::to_string(e.seq) + " " + what(e);
  if (const std::string sh = shape(e); !sh.empty()) out += ", " + sh;
  out += "\n      " + state(e, now) + "; issued " + duration(now - e.issued_ns) + " ago by thread " +
         std::to_string(e.thread);
  if (const std::string w = site(e); !w.empty()) out += " from " + w;
  if (const std::string a = awaiter(e); !a.empty()) out += "; awaited by " + a;
  out += "\n";
}

}  // namespace

std::string text(const snapshot& s) {
  std::string out = "cuasync flight recorder (pid " + std::to_string(s.pid) + "): " + s.reason + "\n";
  char when[64] = "";
  const std::time_t t = static_cast<std::time_t>(s.wall_time_s);
  std::tm tm{};
  if (gmtime_r(&t, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  out += "  taken " + std::string(when) + "; the last " + std::to_string(s.per_stream) +
         " operations of each stream are kept; times from " + clock_name() + "\n";
  std::size_t busy = 0;
  for (const stream_history& h : s.streams) busy += h.in_flight() != 0;
  out += "  " + std::to_string(s.streams.size()) + " stream(s) recorded, " + std::to_string(busy) +
         " with operations not seen done\n";
  for (const stream_history& h : s.streams) {
    if (const entry* e = oldest_in_flight(h))
      out += "  -> " + stream_name(h) + ": " + what(*e) + " #" + std::to_string(e->seq) + " " +
             state(*e, s.taken_ns) + (site(*e).empty() ? "" : ", issued from " + site(*e)) + "\n";
  }
  if (!s.blocked_calls.empty()) {
    out += "  host threads inside a driver call now:\n";
    for (const std::string& c : s.blocked_calls) out += "    " + c + "\n";
  }
  if (s.untracked_streams)
    out += "  (" + std::to_string(s.untracked_streams) + " stream(s) were not recorded: too many rings)\n";
  for (const stream_history& h : s.streams) {
    const std::size_t open = h.in_flight();
    out += "\n  " + stream_name(h) + ": " + std::to_string(h.recorded) + " operation(s) recorded, " +
           std::to_string(open) + " not seen done";
    if (h.done_up_to) out += ", done up to #" + std::to_string(h.done_up_to);
    out += "\n";
    // Everything not seen done, then the latest done ones before it (what ran last).
    std::size_t first = h.entries.size();
    for (std::size_t i = 0; i < h.entries.size(); ++i)
      if (!h.entries[i].done) {
        first = i;
        break;
      }
    const std::size_t context = 3;
    const std::size_t from = first > context ? first - context : 0;
    if (from > 0) out += "    ... " + std::to_string(from) + " earlier operation(s) done\n";
    for (std::size_t i = from; i < h.entries.size(); ++i) line(out, h.entries[i], s.taken_ns);
  }
  return out;
}

std::string chrome_json(const snapshot& s) {
  json::writer w;
  w.begin_object().key("traceEvents").begin_array();
  const auto pid = static_cast<std::int64_t>(s.pid);
  std::int64_t origin = s.taken_ns;
  for (const stream_history& h : s.streams)
    for (const entry& e : h.entries) origin = std::min(origin, e.issued_ns);
  auto us = [&](std::int64_t ns) { return double(ns - origin) / 1e3; };
  std::int64_t tid = 0;
  for (const stream_history& h : s.streams) {
    ++tid;
    w.newline().begin_object().member("ph", "M").member("name", "thread_name").member("pid", pid).member("tid", tid);
    w.key("args").begin_object().member("name", stream_name(h)).end_object().end_object();
    for (const entry& e : h.entries) {
      const std::int64_t end = e.done && e.done_ns ? e.done_ns : e.done ? e.issued_ns : s.taken_ns;
      w.newline().begin_object().member("ph", "X").member("name", e.name.empty() ? e.call : e.name);
      w.member("cat", e.done ? "flight,done" : "flight,in_flight").member("pid", pid).member("tid", tid);
      w.member("ts", us(e.issued_ns)).member("dur", std::max(0.0, us(end) - us(e.issued_ns)));
      w.key("args").begin_object().member("seq", e.seq).member("call", e.call).member("state", state(e, s.taken_ns));
      if (const std::string sh = shape(e); !sh.empty()) w.member("shape", sh);
      if (const std::string where = site(e); !where.empty()) w.member("issued_from", where);
      if (const std::string a = awaiter(e); !a.empty()) w.member("awaited_by", a);
      w.member("thread", e.thread).end_object().end_object();
    }
  }
  w.newline().end_array();
  w.key("metadata").begin_object().member("reason", s.reason).member("pid", pid).end_object();
  w.end_object();
  return w.take();
}

}  // namespace cuasync::trace::flight
