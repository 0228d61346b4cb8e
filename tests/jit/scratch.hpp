// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Files for the cache tests: a scratch directory removed at the end of the test, and whole-file reads and writes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace cuasync::test {

//! A fresh directory name under the system's temporary directory (not created), removed at the end of the test.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("cuasync-jit-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  std::filesystem::path cache() const { return path / "cache"; }
};

//! The same with its cache directory made.
struct scratch_cache : scratch_dir {
  scratch_cache() { std::filesystem::create_directories(cache()); }
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace cuasync::test
