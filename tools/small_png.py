"""Copies a PNG as a small one for the repository: 256 colours (Pillow's quantiser), optionally
scaled to a width. Used by scripts/readme-image.sh and scripts/tutorial-images.sh.

    python3 tools/small_png.py IN.png OUT.png [WIDTH]
"""
import sys

from PIL import Image


def main(src, dst, width=None):
    im = Image.open(src).convert("RGB")
    if width and im.width > int(width):
        w = int(width)
        im = im.resize((w, round(im.height * w / im.width)), Image.LANCZOS)
    im.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(dst, optimize=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
