// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Loads NCCL at run time, as driver/src/loader.cpp loads libcuda: `$CUASYNC_LIBNCCL` alone when set; otherwise
// `libnccl.so.2` through the loader's search path, then the copies pip installs into Python environments
// (`site-packages/nvidia/nccl/lib`), which are not on any search path (PyTorch finds its own through its RPATH).
#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cuasync::collectives::detail {

namespace {

constexpr const char* library_name = "libnccl.so.2";

// Where pip puts NCCL (the nvidia-nccl-cu* wheels): virtual environments, the system's and the user's site-packages.
std::vector<std::string> python_candidates() {
  std::vector<std::string> patterns;
  const std::string tail = "/lib/python3*/site-packages/nvidia/nccl/lib/" + std::string(library_name);
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(var); v && *v) patterns.push_back(v + tail);
  if (const char* home = std::getenv("HOME"); home && *home) patterns.push_back(std::string(home) + "/.local" + tail);
  patterns.push_back("/opt/*/.venv" + tail);
  patterns.push_back("/opt/*" + tail);
  patterns.push_back("/usr/local" + tail);
  patterns.push_back("/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/" + std::string(library_name));
  patterns.push_back("/usr/lib/python3/dist-packages/nvidia/nccl/lib/" + std::string(library_name));
  std::vector<std::string> found;
  for (const std::string& p : patterns) {
    glob_t g{};
    if (::glob(p.c_str(), 0, nullptr, &g) == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  return found;
}

// Why `path` did not load, as an errno: dlerror is text only. Missing (or unreadable) says what stat said; a
// directory is EISDIR; a file that is there but not a loadable library (text, another architecture) ENOEXEC.
std::error_code load_failure(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {errno, std::generic_category()};
  if (S_ISDIR(st.st_mode)) return {EISDIR, std::generic_category()};
  return {ENOEXEC, std::generic_category()};
}

std::string dl_error() {
  const char* why = ::dlerror();
  return why ? why : "?";
}

}  // namespace

std::unique_ptr<const nccl_entry_points> open_nccl() {
  const char* env = std::getenv("CUASYNC_LIBNCCL");
  std::vector<std::string> tried;
  void* lib = nullptr;
  std::string path, failures;
  auto attempt = [&](const std::string& p) {
    tried.push_back(p);
    lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) path = p;
    else failures += "\n  " + p + ": " + dl_error();
    return lib != nullptr;
  };
  if (env && *env) {
    if (!attempt(env))
      throw nccl_not_found_error(load_failure(env), "dlopen",
                                 "could not load NCCL from CUASYNC_LIBNCCL='" + std::string(env) + "':" + failures +
                                     "\nPoint CUASYNC_LIBNCCL at a libnccl.so.2, or unset it to search the usual "
                                     "places");
  } else if (!attempt(library_name)) {
    for (const std::string& p : python_candidates())
      if (attempt(p)) break;
    if (!lib)
      throw nccl_not_found_error(std::error_code(ENOENT, std::generic_category()), "dlopen",
                                 "could not load NCCL; tried:" + failures +
                                     "\n  (and the Python environments' site-packages/nvidia/nccl/lib)\nInstall NCCL "
                                     "(e.g. pip install nvidia-nccl-cu13, or the libnccl2 package) or set "
                                     "CUASYNC_LIBNCCL to its libnccl.so.2");
  }
  auto d = std::make_unique<nccl_entry_points>();
  std::string missing;
#define CUASYNC_FETCH_NCCL(member, symbol, type)                                  \
  d->member = reinterpret_cast<type>(::dlsym(lib, #symbol));                      \
  if (!d->member) missing += missing.empty() ? #symbol : ", " #symbol;
  CUASYNC_NCCL_ENTRY_POINTS(CUASYNC_FETCH_NCCL)
#undef CUASYNC_FETCH_NCCL
  d->get_last_error = reinterpret_cast<nccl_get_last_error_fn>(::dlsym(lib, "ncclGetLastError"));
  d->comm_finalize = reinterpret_cast<nccl_comm_fn>(::dlsym(lib, "ncclCommFinalize"));
  if (!missing.empty()) {
    ::dlclose(lib);
    throw nccl_too_old_error(std::error_code(ENOSYS, std::generic_category()), "dlsym",
                             "'" + path + "' lacks " + missing +
                                 ": it is not NCCL, or an NCCL older than 2.7; point CUASYNC_LIBNCCL at NCCL 2.7 or "
                                 "newer");
  }
  if (const nccl_result r = d->get_version(&d->version); r != nccl_success || d->version <= 0) {
    ::dlclose(lib);
    throw nccl_not_found_error(r != nccl_success ? make_nccl_error_code(r)
                                                 : std::error_code(ENOEXEC, std::generic_category()),
                               "ncclGetVersion",
                               "'" + path + "': ncclGetVersion " +
                                   (r != nccl_success ? "failed" : "gave version " + std::to_string(d->version)) +
                                   ": not a usable NCCL; point CUASYNC_LIBNCCL at NCCL 2.7 or newer");
  }
  d->library = path;
  return d;
}

namespace {
std::atomic<const nccl_entry_points*> loaded_entry_points{nullptr};
}

const nccl_entry_points& nccl() {
  static std::once_flag once;
  static std::unique_ptr<const nccl_entry_points> loaded;
  static std::exception_ptr failure;
  std::call_once(once, [] {
    try {
      loaded = open_nccl();
      loaded_entry_points.store(loaded.get(), std::memory_order_release);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (loaded) return *loaded;
  std::rethrow_exception(failure);
}

const nccl_entry_points* nccl_if_loaded() noexcept { return loaded_entry_points.load(std::memory_order_acquire); }

void default_nvls_off() noexcept { ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

}  // namespace cuasync::collectives::detail
