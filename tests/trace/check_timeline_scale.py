#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The timeline at 100,000 spans: writes the scaled synthetic pipeline (make_pipeline_trace: 50 bursts of 250
batches, 8 spans each, a burst every 400 ms), renders its page with `cuasync trace`, takes two headless-Chromium
screenshots and checks their pixels:
- at the default zoom (all of it) each stream lane is not a solid stripe: the fraction of its pixel columns drawn
  busy matches the fraction the trace's spans cover (computed here from the JSON), with an idle gap between bursts;
- zoomed in (the page's `#zoom=F@T` hash) the same lanes show individual kernels, as wide as the data says, with
  their names inside, which the default zoom does not.
Python's standard library only (screenshot.py). Exits 77 (CTest: skipped) when no Chromium is installed.

usage: check_timeline_scale.py MAKE_PIPELINE_TRACE CUASYNC OUT_DIR
The trace, the page and both screenshots are left in OUT_DIR.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from screenshot import (GRID, LANE_BACKGROUNDS, PLOT_LEFT, PLOT_RIGHT, browser, lane_rows, near, read_png,  # noqa: E402
                        runs, screenshot)

make_trace, tool, out_dir = sys.argv[1:4]
BURSTS, BATCHES = 50, 250
LAUNCH = (0x4E, 0x79, 0xA7)
ZOOM, ZOOM_AT_MS = 1000, 100.0  # 1/1000 of the trace (about 20 ms) around 100 ms: inside the first burst

chromium = browser()
if not chromium:
    print("check_timeline_scale: skipped: no Chromium installed (Debian: apt-get install chromium)")
    sys.exit(77)
os.makedirs(out_dir, exist_ok=True)
trace, page = os.path.join(out_dir, "trace_100k.json"), os.path.join(out_dir, "timeline_100k.html")
pngs = {"all": os.path.join(out_dir, "timeline_100k.png"), "zoom": os.path.join(out_dir, "timeline_100k_zoom.png")}
started = time.monotonic()
subprocess.run([make_trace, trace, str(BURSTS), str(BATCHES)], check=True, timeout=120)
subprocess.run([tool, "trace", trace, "-o", page], check=True, stdout=subprocess.DEVNULL, timeout=120)
with open(trace) as f:
    events = json.load(f)["traceEvents"]
slices = [e for e in events if e["ph"] == "X"]
print(f"check_timeline_scale: {len(slices)} spans, page {os.path.getsize(page)} bytes "
      f"({os.path.getsize(page) / len(slices):.1f} per span), written in {time.monotonic() - started:.1f} s")
failures = []
if len(slices) != BURSTS * BATCHES * 8:
    failures.append(f"{len(slices)} spans in the trace, expected {BURSTS * BATCHES * 8}")

# What the data says: per stream lane, which of the plot's pixel columns any span touches (the default view shows
# the first begin to the last end over PLOT_LEFT..PLOT_RIGHT), and the kernels' width when zoomed.
begin = min(e["ts"] for e in slices)
end = max(e["ts"] + e["dur"] for e in slices)
columns = PLOT_RIGHT - PLOT_LEFT
lane_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
expected = {}
for e in slices:
    name = lane_names[(e["pid"], e["tid"])]
    if not name.startswith("stream"):
        continue
    busy = expected.setdefault(name, [False] * columns)
    first = int((e["ts"] - begin) / (end - begin) * columns)
    last = int((e["ts"] + e["dur"] - begin) / (end - begin) * columns)
    for c in range(max(first, 0), min(last, columns - 1) + 1):
        busy[c] = True
kernel_us = next(e["dur"] for e in slices if e["cat"] == "launch" and lane_names[(e["pid"], e["tid"])].startswith("s"))
zoom_px_per_us = columns * ZOOM / (end - begin)

work = tempfile.mkdtemp(prefix="cuasync_screenshot_")
try:
    for view, fragment in (("all", ""), ("zoom", f"zoom={ZOOM}@{ZOOM_AT_MS}")):
        # Only the lanes are looked at: a shorter window decodes faster.
        ok, stderr = screenshot(chromium, page, pngs[view], fragment, work=os.path.join(work, view), height=440)
        if not ok:
            print(f"check_timeline_scale: Chromium wrote no screenshot of {view}:\n{stderr[-3000:]}")
            sys.exit(1)
finally:
    shutil.rmtree(work, ignore_errors=True)
print(f"check_timeline_scale: screenshots {pngs['all']} and {pngs['zoom']} after {time.monotonic() - started:.1f} s")


def idle(pixel):
    return any(near(pixel, b, 4) for b in LANE_BACKGROUNDS) or near(pixel, GRID, 4)


_, _, rows = read_png(pngs["all"])
streams = lane_rows(rows, "stream")
if len(streams) != len(expected):
    failures.append(f"{len(streams)} stream lanes in the screenshot, expected {len(expected)}")
for (top, bottom), name in zip(streams, sorted(expected)):
    line = rows[(top + bottom) // 2][PLOT_LEFT:PLOT_RIGHT]
    drawn = [not idle(p) for p in line]
    want = sum(expected[name]) / columns
    got = sum(drawn) / columns
    gaps = len(runs([(0, 0, 0) if d else (1, 1, 1) for d in drawn], (1, 1, 1), 0))
    solid = sum(1 for p in line if near(p, LAUNCH, 3))
    print(f"check_timeline_scale: {name}: {100 * got:.1f}% of columns drawn busy, the data says "
          f"{100 * want:.1f}%; {gaps} idle gaps; {solid} columns in the full launch colour")
    if abs(got - want) > 0.03:
        failures.append(f"{name}: {100 * got:.1f}% of columns busy at the default zoom, the data says {100 * want:.1f}%")
    if gaps < BURSTS - 2:
        failures.append(f"{name}: {gaps} idle gaps at the default zoom, expected about {BURSTS} (one between bursts)")
    if solid > columns // 10:
        failures.append(f"{name}: {solid} columns drawn solid at the default zoom: a stream busy half the time in a "
                        "burst should be shaded")

_, _, rows = read_png(pngs["zoom"])
for (top, bottom), name in zip(lane_rows(rows, "stream"), sorted(expected)):
    line = rows[bottom - 5][PLOT_LEFT:PLOT_RIGHT]  # below the names drawn inside the spans
    kernels = [(a, b) for a, b in runs(line, LAUNCH, 3) if b - a >= 10]
    width = kernel_us * zoom_px_per_us
    right = [(a, b) for a, b in kernels if abs((b - a) - width) <= 0.1 * width + 3]
    text = sum(1 for y in range(top + 4, bottom - 3) for a, b in right for x in range(PLOT_LEFT + a, PLOT_LEFT + b)
               if min(rows[y][x]) > 190)  # text's pixels, antialiased: far lighter than the fill's
    print(f"check_timeline_scale: zoomed, {name}: {len(kernels)} kernels drawn, {len(right)} of them "
          f"{width:.0f} pixels wide as the data says; {text} text pixels inside them")
    if len(right) < 4:
        failures.append(f"{name}: zoomed in, {len(right)} kernels of about {width:.0f} pixels drawn, expected >= 4")
    if text < 50 * len(right):
        failures.append(f"{name}: zoomed in, the kernels' names are not drawn inside them")

print(f"check_timeline_scale: done in {time.monotonic() - started:.1f} s")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
