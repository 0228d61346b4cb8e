// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: the disk cache's entry decoder. The first byte picks the mode: whole entry files as found on disk (header,
// key, checksum, payload), or a payload behind a valid header and checksum (so the fuzzer reaches the payload's
// decoding past the checksum). Malformed bytes are a rejection, never a crash or an oversized allocation.
#include <cuasync/jit/disk_cache.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const cuasync::jit::cache_key key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  std::string why;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    (void)cuasync::jit::detail::decode_entry(bytes, key, why);
  else
    (void)cuasync::jit::detail::decode_payload(bytes, why);
  return 0;
}
