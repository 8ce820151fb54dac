"""Draws the icon of the VS Code extension (128x128) and of the Claude Desktop bundle (512x512).

A notebook on a dark tile: three cells, the middle one running (orange), each with the execution
bar Jupyter draws at a cell's left. Plain Python (zlib, struct), no imaging library; 4x4
supersampling for smooth edges. The shapes are laid out on a 128-unit grid and scaled.

    python3 packaging/icon/draw_icon.py extension/icon.png 128
    python3 packaging/icon/draw_icon.py packaging/mcpb/icon.png 512
"""

import struct
import sys
import zlib

GRID = 128
SAMPLES = 4

TILE = (0x1E, 0x2A, 0x38)
CELL = (0xE8, 0xEE, 0xF4)
CODE = (0x9F, 0xB0, 0xC2)
ORANGE = (0xF3, 0x77, 0x26)
DONE = (0x4C, 0xAF, 0x7D)


def rounded_rect(x0, y0, x1, y1, radius):
    def inside(x, y):
        if not (x0 <= x <= x1 and y0 <= y <= y1):
            return False
        cx = min(max(x, x0 + radius), x1 - radius)
        cy = min(max(y, y0 + radius), y1 - radius)
        return (x - cx) ** 2 + (y - cy) ** 2 <= radius**2

    return inside


# Layers, bottom to top: (shape, colour).
layers = [(rounded_rect(2, 2, 126, 126, 26), TILE)]
for index, top in enumerate((24, 54, 84)):
    bar = ORANGE if index == 1 else DONE
    layers.append((rounded_rect(20, top, 27, top + 22, 3.5), bar))
    outline = ORANGE if index == 1 else CELL
    layers.append((rounded_rect(34, top, 108, top + 22, 5), outline))
    if index == 1:
        layers.append((rounded_rect(37, top + 3, 105, top + 19, 3), CELL))
    layers.append((rounded_rect(42, top + 6, 86 - 12 * index, top + 9.5, 1.75), CODE))
    layers.append((rounded_rect(42, top + 13, 98 - 8 * index, top + 16.5, 1.75), CODE))


def pixel(px, py, scale):
    red = green = blue = alpha = 0.0
    for sy in range(SAMPLES):
        for sx in range(SAMPLES):
            x = (px + (sx + 0.5) / SAMPLES) / scale
            y = (py + (sy + 0.5) / SAMPLES) / scale
            colour = None
            for inside, fill in layers:
                if inside(x, y):
                    colour = fill
            if colour is not None:
                red += colour[0]
                green += colour[1]
                blue += colour[2]
                alpha += 1
    if alpha == 0:
        return (0, 0, 0, 0)
    # Straight (not premultiplied) alpha, as PNG wants.
    return (
        round(red / alpha),
        round(green / alpha),
        round(blue / alpha),
        round(255 * alpha / SAMPLES**2),
    )


def png(width, height, rows):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes(value for rgba in row for value in rgba) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


if __name__ == "__main__":
    size = int(sys.argv[2])
    rows = [[pixel(x, y, size / GRID) for x in range(size)] for y in range(size)]
    with open(sys.argv[1], "wb") as out:
        out.write(png(size, size, rows))
