// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A fake libnccl.so.2 for the simulated driver: the entry points collectives/ resolves (declared once, in
// nccl_api.hpp: the signatures below are checked against its function types), with faults set by knobs. It never
// frees a communicator: an aborted or destroyed one is poisoned, and any later use of it is counted as a
// use-after-free (and printed, FAKE_NCCL USE-AFTER-FREE), as is an abort while another thread is inside a call on it.
//
// Knobs: fake_nccl_set("coll_fail_at", 2) from a test (fake_nccl_control.hpp), or FAKE_NCCL_COLL_FAIL_AT=2 in the
// environment (read once, at load). Setting a knob restarts the collective count that coll_fail_at refers to.
#include <cuasync/collectives/detail/nccl_api.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

namespace nccl = cuasync::collectives::detail;
using nccl::nccl_comm;
using nccl::nccl_result;

// NCCL's `struct ncclComm`, which cuasync never looks into.
struct cuasync::collectives::detail::nccl_comm_opaque {
  std::atomic<unsigned> magic{0xC0FFEE};
  int rank = 0, nranks = 0, device = 0;
  std::atomic<long> async_polls{0};
  std::atomic<int> in_call{0};  // threads inside a call that uses it
};

namespace {

constexpr unsigned live_magic = 0xC0FFEE, dead_magic = 0xDEAD;

#define FAKE_NCCL_KNOBS(X)                                                                                 \
  X(init_fail) X(init_sleep_ms) X(uid_fail) X(version) X(version_fail) X(coll_sleep_ms) X(coll_fail)      \
  X(coll_fail_at) X(coll_fail_code) X(async_after) X(async_rank) X(async_code) X(abort_sleep_ms)          \
  X(destroy_sleep_ms) X(group_end_fail) X(group_end_sleep_ms)

struct knobs_t {
#define FAKE_NCCL_KNOB(k) std::atomic<long> k{0};
  FAKE_NCCL_KNOBS(FAKE_NCCL_KNOB)
#undef FAKE_NCCL_KNOB
};
knobs_t knobs;

long from_env(const char* knob, long fallback) {
  std::string name = "FAKE_NCCL_";
  for (const char* p = knob; *p; ++p) name += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  const char* v = std::getenv(name.c_str());
  return v && *v ? std::atol(v) : fallback;
}

long fallback_of(const std::string& k) {
  if (k == "version") return 22809;
  if (k == "async_after" || k == "async_rank") return -1;
  if (k == "coll_fail_code") return nccl::nccl_invalid_argument;
  if (k == "async_code") return nccl::nccl_remote_error;
  return 0;
}

std::atomic<int> live{0}, inits{0}, aborts{0}, destroys{0}, finalizes{0}, polls{0}, uaf{0}, collectives{0},
    group_ends{0};
std::mutex report_mutex;
std::string uaf_where;
thread_local int group_depth = 0;  // NCCL's groups are per thread
thread_local std::vector<nccl_comm> grouped;

[[maybe_unused]] const bool loaded = [] {
#define FAKE_NCCL_LOAD(k) knobs.k = from_env(#k, fallback_of(#k));
  FAKE_NCCL_KNOBS(FAKE_NCCL_LOAD)
#undef FAKE_NCCL_LOAD
  return true;
}();

void sleep_ms(long ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void note_uaf(const char* fn, const char* what) {
  ++uaf;
  std::lock_guard lock(report_mutex);
  uaf_where += std::string(fn) + " ";
  std::fprintf(stderr, "FAKE_NCCL USE-AFTER-FREE: %s %s\n", fn, what);
}

bool usable(nccl_comm c, const char* fn) {
  if (!c) return false;
  if (c->magic.load() != live_magic) {
    note_uaf(fn, "on a communicator already aborted or destroyed");
    return false;
  }
  return true;
}

// A call that uses `c` for a while: an abort or destroy meanwhile is a use-after-free in the caller.
struct in_call {
  nccl_comm c;
  explicit in_call(nccl_comm comm) : c(comm) { if (c) ++c->in_call; }
  ~in_call() { if (c) --c->in_call; }
};

nccl_result free_comm(nccl_comm c, const char* fn, long sleep) {
  if (!c) return nccl::nccl_success;
  if (c->in_call.load() > 0) note_uaf(fn, "while another thread is inside a call on the communicator");
  sleep_ms(sleep);
  if (!usable(c, fn)) return nccl::nccl_invalid_usage;
  c->magic = dead_magic;
  --live;
  return nccl::nccl_success;
}

nccl_result collective(nccl_comm c, const char* fn) {
  in_call busy(c);
  if (!usable(c, fn)) return nccl::nccl_invalid_usage;
  sleep_ms(knobs.coll_sleep_ms);
  if (!usable(c, fn)) return nccl::nccl_invalid_usage;
  const int n = ++collectives;
  if (long r = knobs.coll_fail) return static_cast<nccl_result>(r);
  if (long at = knobs.coll_fail_at; at > 0 && n == at) return static_cast<nccl_result>(knobs.coll_fail_code.load());
  if (group_depth > 0) grouped.push_back(c);
  return nccl::nccl_success;
}

nccl_comm make_comm(int rank, int nranks, int device) {
  // Never deleted: a freed one stays readable, poisoned. Kept reachable from here, so LeakSanitizer (build-asan runs
  // collectives_simulated) does not count them.
  static std::mutex registry_mutex;
  static auto* registry = new std::vector<std::unique_ptr<nccl::nccl_comm_opaque>>;
  auto owned = std::make_unique<nccl::nccl_comm_opaque>();
  nccl_comm c = owned.get();
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  {
    std::lock_guard lock(registry_mutex);
    registry->push_back(std::move(owned));
  }
  ++live;
  return c;
}

}  // namespace

extern "C" {

nccl_result ncclGetVersion(int* v) {
  *v = static_cast<int>(knobs.version.load());
  return static_cast<nccl_result>(knobs.version_fail.load());
}
nccl_result ncclGetUniqueId(nccl::nccl_unique_id* id) {
  if (long r = knobs.uid_fail) return static_cast<nccl_result>(r);
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "fake-id-%d-%lld", static_cast<int>(::getpid()),
                static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return nccl::nccl_success;
}
nccl_result ncclCommInitRank(nccl_comm* out, int nranks, nccl::nccl_unique_id, int rank) {
  ++inits;
  sleep_ms(knobs.init_sleep_ms);
  *out = nullptr;
  if (long r = knobs.init_fail) return static_cast<nccl_result>(r);
  int device = 0;
  *out = make_comm(rank, nranks, device);
  return nccl::nccl_success;
}
nccl_result ncclCommInitAll(nccl_comm* comms, int ndev, const int* devices) {
  ++inits;
  if (long r = knobs.init_fail) return static_cast<nccl_result>(r);
  for (int i = 0; i < ndev; ++i) comms[i] = make_comm(i, ndev, devices ? devices[i] : i);
  return nccl::nccl_success;
}
nccl_result ncclCommDestroy(nccl_comm c) {
  const nccl_result r = free_comm(c, "ncclCommDestroy", knobs.destroy_sleep_ms);
  if (r == nccl::nccl_success) ++destroys;
  return r;
}
nccl_result ncclCommAbort(nccl_comm c) {
  const nccl_result r = free_comm(c, "ncclCommAbort", knobs.abort_sleep_ms);
  if (c && r == nccl::nccl_success) ++aborts;
  return r;
}
nccl_result ncclCommFinalize(nccl_comm c) {
  in_call busy(c);
  if (!usable(c, "ncclCommFinalize")) return nccl::nccl_invalid_usage;
  ++finalizes;
  return nccl::nccl_success;
}
nccl_result ncclCommGetAsyncError(nccl_comm c, nccl_result* error) {
  in_call busy(c);
  ++polls;
  *error = nccl::nccl_success;
  if (!usable(c, "ncclCommGetAsyncError")) return nccl::nccl_invalid_usage;
  const long n = ++c->async_polls;
  const long after = knobs.async_after, rank = knobs.async_rank;
  if (after >= 0 && n > after && (rank < 0 || rank == c->rank))
    *error = static_cast<nccl_result>(knobs.async_code.load());
  return nccl::nccl_success;
}
nccl_result ncclCommCount(nccl_comm c, int* out) {
  if (!usable(c, "ncclCommCount")) return nccl::nccl_invalid_usage;
  *out = c->nranks;
  return nccl::nccl_success;
}
nccl_result ncclCommCuDevice(nccl_comm c, int* out) {
  if (!usable(c, "ncclCommCuDevice")) return nccl::nccl_invalid_usage;
  *out = c->device;
  return nccl::nccl_success;
}
nccl_result ncclCommUserRank(nccl_comm c, int* out) {
  if (!usable(c, "ncclCommUserRank")) return nccl::nccl_invalid_usage;
  *out = c->rank;
  return nccl::nccl_success;
}
// Texts of its own, so a test can tell them from cuasync's built-in table.
const char* ncclGetErrorString(nccl_result r) {
  return r == nccl::nccl_remote_error ? "FAKE NCCL: remote error" : "FAKE NCCL: error text";
}
const char* ncclGetLastError(nccl_comm) { return "fake NCCL's last error"; }
nccl_result ncclGroupStart() {
  ++group_depth;
  return nccl::nccl_success;
}
nccl_result ncclGroupEnd() {
  if (group_depth <= 0) return nccl::nccl_invalid_usage;  // NCCL's answer to an end without a start
  if (--group_depth > 0) return nccl::nccl_success;
  ++group_ends;
  sleep_ms(knobs.group_end_sleep_ms);
  // The outermost end issues the calls queued on this thread: every communicator must still be alive.
  for (nccl_comm c : std::exchange(grouped, {})) usable(c, "ncclGroupEnd (a grouped call)");
  return static_cast<nccl_result>(knobs.group_end_fail.load());
}
nccl_result ncclAllReduce(const void*, void*, std::size_t, int, int, nccl_comm c, CUstream) {
  return collective(c, "ncclAllReduce");
}
nccl_result ncclBroadcast(const void*, void*, std::size_t, int, int, nccl_comm c, CUstream) {
  return collective(c, "ncclBroadcast");
}
nccl_result ncclReduceScatter(const void*, void*, std::size_t, int, int, nccl_comm c, CUstream) {
  return collective(c, "ncclReduceScatter");
}
nccl_result ncclAllGather(const void*, void*, std::size_t, int, nccl_comm c, CUstream) {
  return collective(c, "ncclAllGather");
}
nccl_result ncclSend(const void*, std::size_t, int, int, nccl_comm c, CUstream) { return collective(c, "ncclSend"); }
nccl_result ncclRecv(void*, std::size_t, int, int, nccl_comm c, CUstream) { return collective(c, "ncclRecv"); }

// The controls (fake_nccl_control.hpp). Returns false for an unknown knob.
bool fake_nccl_set(const char* knob, long value) {
  collectives = 0;
#define FAKE_NCCL_SET(k)         \
  if (std::strcmp(knob, #k) == 0) { \
    knobs.k = value;             \
    return true;                 \
  }
  FAKE_NCCL_KNOBS(FAKE_NCCL_SET)
#undef FAKE_NCCL_SET
  return false;
}
// Every knob back to its environment value (or default), and the counters to zero (`live` stays: it counts).
void fake_nccl_reset() {
#define FAKE_NCCL_LOAD(k) knobs.k = from_env(#k, fallback_of(#k));
  FAKE_NCCL_KNOBS(FAKE_NCCL_LOAD)
#undef FAKE_NCCL_LOAD
  for (auto* c : {&inits, &aborts, &destroys, &finalizes, &polls, &uaf, &collectives, &group_ends}) *c = 0;
  std::lock_guard lock(report_mutex);
  uaf_where.clear();
}
// A counter by name (inits, live, aborts, destroys, finalizes, polls, uaf, collectives, group_ends), or -1.
long fake_nccl_counter(const char* name) {
  const std::string n = name;
  if (n == "inits") return inits;
  if (n == "live") return live;
  if (n == "aborts") return aborts;
  if (n == "destroys") return destroys;
  if (n == "finalizes") return finalizes;
  if (n == "polls") return polls;
  if (n == "uaf") return uaf;
  if (n == "collectives") return collectives;
  if (n == "group_ends") return group_ends;
  return -1;
}
// This thread's NCCL group depth.
int fake_nccl_group_depth() { return group_depth; }
int fake_nccl_report(char* out, int size) {
  std::lock_guard lock(report_mutex);
  return std::snprintf(out, static_cast<std::size_t>(size),
                       "inits=%d live=%d aborts=%d destroys=%d finalizes=%d polls=%d uaf=%d [%s] group_depth=%d",
                       inits.load(), live.load(), aborts.load(), destroys.load(), finalizes.load(), polls.load(),
                       uaf.load(), uaf_where.c_str(), group_depth);
}

}  // extern "C"

// The signatures collectives/ calls through (nccl_api.hpp's types): a mismatch fails to build.
using namespace cuasync::collectives::detail;
#define FAKE_NCCL_CHECK_SIGNATURE(member, symbol, type) \
  static_assert(std::is_same_v<decltype(&symbol), type>, #symbol " does not match nccl_api.hpp");
CUASYNC_NCCL_ENTRY_POINTS(FAKE_NCCL_CHECK_SIGNATURE)
#undef FAKE_NCCL_CHECK_SIGNATURE
static_assert(std::is_same_v<decltype(&ncclGetLastError), nccl::nccl_get_last_error_fn>);
static_assert(std::is_same_v<decltype(&ncclCommFinalize), nccl::nccl_comm_fn>);
