#!/usr/bin/python3
"""Renders the committed test trace's HTML timeline with headless Chromium and checks the screenshot: not blank,
spans drawn in their categories' colours, and one lane per stream, copy direction and host thread, counted by the
lane markers' colours (trace/include/cuasync/trace/html.hpp). Python's standard library only (the PNG is read with
zlib). Exits 77 (CTest: skipped) when no Chromium is installed; scripts/test.sh installs Debian's `chromium`.

usage: check_screenshot.py CUASYNC TRACE_JSON OUT_DIR STREAMS COPY_LANES HOST_LANES
The page and the screenshot are left in OUT_DIR (copied there, never deleted: CTest no_link_time_cuda reads the build
tree meanwhile); Chromium's profile and scratch files go to a temporary folder.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

tool, trace_json, out_dir = sys.argv[1:4]
expected = {"stream": int(sys.argv[4]), "copy": int(sys.argv[5]), "host": int(sys.argv[6])}
MARKERS = {"stream": (0x00, 0x5A, 0xC8), "copy": (0xC8, 0x5A, 0x00), "host": (0x6B, 0x2F, 0xA0)}
SPAN_COLOURS = {"launch": (0x4E, 0x79, 0xA7), "copy": (0xF2, 0x8E, 0x2B), "pipeline_stage": (0x59, 0xA1, 0x4F)}


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour_type}, interlace {interlace}")
    channels = 3 if colour_type == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(a, b, tolerance=3):
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))


def runs(column, colour):
    """How many separate vertical runs of `colour` a column of pixels has."""
    count, inside = 0, False
    for pixel in column:
        hit = near(pixel, colour)
        count += hit and not inside
        inside = hit
    return count


browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
if not browser:
    print("check_screenshot: skipped: no Chromium installed (Debian: apt-get install chromium; scripts/test.sh does)")
    sys.exit(77)

work = tempfile.mkdtemp(prefix="cuasync_screenshot_")
page, png = os.path.join(work, "timeline.html"), os.path.join(work, "timeline.png")
subprocess.run([tool, "trace", trace_json, "-o", page], check=True, stdout=subprocess.DEVNULL, timeout=60)
command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={os.path.join(work, 'profile')}",
           f"--screenshot={png}", "--window-size=1400,900", "file://" + os.path.abspath(page)]
result = subprocess.run(command, capture_output=True, text=True, timeout=180, env=dict(os.environ, HOME=work))
if not os.path.exists(png):
    print(f"check_screenshot: Chromium wrote no screenshot (exit {result.returncode}):\n{result.stderr[-3000:]}")
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

# The lane markers stand in one column at the left: the column with most marker pixels.
columns = [[rows[y][x] for y in range(height)] for x in range(min(width, 80))]
best = max(columns, key=lambda c: sum(any(near(p, m) for m in MARKERS.values()) for p in c))
for kind, colour in MARKERS.items():
    found = runs(best, colour)
    print(f"check_screenshot: {found} {kind} lanes (expected {expected[kind]})")
    if found != expected[kind]:
        failures.append(f"{found} {kind} lanes in the screenshot, expected {expected[kind]}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
