// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "library_search.hpp"

#include <cuasync/jit/nvrtc.hpp>

#include <dlfcn.h>

#include <cstdlib>

namespace cuasync::jit::detail {

opened_library open_first(const char* env_var, const std::vector<std::string>& names) {
  opened_library out;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv(env_var); env && *env) {
    candidates = {env};
    out.env = env;
  } else {
    candidates = names;
    for (const auto& dir : nvrtc_search_path())
      for (const auto& name : names) candidates.push_back(dir + "/" + name);
  }
  for (const auto& c : candidates) {
    if ((out.handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      out.path = c;
      return out;
    }
    const char* e = ::dlerror();
    out.tried += "\n  " + c + ": " + (e ? e : "?");
  }
  return out;
}

}  // namespace cuasync::jit::detail
