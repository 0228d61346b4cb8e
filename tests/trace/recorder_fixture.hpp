// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The recorder is one per process: each test starts it from empty and leaves it off and empty.
#include <cuasync/trace/recorder.hpp>

namespace cuasync::trace::test {

struct fresh_recorder {
  explicit fresh_recorder(const options& o = {}) {
    disable();
    clear();
    enable(o);
  }
  ~fresh_recorder() {
    disable();
    clear();
    enable({});  // forget the output path, so that nothing is written at exit
    disable();
  }
  fresh_recorder(const fresh_recorder&) = delete;
  fresh_recorder& operator=(const fresh_recorder&) = delete;
};

}  // namespace cuasync::trace::test
