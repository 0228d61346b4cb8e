# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the timeline's screenshot tests share: finding Chromium, rendering a page (with a URL fragment, the viewer's
view) to a PNG, and reading the PNG's pixels with Python's standard library only (zlib). Run as a script, it takes
one screenshot (a demo's timeline.html, say):
    python3 tests/trace/screenshot.py PAGE.html OUT.png [zoom=F@T]

The page's geometry, as trace/src/html_page.cpp and html_viewer.cpp lay it out in a 1400-pixel window: the body's
left margin is 20 pixels, the canvas spans the body's width, the plot starts 220 pixels into the canvas and ends 20
before its right edge.
"""
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

WINDOW = (1400, 900)
PLOT_LEFT = 20 + 220
PLOT_RIGHT = WINDOW[0] - 20 - 20
MARKERS = {"stream": (0x00, 0x5A, 0xC8), "copy": (0xC8, 0x5A, 0x00), "host": (0x6B, 0x2F, 0xA0)}
LANE_BACKGROUNDS = ((0xF6, 0xF7, 0xF9), (0xEC, 0xEE, 0xF2))
GRID = (0xD0, 0xD4, 0xDA)
LANE_HEIGHT = 24


def browser():
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def screenshot(chromium, page, png, fragment="", work=None, height=WINDOW[1]):
    """Renders file://PAGE#FRAGMENT to PNG; returns (ok, Chromium's stderr)."""
    own = work is None
    work = work or tempfile.mkdtemp(prefix="cuasync_screenshot_")
    url = "file://" + os.path.abspath(page) + (("#" + fragment) if fragment else "")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
               "--hide-scrollbars", "--force-device-scale-factor=1",
               f"--user-data-dir={os.path.join(work, 'profile')}", f"--screenshot={os.path.abspath(png)}",
               f"--window-size={WINDOW[0]},{height}", url]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=180, env=dict(os.environ, HOME=work))
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return os.path.exists(png), result.stderr


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
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + (left + previous[i]) // 2) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                up = previous[i]
                up_left = previous[i - channels] if i >= channels else 0
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(a, b, tolerance=3):
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))


def runs(column, colour, tolerance=3):
    """The [start, end) index ranges of `colour` in a sequence of pixels."""
    out, start = [], None
    for i, pixel in enumerate(list(column) + [None]):
        hit = pixel is not None and near(pixel, colour, tolerance)
        if hit and start is None:
            start = i
        elif not hit and start is not None:
            out.append((start, i))
            start = None
    return out


def lane_rows(rows, kind):
    """The [top, bottom) pixel rows of each lane of `kind`, found by the lane markers at the left (the column, among
    the first 80, with most marker pixels)."""
    width = len(rows[0])
    columns = [[rows[y][x] for y in range(len(rows))] for x in range(min(width, 80))]
    best = max(columns, key=lambda c: sum(any(near(p, m) for m in MARKERS.values()) for p in c))
    return runs(best, MARKERS[kind])


if __name__ == "__main__":
    import sys
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: screenshot.py PAGE.html OUT.png [FRAGMENT, e.g. zoom=10@250]")
    chromium = browser()
    if not chromium:
        sys.exit("screenshot.py: no Chromium installed (Debian: apt-get install chromium)")
    ok, stderr = screenshot(chromium, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "")
    if not ok:
        sys.exit(f"screenshot.py: Chromium wrote no screenshot:\n{stderr[-3000:]}")
    print(sys.argv[2])
