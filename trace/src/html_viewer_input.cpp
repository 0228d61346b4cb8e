// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The viewer's input, the second half of its script (html_viewer.cpp has the first: the data, the view and the
// drawing; the page puts the two in one <script>, inside one function): what the pointer is over, the tooltip, a
// click on a finding, dragging, pinching, the wheel, the keys and the buttons.
#include "html_parts.hpp"

namespace cuasync::trace::detail {

const std::string_view viewer_script_input = R"js(
// What the pointer is over: a finding's marker, a span, or a pixel column of narrow spans.
function laneAt(py) { return lanes.find(L => py >= L.y && py < L.y + LANE_H) || null; }
function findingAt(L, py, t, tol) {
  if (py > L.y + FLAG_H + 1) return -1;
  const li = lanes.indexOf(L);
  for (let k = 0; k < D.findings.length; ++k) {
    const p = D.findings[k].places;
    for (let j = 0; j + 2 < p.length; j += 3)
      if (p[j] === li && p[j + 1] <= t + tol && p[j + 2] >= t - tol) return k;
  }
  return -1;
}
function spanAt(L, t, tol) {
  let best = -1;
  for (let i = lowerBound(L.b, t + tol + 1e-9) - 1, seen = 0; i >= 0 && L.b[i] >= t - tol - L.longest && seen < 20000;
       --i, ++seen)
    if (L.e[i] >= t - tol && (best < 0 || L.depth[i] > L.depth[best])) best = i;
  return best;
}
function describe(L, i) {
  const c = L.cats[i], lines = [(S[L.names[i]] || CATS[c].name) + ' \u00b7 ' + CATS[c].name + ' \u00b7 ' +
                                duration(L.e[i] - L.b[i])];
  lines.push('at ' + duration(L.b[i] + D.shift) + ' on ' + L.name);
  if (S[L.labels[i]]) lines.push('label: ' + S[L.labels[i]]);
  if (L.bytes[i]) lines.push(L.bytes[i] + ' bytes');
  return lines;
}
function hover(px, py) {
  const L = laneAt(py);
  if (!L || px < LABEL_W || px > LABEL_W + plotWidth()) { tip.style.display = 'none'; canvas.title = ''; return; }
  const scale = scaleNow(), t = timeAt(px), tol = 2 / scale;
  const k = findingAt(L, py, t, tol);
  let lines;
  if (k >= 0) {
    lines = ['finding ' + (k + 1) + ': ' + D.findings[k].id, D.findings[k].summary, '(click: read it below)'];
  } else {
    const i = spanAt(L, t, tol);
    if (i < 0) { tip.style.display = 'none'; return; }
    lines = describe(L, i);
    if ((L.e[i] - L.b[i]) * scale < WIDE) {
      const c0 = v0 + Math.floor(px - LABEL_W) / scale, c1 = c0 + 1 / scale;
      const n = lowerBound(L.b, c1) - lowerBound(L.b, c0);
      if (n > 1) lines.unshift(n + ' spans begin in this pixel column; zoom in to see them one by one. One of them:');
    }
  }
  tip.textContent = lines.join('\n');
  tip.style.display = 'block';
  const x = Math.min(px + 14, canvas.clientWidth - tip.offsetWidth - 4);
  tip.style.left = Math.max(x, 0) + 'px';
  tip.style.top = (py + 18) + 'px';
}
function click(px, py) {
  const L = laneAt(py);
  if (!L) return;
  const k = findingAt(L, py, timeAt(px), 2 / scaleNow());
  const el = k >= 0 && document.getElementById('finding-' + (k + 1));
  if (el) el.scrollIntoView({ behavior: 'smooth', block: 'start' });
}

// Pointers: one drags (pans), two pinch (zoom around their middle); a press that hardly moves is a click.
const pointers = new Map();
let pinch = null, moved = 0;
function spread() { const [a, b] = [...pointers.values()]; return Math.max(Math.abs(a.x - b.x), 1); }
canvas.addEventListener('pointerdown', ev => {
  canvas.setPointerCapture(ev.pointerId);
  pointers.set(ev.pointerId, { x: ev.offsetX, y: ev.offsetY });
  moved = 0;
  pinch = pointers.size === 2 ? { spread: spread(), v0, v1,
                                   mid: ([...pointers.values()].reduce((s, p) => s + p.x, 0)) / 2 } : null;
  canvas.style.cursor = 'grabbing';
  canvas.focus();
});
canvas.addEventListener('pointermove', ev => {
  const p = pointers.get(ev.pointerId);
  if (!p) { hover(ev.offsetX, ev.offsetY); return; }
  const dx = ev.offsetX - p.x;
  moved += Math.abs(dx) + Math.abs(ev.offsetY - p.y);
  p.x = ev.offsetX;
  p.y = ev.offsetY;
  tip.style.display = 'none';
  if (pinch && pointers.size === 2) {
    const w = (pinch.v1 - pinch.v0) * pinch.spread / spread(), f = (pinch.mid - LABEL_W) / plotWidth();
    show(pinch.v0 + f * (pinch.v1 - pinch.v0) - f * w, pinch.v0 + f * (pinch.v1 - pinch.v0) + (1 - f) * w);
  } else if (pointers.size === 1) {
    pan(-dx / scaleNow());
  }
});
function release(ev) {
  if (!pointers.delete(ev.pointerId)) return;
  if (pointers.size < 2) pinch = null;
  if (!pointers.size) canvas.style.cursor = 'grab';
  if (ev.type === 'pointerup' && moved < 4) click(ev.offsetX, ev.offsetY);
}
canvas.addEventListener('pointerup', release);
canvas.addEventListener('pointercancel', release);
canvas.addEventListener('pointerleave', () => { tip.style.display = 'none'; });
canvas.addEventListener('wheel', ev => {
  ev.preventDefault();
  const unit = ev.deltaMode === 1 ? 30 : ev.deltaMode === 2 ? 300 : 1;
  if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
    pan((ev.deltaX || ev.deltaY) * unit / scaleNow());
  } else {
    // A pinch on a touchpad arrives as a wheel with ctrlKey and small deltas.
    zoomAt(timeAt(ev.offsetX), Math.exp(-ev.deltaY * unit * (ev.ctrlKey ? 0.01 : 0.002)));
  }
  tip.style.display = 'none';
}, { passive: false });
document.addEventListener('keydown', ev => {
  const tag = ev.target && ev.target.tagName;
  if (tag === 'INPUT' || tag === 'TEXTAREA' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const mid = (v0 + v1) / 2, w = v1 - v0;
  if (ev.key === '+' || ev.key === '=') zoomAt(mid, 1.5);
  else if (ev.key === '-' || ev.key === '_') zoomAt(mid, 1 / 1.5);
  else if (ev.key === 'ArrowLeft') pan(-0.1 * w);
  else if (ev.key === 'ArrowRight') pan(0.1 * w);
  else if (ev.key === '0' || ev.key === 'Home') show(0, WINDOW);
  else return;
  ev.preventDefault();
});
document.getElementById('tl-in').addEventListener('click', () => zoomAt((v0 + v1) / 2, 2));
document.getElementById('tl-out').addEventListener('click', () => zoomAt((v0 + v1) / 2, 0.5));
document.getElementById('tl-reset').addEventListener('click', () => show(0, WINDOW));
document.querySelectorAll('button[data-finding]').forEach(button => button.addEventListener('click', () => {
  const p = D.findings[+button.dataset.finding].places;
  if (p.length < 3) return;
  const w = Math.max((p[2] - p[1]) * 4, WINDOW / 1e4, MIN_VIEW);
  show((p[1] + p[2]) / 2 - w / 2, (p[1] + p[2]) / 2 + w / 2);
  box.scrollIntoView({ behavior: 'smooth', block: 'nearest' });
}));
window.addEventListener('hashchange', () => { if (readHash()) changed(); });
if (window.ResizeObserver) new ResizeObserver(() => changed()).observe(box);
else window.addEventListener('resize', changed);
readHash();
draw();
})();
)js";

}  // namespace cuasync::trace::detail
