#include <cuasync/async_io/cuda_completion_source.hpp>

#include <cuasync/driver/device.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/pinned_buffer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cuasync {
namespace {

// One pooled event and its host completion word. Slots are never freed (the pool lives as long as the process); a
// token is a slot's address. A caller's event is token `CUevent | 1` (handles are aligned), released to nobody.
struct event_slot {
  CUevent event = nullptr;
  CUcontext ctx = nullptr;
  std::uint64_t* word = nullptr;  // in mapped pinned memory; null when the device has no 64-bit stream memory ops
  CUdeviceptr word_device = 0;
  std::uint64_t written = 0;   // the last value enqueued to the word (they only grow)
  std::uint64_t expected = 0;  // the value the current wait's word write stores; 0: this wait has only the event
  std::uint64_t stream_key = 0;  // the stream whose outstanding count this wait holds (0: none)
  std::uint64_t first_seq = 0;   // the stream's record count when this wait was its only one (0: it was not)
};

struct context_pool {
  std::vector<event_slot*> idle;
  std::size_t created = 0;
  int words_supported = -1;  // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, read once; -1: not yet
  std::vector<pinned_buffer> slabs;  // the words, 512 to a slab
  std::size_t words_used = 0;
};

constexpr std::size_t words_per_slab = 512;

// What the source knows of a stream: whether a wait recorded alone gets a host word, learnt from the last one.
struct stream_state {
  std::uint32_t outstanding = 0;  // waits recorded and not yet released
  std::uint64_t recorded = 0;     // waits recorded so far
  bool words = true;              // the last wait recorded alone stayed alone until released: a word pays off
};

// Recording and numbering under one lock per stream (sharded by id), so that the numbers of one stream's events
// follow their order on the stream even when threads record concurrently; and the streams' states.
struct record_shard {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, stream_state> streams;
  std::size_t sweep_at = 256;
};

constexpr std::uintptr_t user_event_bit = 1;

// One handle, many streams (per context, per thread): the service cannot vouch for order among its waits.
bool is_special_stream(CUstream s) noexcept { return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

}  // namespace

struct cuda_completion_source::pools {
  std::mutex mutex;
  std::unordered_map<CUcontext, context_pool> by_context;
  std::array<record_shard, 16> shards;
  std::atomic<std::uint64_t> next_order{1};
  std::atomic<bool> host_words{true};
  std::atomic<std::uint64_t> word_waits{0};
};

namespace {
record_shard& shard_of(std::array<record_shard, 16>& shards, std::uint64_t stream_key) noexcept {
  return shards[std::hash<std::uint64_t>()(stream_key) % shards.size()];
}

// A new slot for `ctx` (under the pools' mutex): an event, and a word where the device supports the writes.
event_slot* new_slot(context_ref ctx, context_pool& pool) {
  if (pool.words_supported < 0)
    pool.words_supported = ctx.device().attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) != 0;
  event e = event::create(ctx);  // timing disabled
  auto slot = std::make_unique<event_slot>();
  slot->ctx = ctx.get();
  if (pool.words_supported) {
    if (pool.words_used == pool.slabs.size() * words_per_slab) {
      pinned_buffer slab = pinned_buffer::allocate(ctx, words_per_slab * sizeof(std::uint64_t));
      std::memset(slab.get(), 0, slab.size());
      pool.slabs.push_back(std::move(slab));
    }
    const std::size_t i = pool.words_used++;
    const pinned_buffer& slab = pool.slabs[i / words_per_slab];
    slot->word = slab.data<std::uint64_t>() + i % words_per_slab;
    slot->word_device = slab.device_pointer() + (i % words_per_slab) * sizeof(std::uint64_t);
  }
  slot->event = e.release();
  ++pool.created;
  return slot.release();
}
}  // namespace

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
    } else {
      slot = new_slot(s.context(), pool);
    }
  }
  event_ref ev(slot->event, s.context());
  std::uint64_t order = 0;
  std::uintptr_t queue_key = reinterpret_cast<std::uintptr_t>(s.get());
  slot->expected = 0;
  slot->stream_key = slot->first_seq = 0;
  try {
    if (is_special_stream(s.get())) {
      ev.record(s, where);
    } else {
      const std::uint64_t id = s.id();
      // Top bit set: never equal to a handle (the special streams are the small values 0x1 and 0x2).
      queue_key = static_cast<std::uintptr_t>(id) | (std::uintptr_t{1} << 63);
      record_shard& shard = shard_of(st.shards, id);
      std::lock_guard lock(shard.mutex);
      stream_state& stream = shard.streams[id];
      // A wait alone on its stream gets a host word too: seeing it done is then a memory read, where a query of a
      // finished event costs ~1.3 µs (the word's write costs ~0.7 µs more to enqueue than the event alone). Waits
      // that others join before they complete need none (one query of the newest completes them all), so the word
      // is given only while the stream's last lone wait stayed alone (one stream, many in flight: no words).
      const bool first = stream.outstanding == 0;
      try {
        if (first && stream.words && slot->word && st.host_words.load(std::memory_order_relaxed)) {
          const std::uint64_t value = slot->written + 1;
          if (CUresult r = detail::driver().cuStreamWriteValue64(s.get(), slot->word_device, value, 0);
              r != CUDA_SUCCESS)
            detail::throw_cu(r, "cuStreamWriteValue64", s.describe(), where);
          slot->written = slot->expected = value;
          st.word_waits.fetch_add(1, std::memory_order_relaxed);
        }
        ev.record(s, where);
      } catch (...) {
        slot->expected = 0;
        throw;
      }
      ++stream.outstanding;
      ++stream.recorded;
      slot->stream_key = id;
      slot->first_seq = first ? stream.recorded : 0;
      order = st.next_order.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    slot->expected = 0;
    std::lock_guard lock(st.mutex);
    st.by_context[slot->ctx].idle.push_back(slot);
    throw;
  }
  return pooled_event(reinterpret_cast<std::uintptr_t>(slot), ev, s, order, queue_key);
}

void cuda_completion_source::use_host_words(bool on) noexcept {
  state().host_words.store(on, std::memory_order_relaxed);
}

std::uint64_t cuda_completion_source::host_word_waits() const noexcept {
  return state().word_waits.load(std::memory_order_relaxed);
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
  if (!(token & user_event_bit)) {
    // The word is written after the work before it, with a fence: reaching the expected value means done.
    const event_slot& slot = *reinterpret_cast<const event_slot*>(token);
    if (slot.expected != 0 &&
        std::atomic_ref<std::uint64_t>(*slot.word).load(std::memory_order_acquire) >= slot.expected)
      return {poll_status::ready, {}, {}};
  }
  // Pending word (or none): the event says whether the work is still running or failed (a faulted context never
  // writes the word). cuEventQuery needs no current context (measured on the H200).
  const CUresult r = detail::driver().cuEventQuery(ev);
  if (r == CUDA_ERROR_NOT_READY) return {poll_status::pending, {}, {}};
  if (r == CUDA_SUCCESS) return {poll_status::ready, {}, {}};
  return {poll_status::failed, make_error_code(r), is_sticky(r) ? failure_scope::group : failure_scope::operation};
}

void cuda_completion_source::release(std::uintptr_t token) noexcept {
  if (token == 0 || (token & user_event_bit)) return;
  auto* slot = reinterpret_cast<event_slot*>(token);
  pools& st = state();
  if (slot->stream_key != 0) {
    record_shard& shard = shard_of(st.shards, slot->stream_key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.streams.find(slot->stream_key);
    if (it != shard.streams.end()) {
      stream_state& stream = it->second;
      if (slot->first_seq != 0) stream.words = stream.recorded == slot->first_seq;  // nobody joined it
      // Idle streams keep their state, so a stream's next wait allocates nothing; a crowd of them is dropped.
      if (--stream.outstanding == 0 && shard.streams.size() > shard.sweep_at) {
        std::erase_if(shard.streams, [](const auto& kv) { return kv.second.outstanding == 0; });
        shard.sweep_at = std::max<std::size_t>(256, 2 * shard.streams.size());  // amortised: O(1) a release
      }
    }
    slot->stream_key = slot->first_seq = 0;
  }
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
