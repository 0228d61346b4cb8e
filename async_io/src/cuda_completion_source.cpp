#include <cuasync/async_io/cuda_completion_source.hpp>

#include <cuasync/driver/error.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cuasync {
namespace {

// One pooled event. Slots are never freed (the pool lives as long as the process); a token is a slot's address.
// A caller's event is token `CUevent | 1` (handles are aligned), released to nobody.
struct event_slot {
  CUevent event = nullptr;
  CUcontext ctx = nullptr;
};

struct context_pool {
  std::vector<event_slot*> idle;
  std::size_t created = 0;
};

constexpr std::uintptr_t user_event_bit = 1;

// One handle, many streams (per context, per thread): the service cannot vouch for order among its waits.
bool is_special_stream(CUstream s) noexcept { return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

}  // namespace

struct cuda_completion_source::pools {
  std::mutex mutex;
  std::unordered_map<CUcontext, context_pool> by_context;
  // Recording and numbering under one lock per stream (sharded by handle), so that the numbers of one stream's
  // events follow their order on the stream even when threads record concurrently.
  std::array<std::mutex, 16> record_locks;
  std::atomic<std::uint64_t> next_order{1};
};

cuda_completion_source& cuda_completion_source::instance() {
  static cuda_completion_source* s = new cuda_completion_source;  // never destroyed: pollers may outlive statics
  return *s;
}

cuda_completion_source::pools& cuda_completion_source::state() const {
  static pools* p = new pools;
  return *p;
}

pooled_event cuda_completion_source::record(stream_ref s, std::source_location where) {
  if (!s) detail::throw_invalid("cuasync::async_wait", "null stream", where);
  pools& st = state();
  event_slot* slot = nullptr;
  {
    std::lock_guard lock(st.mutex);
    context_pool& pool = st.by_context[s.context().get()];
    if (!pool.idle.empty()) {
      slot = pool.idle.back();
      pool.idle.pop_back();
    }
  }
  if (!slot) {
    event e = event::create(s.context());  // timing disabled
    slot = new event_slot{e.release(), s.context().get()};
    std::lock_guard lock(st.mutex);
    ++st.by_context[slot->ctx].created;
  }
  event_ref ev(slot->event, s.context());
  std::uint64_t order = 0;
  std::uintptr_t queue_key = reinterpret_cast<std::uintptr_t>(s.get());
  try {
    if (is_special_stream(s.get())) {
      ev.record(s, where);
    } else {
      // Top bit set: never equal to a handle (the special streams are the small values 0x1 and 0x2).
      queue_key = static_cast<std::uintptr_t>(s.id()) | (std::uintptr_t{1} << 63);
      std::lock_guard lock(st.record_locks[std::hash<const void*>()(s.get()) % st.record_locks.size()]);
      ev.record(s, where);
      order = st.next_order.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    std::lock_guard lock(st.mutex);
    st.by_context[slot->ctx].idle.push_back(slot);
    throw;
  }
  return pooled_event(reinterpret_cast<std::uintptr_t>(slot), ev, s, order, queue_key);
}

std::size_t cuda_completion_source::created_events(context_ref ctx) const {
  pools& st = state();
  std::lock_guard lock(st.mutex);
  auto it = st.by_context.find(ctx.get());
  return it == st.by_context.end() ? 0 : it->second.created;
}

std::size_t cuda_completion_source::idle_events(context_ref ctx) const {
  pools& st = state();
  std::lock_guard lock(st.mutex);
  auto it = st.by_context.find(ctx.get());
  return it == st.by_context.end() ? 0 : it->second.idle.size();
}

wait_target cuda_completion_source::target(pooled_event e, std::shared_ptr<void> keep_alive) {
  const stream_ref s = e.stream();
  const std::uint64_t order = e.order_;
  const std::uintptr_t queue_key = e.queue_key_;
  return {&instance(), queue_key, reinterpret_cast<std::uintptr_t>(s.context().get()), e.release(),
          std::move(keep_alive), order};
}

wait_target cuda_completion_source::target(event_ref e, std::shared_ptr<void> keep_alive) {
  const auto handle = reinterpret_cast<std::uintptr_t>(e.get());
  return {&instance(), handle, reinterpret_cast<std::uintptr_t>(e.context().get()), handle | user_event_bit,
          std::move(keep_alive)};
}

bool cuda_completion_source::is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEINITIALIZED:
      return true;
    default:
      return false;
  }
}

poll_result cuda_completion_source::query(std::uintptr_t token) noexcept {
  CUevent ev = (token & user_event_bit) ? reinterpret_cast<CUevent>(token & ~user_event_bit)
                                        : reinterpret_cast<event_slot*>(token)->event;
  // cuEventQuery needs no current context (measured on the H200).
  const CUresult r = detail::driver().cuEventQuery(ev);
  if (r == CUDA_ERROR_NOT_READY) return {poll_status::pending, {}, {}};
  if (r == CUDA_SUCCESS) return {poll_status::ready, {}, {}};
  return {poll_status::failed, make_error_code(r), is_sticky(r) ? failure_scope::group : failure_scope::operation};
}

void cuda_completion_source::release(std::uintptr_t token) noexcept {
  if (token == 0 || (token & user_event_bit)) return;
  auto* slot = reinterpret_cast<event_slot*>(token);
  pools& st = state();
  std::lock_guard lock(st.mutex);
  st.by_context[slot->ctx].idle.push_back(slot);
}

pooled_event& pooled_event::operator=(pooled_event&& o) noexcept {
  if (this != &o) {
    if (token_) cuda_completion_source::instance().release(token_);
    token_ = std::exchange(o.token_, 0);
    event_ = o.event_;
    stream_ = o.stream_;
    order_ = o.order_;
    queue_key_ = o.queue_key_;
  }
  return *this;
}

pooled_event::~pooled_event() {
  if (token_) cuda_completion_source::instance().release(token_);
}

namespace detail {

namespace {
cuda_error wait_error(std::error_code ec, const char* api) {
  return cuda_error(ec, api,
                    ec == std::errc::operation_canceled ? "the wait was cancelled (the GPU work goes on)"
                                                        : "the awaited GPU work failed");
}
}  // namespace

[[noreturn]] void throw_wait_error(std::error_code ec, const char* api) { throw wait_error(ec, api); }

std::exception_ptr make_wait_error(std::error_code ec, const char* api) {
  return std::make_exception_ptr(wait_error(ec, api));
}

void event_starter::operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h,
                               wait_hints hints) && {
  s.start_wait(std::move(ex), cuda_completion_source::target(e, std::move(keep_alive)), std::move(h), hints);
}

void stream_starter::operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h,
                                wait_hints hints) && {
  pooled_event e;
  try {
    e = cuda_completion_source::instance().record(s);
  } catch (const cuda_error& err) {
    svc.fail_wait(std::move(ex), err.code(), std::move(h));
    return;
  }
  svc.start_wait(std::move(ex), cuda_completion_source::target(std::move(e), std::move(keep_alive)), std::move(h),
                 hints);
}

void pooled_starter::operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h,
                                wait_hints hints) && {
  s.start_wait(std::move(ex), cuda_completion_source::target(std::move(e), std::move(keep_alive)), std::move(h),
               hints);
}

}  // namespace detail
}  // namespace cuasync
