// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The progress line every long phase shows on standard error: on a terminal one line rewritten in place with the
// phase and its elapsed time; elsewhere (logs, CI) one plain line when a phase starts. Standard output is left alone,
// so --json stays one object. CUASYNC_PROGRESS=0 silences it.
#include <chrono>
#include <string>

namespace cuasync::tools {

class progress {
 public:
  //! `command` prefixes every line ("cuasync demo").
  explicit progress(std::string command);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  //! A new phase ("serial run, 400 requests").
  void phase(const std::string& what);
  //! Refreshes the current phase's line with `detail` ("120/400"); on a terminal at most every 100 ms.
  void update(const std::string& detail);
  //! Ends the line (on a terminal: erases it), before the command prints its results.
  void done();

 private:
  void draw(const std::string& detail);
  std::string command_, phase_;
  bool on_ = false, terminal_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point started_, last_draw_;
};

}  // namespace cuasync::tools
