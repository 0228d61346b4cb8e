#pragma once
// Internal: a per-thread cache of fixed-size blocks. The state of a wait is allocated and freed once per operation,
// usually on one io thread; recycling here replaces a malloc/free pair per wait.
//
// The cache is trivially destructible, so a block freed during static destruction (after the thread's cache closed)
// still finds it; it then goes back to the heap. Every thread that touches the cache, whether it allocates or only
// frees (the poller thread), registers a closer that empties it when the thread exits, so no block is lost.
#include <cstddef>
#include <new>

namespace cuasync::detail {

template <std::size_t Size>
class block_cache {
 public:
  static void* allocate() {
    state& c = local();
    if (c.size) return c.blocks[--c.size];
    return ::operator new(Size);
  }
  static void free(void* p) noexcept {
    state& c = local();
    if (!c.closed && c.size < capacity)
      c.blocks[c.size++] = p;
    else
      ::operator delete(p);
  }

 private:
  static constexpr unsigned capacity = 256;
  struct state {
    void* blocks[capacity];
    unsigned size;
    bool closed;
  };
  struct closer {
    ~closer() {
      state& c = raw();
      c.closed = true;
      while (c.size) ::operator delete(c.blocks[--c.size]);
    }
  };
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
