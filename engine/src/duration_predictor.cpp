// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/duration_predictor.hpp>

#include <algorithm>

namespace cuasync {

namespace {
std::uint32_t clamp_ns(std::int64_t ns) noexcept {
  return static_cast<std::uint32_t>(std::min<std::int64_t>(ns, UINT32_MAX));
}
}  // namespace

duration_predictor::duration_predictor() : table_(new set[set_count]) {}

std::int64_t duration_predictor::estimate(const slot& s) noexcept {
  if (s.close_n == 0) return s.loose;
  std::int64_t m = s.close[0];  // widened before comparing
  for (int i = 1; i < s.close_n; ++i) m = std::min<std::int64_t>(m, s.close[i]);
  return s.loose ? std::min<std::int64_t>(m, s.loose) : m;  // with close samples, `loose` is a cap (unconfirmed)
}

std::int64_t duration_predictor::predict(std::uint64_t key) const noexcept {
  if (key == 0) return 0;
  const set& st = set_of(key);
  for (const slot& s : st.way)
    if (s.key == key) return estimate(s);
  return 0;
}

void duration_predictor::observe(std::uint64_t key, std::int64_t lo_ns, std::int64_t hi_ns) noexcept {
  if (key == 0 || lo_ns < 0 || hi_ns < lo_ns) return;
  set& st = set_of(key);
  slot* found = st.way[0].key == key ? &st.way[0] : st.way[1].key == key ? &st.way[1] : nullptr;
  if (!found) {
    // A new key takes the way that knows less (one-off work keeps replacing itself, repeating work stays).
    found = st.way[1].close_n <= st.way[0].close_n ? &st.way[1] : &st.way[0];
    *found = slot{key};
  }
  slot& s = *found;
  const bool close = hi_ns - lo_ns <= close_read_ns;
  const std::int64_t est = estimate(s);
  // The work ended before the estimate and nobody read it closely (the wake-up came late), or it ran well past the
  // estimate: it changed. Start afresh. (A close read shorter than the estimate just lowers the minimum.)
  if (est > 0 && ((!close && hi_ns < est) || lo_ns > est + std::max(close_read_ns, est / 8))) {
    s = slot{key};
  } else if (!close && s.close_n > 0 && lo_ns < est) {
    // Pending only before the estimate, done when next seen after it: the estimate is not confirmed. It may be too
    // long, a late wake-up hiding that (hi past the estimate proves nothing), and nothing else would ever correct it:
    // a too-long estimate sleeps past every end. So each unconfirmed wait lowers it a step (an eighth, geometric),
    // never below what was seen pending, until a wake-up comes before the end and reads it closely.
    const std::int64_t step = std::max(est / 8, 2 * close_read_ns);
    s.loose = clamp_ns(std::max(lo_ns, std::max<std::int64_t>(est - step, 1)));
    return;
  }
  if (close) {
    s.close[s.next] = clamp_ns(hi_ns);
    s.next = static_cast<std::uint8_t>((s.next + 1) % kept);
    if (s.close_n < kept) ++s.close_n;
    s.loose = 0;  // confirmed: the cap goes
  } else if (s.close_n == 0) {
    s.loose = std::max(s.loose, clamp_ns(lo_ns));
  }
}

}  // namespace cuasync
