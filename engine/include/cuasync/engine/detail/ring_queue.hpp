// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: a FIFO in a circular buffer, for queues that fill and drain once per
// operation (the engine's per-stream FIFOs, async_io's completion FIFO). std::deque allocates a block each time its
// end crosses one (every 64 pointers) and frees one at the other end: an allocation every few dozen operations in a
// closed loop. This one grows by doubling and never shrinks, so a queue that has reached its working size allocates
// nothing. Random-access iterators, so sorted insertion and binary search work as on a deque.
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace cuasync::detail {

template <class T>
class ring_queue {
 public:
  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = T*;
    using reference = T&;
    iterator() = default;
    iterator(ring_queue* q, std::size_t i) noexcept : q_(q), i_(i) {}
    T& operator*() const noexcept { return (*q_)[i_]; }
    T* operator->() const noexcept { return &(*q_)[i_]; }
    T& operator[](difference_type n) const noexcept { return (*q_)[i_ + n]; }
    iterator& operator++() noexcept { return ++i_, *this; }
    iterator operator++(int) noexcept { return {q_, i_++}; }
    iterator& operator--() noexcept { return --i_, *this; }
    iterator operator--(int) noexcept { return {q_, i_--}; }
    iterator& operator+=(difference_type n) noexcept { return i_ += n, *this; }
    iterator& operator-=(difference_type n) noexcept { return i_ -= n, *this; }
    friend iterator operator+(iterator a, difference_type n) noexcept { return a += n; }
    friend iterator operator+(difference_type n, iterator a) noexcept { return a += n; }
    friend iterator operator-(iterator a, difference_type n) noexcept { return a -= n; }
    friend difference_type operator-(iterator a, iterator b) noexcept {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(iterator a, iterator b) noexcept { return a.i_ == b.i_; }
    friend auto operator<=>(iterator a, iterator b) noexcept { return a.i_ <=> b.i_; }
    std::size_t index() const noexcept { return i_; }

   private:
    ring_queue* q_ = nullptr;
    std::size_t i_ = 0;
  };

  ring_queue() = default;
  ring_queue(const ring_queue&) = delete;
  ring_queue& operator=(const ring_queue&) = delete;

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return buf_[(head_ + i) & (cap_ - 1)]; }
  const T& operator[](std::size_t i) const noexcept { return buf_[(head_ + i) & (cap_ - 1)]; }
  T& front() noexcept { return (*this)[0]; }
  T& back() noexcept { return (*this)[size_ - 1]; }
  iterator begin() noexcept { return {this, 0}; }
  iterator end() noexcept { return {this, size_}; }

  //! @throws std::bad_alloc (nothing changed)
  void push_back(T v) {
    // Slots hold a T at all times (a default one when free): what leaves the queue is reset to T{}. Checked here,
    // where T is complete (a nested struct's own class is not, where the queue is declared).
    static_assert(std::is_nothrow_default_constructible_v<T> && std::is_nothrow_move_assignable_v<T>);
    if (size_ == cap_) grow();
    (*this)[size_++] = std::move(v);
  }
  void pop_front() noexcept {
    front() = T{};
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  void clear() noexcept {
    for (std::size_t i = 0; i < size_; ++i) (*this)[i] = T{};
    head_ = size_ = 0;
  }
  //! Inserts before `pos`, moving the items after it. @throws std::bad_alloc (nothing changed)
  iterator insert(iterator pos, T v) {
    const std::size_t at = pos.index();
    if (size_ == cap_) grow();
    for (std::size_t i = size_; i > at; --i) (*this)[i] = std::move((*this)[i - 1]);
    (*this)[at] = std::move(v);
    ++size_;
    return {this, at};
  }
  iterator erase(iterator pos) noexcept {
    const std::size_t at = pos.index();
    for (std::size_t i = at; i + 1 < size_; ++i) (*this)[i] = std::move((*this)[i + 1]);
    back() = T{};
    --size_;
    return {this, at};
  }

 private:
  void grow() {
    const std::size_t cap = cap_ ? cap_ * 2 : 16;
    std::unique_ptr<T[]> buf(new T[cap]);
    for (std::size_t i = 0; i < size_; ++i) buf[i] = std::move((*this)[i]);
    buf_ = std::move(buf);
    cap_ = cap;
    head_ = 0;
  }
  std::unique_ptr<T[]> buf_;
  std::size_t cap_ = 0;  // a power of two (or 0)
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace cuasync::detail
