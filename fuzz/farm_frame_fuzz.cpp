// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: the compile farm's frames (jit/src/farm_protocol.hpp), as the parent and the worker read them off their
// socket: the bytes fed to the incremental parser in two pieces, then each whole frame's payload decoded as a request,
// a hello and a failure. Malformed bytes are an error or nothing yet, never a crash or an oversized allocation.
#include "farm_protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace cuasync::jit::detail::farm;
  if (size == 0) return 0;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  const std::size_t n = size - 1, cut = n ? data[0] % (n + 1) : 0;
  frame_parser parser;
  parser.feed(bytes, cut);
  std::string error;
  for (int piece = 0; piece < 2; ++piece) {
    while (auto f = parser.next(error)) {
      std::string why;
      (void)decode_request(f->payload, why);
      (void)decode_hello(f->payload);
      (void)decode_failure(f->payload);
    }
    if (!error.empty()) return 0;
    parser.feed(bytes + cut, n - cut);
  }
  // The payload decoders on the raw bytes too (most inputs never make a whole frame).
  std::string why;
  (void)decode_request(std::string_view(bytes, n), why);
  (void)decode_hello(std::string_view(bytes, n));
  (void)decode_failure(std::string_view(bytes, n));
  return 0;
}
