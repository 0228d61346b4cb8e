// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: a per-thread cache of fixed-size blocks. The state of a wait is allocated and freed once per operation;
// recycling here replaces a malloc/free pair per wait. Often not on one thread: a wait's entry is allocated on the io
// thread and freed by the poller thread's pass. A thread whose cache is full therefore hands half of it to a shared
// depot (a thread that only frees hands over every 16 blocks), and a thread whose cache is empty takes a batch from
// it (one lock per `batch` blocks), so blocks flow back to the thread that allocates them instead of each free going
// to the heap and each allocation coming from it.
//
// The cache is trivially destructible, so a block freed during static destruction (after the thread's cache closed)
// still finds it; it then goes back to the heap. Every thread that touches the cache, whether it allocates or only
// frees (the poller thread), registers a closer that empties it when the thread exits, so no block is lost.
#include <cstddef>
#include <mutex>
#include <new>

namespace cuasync::detail {

template <std::size_t Size>
class block_cache {
 public:
  static void* allocate() {
    state& c = local();
    c.allocates = true;
    if (!c.size && !c.closed) take_from_depot(c);
    if (c.size) return c.blocks[--c.size];
    return ::operator new(Size);
  }
  static void free(void* p) noexcept {
    state& c = local();
    if (c.closed) return ::operator delete(p);
    // A thread that only frees (the poller's) hands its blocks over by small batches: what it keeps is what the
    // allocating thread must have allocated besides, and a loaded machine, where that thread finds most completions,
    // let it keep up to a whole cache (the pool kept growing past a long warm-up).
    if (c.size >= (c.allocates ? capacity : free_only_batch)) give_to_depot(c, c.allocates ? capacity - batch : 0);
    c.blocks[c.size++] = p;
  }

 private:
  static constexpr unsigned capacity = 256;
  static constexpr unsigned batch = capacity / 2;
  static constexpr unsigned free_only_batch = 16;
  // Blocks between threads: a fixed array under a lock (never allocates); full, a batch goes back to the heap. Never
  // destroyed (blocks may be freed during static destruction), so what it holds stays reachable.
  struct depot {
    std::mutex mutex;
    void* blocks[16 * capacity];
    unsigned size = 0;
  };
  static depot& shared() noexcept {
    static depot* d = new depot;
    return *d;
  }
  struct state {
    void* blocks[capacity];
    unsigned size;
    bool closed;
    bool allocates;  // this thread has allocated a block (else it only frees what others allocated)
  };
  struct closer {
    ~closer() {
      state& c = raw();
      c.closed = true;
      while (c.size) ::operator delete(c.blocks[--c.size]);
    }
  };
  // Hands the blocks above `keep` to the depot; those it has no room for go back to the heap.
  static void give_to_depot(state& c, unsigned keep) noexcept {
    depot& d = shared();
    {
      std::lock_guard lock(d.mutex);
      const unsigned room = static_cast<unsigned>(sizeof d.blocks / sizeof d.blocks[0]) - d.size;
      for (unsigned n = c.size - keep < room ? c.size - keep : room; n > 0; --n) d.blocks[d.size++] = c.blocks[--c.size];
    }
    while (c.size > keep) ::operator delete(c.blocks[--c.size]);  // the depot was full
  }
  static void take_from_depot(state& c) noexcept {
    depot& d = shared();
    std::lock_guard lock(d.mutex);
    while (d.size && c.size < batch) c.blocks[c.size++] = d.blocks[--d.size];
  }
  static state& raw() noexcept {
    thread_local state c{};
    return c;
  }
  static state& local() noexcept {
    state& c = raw();
    if (!c.closed) {
      thread_local closer cl;  // constructed on the thread's first use: runs at its exit
      (void)cl;
    }
    return c;
  }
};

}  // namespace cuasync::detail
