// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to jit/: plain values and length-prefixed strings appended to a byte string, and read back with every read
// bounds-checked. The cache entries (cache_entry_format.cpp) and the compile farm's frames (farm_protocol.cpp) use it;
// both are read only by the machine that wrote them (host byte order).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cuasync::jit::detail {

struct byte_writer {
  std::string out;
  template <class T>
  void value(const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(std::string_view s) {
    value(static_cast<std::uint64_t>(s.size()));
    out.append(s);
  }
};

// Reads what `byte_writer` wrote; a read past the end yields a zero value or an empty string and clears `ok`.
struct byte_reader {
  std::string_view in;
  bool ok = true;
  template <class T>
  T value() {
    T v{};
    if (in.size() < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string str() {
    const auto n = value<std::uint64_t>();
    if (!ok || n > in.size()) {
      ok = false;
      return {};
    }
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
  // A count of items that each take at least one byte: more than are left is malformed.
  std::uint64_t count() {
    const auto n = value<std::uint64_t>();
    if (n > in.size()) ok = false;
    return ok ? n : 0;
  }
};

}  // namespace cuasync::jit::detail
