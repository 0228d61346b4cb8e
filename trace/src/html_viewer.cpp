// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The page's viewer: the script that draws the timeline's data (html_timeline.cpp) on a canvas, and its CSS (its
// input handling, the script's second half, is html_viewer_input.cpp).
//
// A canvas, not SVG or DOM elements: 10^5 and more elements make a page that takes seconds to lay out and scroll.
// Each frame walks only the spans in view (binary search on the begins of each lane). Spans at least two pixels
// wide are drawn as rectangles (their names inside when they fit); narrower ones are summed per pixel column (the
// fraction of the column they cover) and each column is drawn once, shaded by that fraction in the colour of the
// category that covers most of it: a lane shows where it is busy and idle at any zoom instead of aliasing into a
// stripe. The view (zoom and centre) lives in the URL's hash, so a link or a headless screenshot can ask for one.
#include "html_parts.hpp"

namespace cuasync::trace::detail {

const std::string_view viewer_style = R"(
.tl-bar { margin: 4px 0 6px 0; color: #555; }
.tl-bar button { font: 13px sans-serif; min-width: 28px; margin-right: 4px; }
.tl-hint { font-size: 12px; color: #777; }
#tl { position: relative; }
#tl canvas { display: block; width: 100%; height: 60px; touch-action: none; cursor: grab; outline: none; }
#tl-tip { position: absolute; display: none; pointer-events: none; background: #fffff4; border: 1px solid #999;
  padding: 4px 6px; font: 12px sans-serif; white-space: pre-line; max-width: 560px; z-index: 2;
  box-shadow: 0 1px 4px rgba(0, 0, 0, 0.2); }
)";

const std::string_view viewer_script = R"js(
(function () {
'use strict';
const D = JSON.parse(document.getElementById('tl-data').textContent);
const canvas = document.getElementById('tl-canvas'), box = document.getElementById('tl');
const tip = document.getElementById('tl-tip'), viewText = document.getElementById('tl-view');
const ctx = canvas.getContext('2d');
const LABEL_W = 220, RIGHT = 20, AXIS_H = 30, HEADER_H = 24, LANE_H = 24, GAP = 4, MARKER_W = 10, MAX_DEPTH = 3;
const WIDE = 2;      // spans at least this many pixels wide are drawn one by one
const FLAG_H = 5;    // a finding's marker: a bar along the top of its lane
const S = D.strings, CATS = D.categories, NC = CATS.length;
const RGB = CATS.map(c => [1, 3, 5].map(k => parseInt(c.colour.slice(k, k + 2), 16)));
const TEXT_ON = RGB.map(([r, g, b]) => 0.299 * r + 0.587 * g + 0.114 * b > 150 ? '#222' : '#fff');

// Lanes: begins and ends in ns from the first span, nesting depth, the longest span (how far back a search looks).
let rowY = AXIS_H;
const lanes = D.lanes.map((L, i) => {
  const n = L.b.length, b = new Float64Array(n), e = new Float64Array(n), depth = new Uint8Array(n), open = [];
  let at = 0, longest = 0;
  for (let k = 0; k < n; ++k) {
    at += L.b[k];
    b[k] = at;
    e[k] = at + L.d[k];
    if (L.d[k] > longest) longest = L.d[k];
    while (open.length && open[open.length - 1] <= b[k]) open.pop();
    depth[k] = Math.min(open.length, MAX_DEPTH);
    open.push(e[k]);
  }
  const lane = { name: L.name, kind: L.kind, group: null, groupY: 0, b, e, depth, longest, n,
                 names: L.n, labels: L.l, cats: L.c, bytes: L.y };
  if (i === 0 || D.lanes[i - 1].group !== L.group) {
    lane.group = L.group;
    lane.groupY = rowY;
    rowY += HEADER_H;
  }
  lane.y = rowY;
  rowY += LANE_H + GAP;
  return lane;
});
const HEIGHT = rowY + 6;
const WINDOW = Math.max(D.window, 1), MIN_VIEW = Math.min(WINDOW, 20);
let v0 = 0, v1 = WINDOW;

function spanTop(d) { return 3 + d * 4; }
function spanHeight(d) { return Math.max(LANE_H - 6 - d * 8, 4); }
function plotWidth() { return Math.max(canvas.clientWidth - LABEL_W - RIGHT, 10); }
function scaleNow() { return plotWidth() / (v1 - v0); }
function timeAt(px) { return v0 + Math.min(Math.max(px - LABEL_W, 0), plotWidth()) / scaleNow(); }
function lowerBound(a, x) {
  let lo = 0, hi = a.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; }
  return lo;
}
function duration(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
  if (a >= 1e3) return (ns / 1e3).toFixed(3) + ' \u00b5s';
  return Math.round(ns) + ' ns';
}

// The view: clamped to the trace, at most MIN_VIEW ns across the plot.
function clampView() {
  const w = Math.min(Math.max(v1 - v0, MIN_VIEW), WINDOW);
  v0 = Math.min(Math.max(v0, 0), WINDOW - w);
  v1 = v0 + w;
}
function zoomAt(t, factor) {
  const w = (v1 - v0) / factor, f = (t - v0) / (v1 - v0);
  v0 = t - f * w;
  v1 = v0 + w;
  clampView();
  changed();
}
function pan(dt) { v0 += dt; v1 += dt; clampView(); changed(); }
function show(b, e) { v0 = b; v1 = e; clampView(); changed(); }

// #zoom=F (F times the whole trace, centred) or #zoom=F@T (centred at T ms from the start of recording).
function readHash() {
  const m = /zoom=([0-9.eE+]+)(?:@(-?[0-9.eE+]+))?/.exec(location.hash);
  if (!m) return false;
  const w = WINDOW / Math.max(parseFloat(m[1]) || 1, 1);
  const c = m[2] !== undefined ? parseFloat(m[2]) * 1e6 - D.shift : WINDOW / 2;
  v0 = c - w / 2;
  v1 = v0 + w;
  clampView();
  return true;
}
let hashTimer = 0;
function writeHash() {
  const f = WINDOW / (v1 - v0), c = ((v0 + v1) / 2 + D.shift) / 1e6;
  const hash = f < 1.000001 ? '' : '#zoom=' + +f.toPrecision(6) + '@' + +c.toPrecision(9);
  try {
    if (hash !== location.hash) history.replaceState(null, '', hash || location.pathname + location.search);
  } catch (e) { /* a page opened where history is refused keeps its URL */ }
}
let framePending = false;
function changed() {
  if (!framePending) { framePending = true; requestAnimationFrame(draw); }
  clearTimeout(hashTimer);
  hashTimer = setTimeout(writeHash, 250);
}

// Text cut with an ellipsis to fit `width` (nothing when not even one character does).
function fillFit(text, x, y, width) {
  if (width <= 4) return;
  if (ctx.measureText(text).width <= width) { ctx.fillText(text, x, y); return; }
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const m = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, m) + '\u2026').width <= width) lo = m; else hi = m - 1;
  }
  if (lo > 0) ctx.fillText(text.slice(0, lo) + '\u2026', x, y);
}

function tickStep(w) {
  const raw = w / 10, p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
  for (const m of [1, 2, 5]) if (p * m >= raw) return p * m;
  return p * 10;
}
// In the unit of the view's largest time ("2.5 ms", not "2500 \u00b5s"), with the decimals the step needs.
function tickLabel(ns, step, largest) {
  const [unit, scale] = largest >= 1e9 ? ['s', 1e9] : largest >= 1e6 ? ['ms', 1e6] : largest >= 1e3 ? ['\u00b5s', 1e3]
                                                                                           : ['ns', 1];
  const decimals = Math.min(Math.max(0, -Math.floor(Math.log10(step / scale) + 1e-9)), 6);
  return (ns / scale).toFixed(decimals) + ' ' + unit;
}

// Per depth, per pixel column: the fraction covered by narrow spans, and by each category.
let busy = [], byCat = [];
function columns(cols) {
  if (busy.length && busy[0].length >= cols) return;
  busy = []; byCat = [];
  for (let d = 0; d <= MAX_DEPTH; ++d) { busy.push(new Float32Array(cols)); byCat.push(new Float32Array(cols * NC)); }
}

function drawLane(L, left, pw, scale) {
  const cols = Math.ceil(pw), used = [false, false, false, false], wide = [];
  const { b, e, depth, cats } = L;
  for (let i = lowerBound(b, v0 - L.longest); i < L.n && b[i] <= v1; ++i) {
    if (e[i] < v0) continue;
    const x0 = (b[i] - v0) * scale, x1 = (e[i] - v0) * scale;
    if (x1 - x0 >= WIDE) { wide.push(i); continue; }
    const d = depth[i], B = busy[d], C = byCat[d], c = cats[i];
    if (!used[d]) { used[d] = true; B.fill(0, 0, cols); C.fill(0, 0, cols * NC); }
    const c0 = Math.max(0, Math.floor(x0)), c1 = Math.min(cols - 1, Math.floor(x1));
    for (let col = c0; col <= c1; ++col) {
      // The part of the column it covers; an instant counts a little, so that its column is drawn (lightly).
      const cover = Math.max(Math.min(x1, col + 1) - Math.max(x0, col), 1e-6);
      B[col] += cover;
      C[col * NC + c] += cover;
    }
  }
  for (let d = 0; d <= MAX_DEPTH; ++d) {
    if (!used[d]) continue;
    const B = busy[d], C = byCat[d], top = L.y + spanTop(d), h = spanHeight(d);
    for (let col = 0; col < cols; ++col) {
      if (B[col] <= 0) continue;
      let best = 0;
      for (let c = 1; c < NC; ++c) if (C[col * NC + c] > C[col * NC + best]) best = c;
      const [r, g, bl] = RGB[best];
      ctx.fillStyle = 'rgba(' + r + ',' + g + ',' + bl + ',' + Math.min(1, Math.max(B[col], 0.15)).toFixed(3) + ')';
      ctx.fillRect(left + col, top, 1, h);
    }
  }
  ctx.font = '11px sans-serif';
  for (const i of wide) {
    const d = depth[i], c = cats[i], top = L.y + spanTop(d), h = spanHeight(d);
    const x0 = Math.max(left + (b[i] - v0) * scale, left - 2), x1 = Math.min(left + (e[i] - v0) * scale, left + pw + 2);
    ctx.fillStyle = CATS[c].colour;
    ctx.fillRect(x0, top, x1 - x0, h);
    if (x1 - x0 >= 6) {  // a light edge tells back-to-back spans apart
      ctx.fillStyle = 'rgba(255,255,255,0.55)';
      ctx.fillRect(x0, top, 1, h);
    }
    if (x1 - x0 >= 20 && h >= 10) {
      ctx.fillStyle = TEXT_ON[c];
      const x = Math.max(x0, left) + 3;
      fillFit(S[L.names[i]] || CATS[c].name, x, top + h / 2 + 4, Math.min(x1, left + pw) - x - 3);
    }
  }
}

function drawFindings(left, pw, scale) {
  ctx.font = 'bold 10px sans-serif';
  const taken = new Map(), numbers = [];  // per lane, its numbers' boxes: side by side at one place, not on top
  D.findings.forEach((f, k) => {
    const p = f.places, labelled = new Set();
    for (let j = 0; j + 2 < p.length; j += 3) {
      const L = lanes[p[j]];
      if (!L || p[j + 2] < v0 || p[j + 1] > v1) continue;
      let x0 = left + (p[j + 1] - v0) * scale, x1 = left + (p[j + 2] - v0) * scale;
      if (x1 - x0 < 3) { const m = (x0 + x1) / 2; x0 = m - 1.5; x1 = m + 1.5; }
      x0 = Math.max(x0, left - 3);
      x1 = Math.min(x1, left + pw + 3);
      ctx.fillStyle = D.finding_colour;
      ctx.fillRect(x0, L.y, x1 - x0, FLAG_H);
      if (!labelled.has(L)) {  // the finding's number at its first place in view on each lane, left of it
        labelled.add(L);
        const text = String(k + 1), w = ctx.measureText(text).width + 4;
        if (!taken.has(L)) taken.set(L, []);
        const boxes = taken.get(L), free = x => boxes.every(([a, b]) => x + w <= a || x >= b);
        let x = x0 - w;
        while (x >= left && !free(x)) x -= 1;
        if (x < left) for (x = Math.max(x0, left); !free(x);) x += 1;  // no room at the left: over its start
        boxes.push([x, x + w]);
        numbers.push([text, x, w, L.y]);
      }
    }
  });
  for (const [text, x, w, y] of numbers) {  // over every finding's bars
    ctx.fillStyle = D.finding_colour;
    ctx.fillRect(x, y, w, 11);
    ctx.fillStyle = '#fff';
    ctx.fillText(text, x + 2, y + 9);
  }
}

function draw() {
  framePending = false;
  const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth;
  canvas.style.height = HEIGHT + 'px';
  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(HEIGHT * dpr)) {
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(HEIGHT * dpr);
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, HEIGHT);
  const left = LABEL_W, pw = plotWidth(), scale = pw / (v1 - v0);
  columns(Math.ceil(pw) + 1);
  lanes.forEach((L, i) => {
    if (L.group) {
      ctx.fillStyle = '#222';
      ctx.font = 'bold 12px sans-serif';
      ctx.fillText(L.group, MARKER_W + 6, L.groupY + 17);
    }
    ctx.fillStyle = i % 2 ? '#eceef2' : '#f6f7f9';
    ctx.fillRect(0, L.y, W, LANE_H);
    ctx.fillStyle = D.markers[L.kind];
    ctx.fillRect(0, L.y, MARKER_W, LANE_H);
    ctx.fillStyle = '#222';
    ctx.font = '12px sans-serif';
    fillFit(L.name, MARKER_W + 6, L.y + 16, LABEL_W - MARKER_W - 12);
  });
  // The axis: times from the start of recording, with faint grid lines under the spans.
  const step = tickStep(v1 - v0);
  ctx.font = '11px sans-serif';
  ctx.textAlign = 'center';
  for (let at = Math.ceil((v0 + D.shift) / step) * step; at <= v1 + D.shift; at += step) {
    const x = Math.round(left + (at - D.shift - v0) * scale) + 0.5;
    ctx.fillStyle = '#d0d4da';
    ctx.fillRect(x - 0.5, AXIS_H - 6, 1, HEIGHT - AXIS_H);
    ctx.fillStyle = '#555';
    ctx.fillText(tickLabel(at, step, Math.max(Math.abs(v0 + D.shift), Math.abs(v1 + D.shift))), x, AXIS_H - 10);
  }
  ctx.textAlign = 'left';
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, 0, pw, HEIGHT);
  ctx.clip();
  for (const L of lanes) drawLane(L, left, pw, scale);
  drawFindings(left, pw, scale);
  ctx.restore();
  viewText.textContent = 'showing ' + duration(v0 + D.shift) + ' to ' + duration(v1 + D.shift) +
                         (v1 - v0 < WINDOW ? ' (zoom \u00d7' + +(WINDOW / (v1 - v0)).toPrecision(3) + ')' : ' (all of it)');
}

)js";

}  // namespace cuasync::trace::detail
