#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Renders the committed test trace's HTML timeline with headless Chromium and checks the screenshot: not blank,
spans drawn in their categories' colours with their names inside (white or dark text pixels within a span), and
one lane per stream, copy direction and host thread, counted by the lane markers' colours
(trace/include/cuasync/trace/html.hpp). Python's standard library only (screenshot.py). Exits 77 (CTest: skipped)
when no Chromium is installed; scripts/test.sh installs Debian's `chromium`.

usage: check_screenshot.py CUASYNC TRACE_JSON OUT_DIR STREAMS COPY_LANES HOST_LANES
The page and the screenshot are left in OUT_DIR (copied there, never deleted: CTest no_link_time_cuda reads the build
tree meanwhile); Chromium's profile and scratch files go to a temporary folder.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from screenshot import browser, lane_rows, near, read_png, runs, screenshot  # noqa: E402

tool, trace_json, out_dir = sys.argv[1:4]
expected = {"stream": int(sys.argv[4]), "copy": int(sys.argv[5]), "host": int(sys.argv[6])}
SPAN_COLOURS = {"launch": (0x4E, 0x79, 0xA7), "copy": (0xF2, 0x8E, 0x2B), "pipeline_stage": (0x59, 0xA1, 0x4F)}

chromium = browser()
if not chromium:
    print("check_screenshot: skipped: no Chromium installed (Debian: apt-get install chromium; scripts/test.sh does)")
    sys.exit(77)

work = tempfile.mkdtemp(prefix="cuasync_screenshot_")
page, png = os.path.join(work, "timeline.html"), os.path.join(work, "timeline.png")
subprocess.run([tool, "trace", trace_json, "-o", page], check=True, stdout=subprocess.DEVNULL, timeout=60)
ok, stderr = screenshot(chromium, page, png, work=work)
if not ok:
    print(f"check_screenshot: Chromium wrote no screenshot:\n{stderr[-3000:]}")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1)

os.makedirs(out_dir, exist_ok=True)
for f in (page, png):
    shutil.copyfile(f, os.path.join(out_dir, os.path.basename(f)))
width, height, rows = read_png(png)
shutil.rmtree(work, ignore_errors=True)
png = os.path.join(out_dir, "timeline.png")
failures = []
colours = {pixel for row in rows for pixel in row}
background = sum(1 for row in rows for pixel in row if near(pixel, (255, 255, 255)))
print(f"check_screenshot: {png}: {width}x{height}, {len(colours)} colours, "
      f"{100 - 100 * background / (width * height):.1f}% not white")
if len(colours) < 20 or background > 0.97 * width * height:
    failures.append("the screenshot is (nearly) blank")
for name, colour in SPAN_COLOURS.items():
    if not any(near(pixel, colour) for row in rows for pixel in row):
        failures.append(f"no {name} span drawn (colour {colour})")

for kind in ("stream", "copy", "host"):
    found = len(lane_rows(rows, kind))
    print(f"check_screenshot: {found} {kind} lanes (expected {expected[kind]})")
    if found != expected[kind]:
        failures.append(f"{found} {kind} lanes in the screenshot, expected {expected[kind]}")

# Names inside the kernels: each stream lane's kernels (1.5 ms of 8.8 over ~1100 pixels) are wide enough for
# "scale_add", drawn in white on the launch colour.
for top, bottom in lane_rows(rows, "stream"):
    below_names = rows[bottom - 5]
    spans = [r for r in runs(below_names, SPAN_COLOURS["launch"]) if r[1] - r[0] >= 3]
    text = sum(1 for y in range(top + 4, bottom - 3) for a, b in spans for x in range(a, b)
               if min(rows[y][x]) > 190)  # text's pixels, antialiased: far lighter than the fill's
    print(f"check_screenshot: stream lane at y {top}: {text} text pixels inside its kernels")
    if not spans or text < 50 * len(spans):
        failures.append(f"no names drawn inside the kernels of the stream lane at y {top}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
