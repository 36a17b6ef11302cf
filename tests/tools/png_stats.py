#!/usr/bin/env python3
"""Says whether a PNG screenshot is blank: reads the image with the standard library alone
(zlib; 8-bit greyscale, RGB or RGBA, not interlaced, as Chromium writes them), takes the
most common colour as the background and counts the pixels that differ from it and the
distinct colours.

    png_stats.py FILE [--min-ink FRACTION] [--min-colours N]

Prints "ink=<fraction of non-background pixels> colours=<distinct colours> WxH" and exits
0 when the image is not blank (ink >= --min-ink, default 0.01, and colours >= --min-colours,
default 8), 1 when it is blank, 2 when the file is not a PNG this script reads."""
import struct
import sys
import zlib
from collections import Counter


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    if head is None:
        raise ValueError("no IHDR chunk")
    w, h, depth, ctype, _, _, interlace = head
    channels = {0: 1, 2: 3, 6: 4}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {ctype}, interlace {interlace}")
    raw = zlib.decompress(idat)
    stride = w * channels
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                raise ValueError(f"bad filter {f} in row {y}")
        rows.append(bytes(line))
        prev = line
    return w, h, channels, rows


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    path, min_ink, min_colours = args[0], 0.01, 8
    if "--min-ink" in args:
        min_ink = float(args[args.index("--min-ink") + 1])
    if "--min-colours" in args:
        min_colours = int(args[args.index("--min-colours") + 1])
    try:
        w, h, ch, rows = read_png(path)
    except (OSError, ValueError, zlib.error) as e:
        print(f"{path}: {e}")
        return 2
    counts = Counter()
    for line in rows:
        for x in range(0, len(line), ch):
            counts[line[x:x + 3] if ch >= 3 else line[x:x + 1]] += 1
    total = w * h
    ink = 1 - counts.most_common(1)[0][1] / total if total else 0.0
    print(f"ink={ink:.4f} colours={len(counts)} {w}x{h}")
    return 0 if ink >= min_ink and len(counts) >= min_colours else 1


if __name__ == "__main__":
    sys.exit(main())
