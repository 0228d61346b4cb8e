// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// A whole file as a string (empty when it cannot be read): what the tests compare and parse.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cuasync::trace::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cuasync::trace::test
