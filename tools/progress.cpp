// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The progress line (progress.hpp): rewritten in place on a terminal, one line per phase elsewhere.
#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cuasync::tools {

progress::progress(std::string command) : command_(std::move(command)) {
  const char* env = std::getenv("CUASYNC_PROGRESS");
  on_ = !(env && !std::strcmp(env, "0"));
  terminal_ = isatty(STDERR_FILENO) == 1;
}

progress::~progress() { done(); }

void progress::phase(const std::string& what) {
  if (!on_) return;
  phase_ = what;
  started_ = std::chrono::steady_clock::now();
  if (terminal_) {
    draw("");
  } else {
    std::fprintf(stderr, "%s: %s\n", command_.c_str(), what.c_str());
    std::fflush(stderr);
  }
}

void progress::update(const std::string& detail) {
  if (!on_ || !terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  draw(detail);
}

void progress::draw(const std::string& detail) {
  last_draw_ = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(last_draw_ - started_).count();
  // \r and "erase to the end of the line": the next draw replaces this one.
  std::fprintf(stderr, "\r\033[K%s: %s %s(%.1f s)", command_.c_str(), phase_.c_str(),
               detail.empty() ? "" : (detail + " ").c_str(), s);
  std::fflush(stderr);
  drawn_ = true;
}

void progress::done() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace cuasync::tools
