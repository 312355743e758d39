#!/usr/bin/env python3
"""Writes a folder of JPEG "photos" made from real Fashion-MNIST images, for
the end-to-end tests of the photo datasets (flowers, image folders).

Each picture is one Fashion-MNIST image (from the Debian package
dataset-fashion-mnist), upscaled to a varying size between 60 and 120 pixels
a side, tinted with its class's colour and encoded by libjpeg-turbo's cjpeg
(quality 90, 4:2:0). Classes are Fashion-MNIST classes renamed as the
folder names given. Standard library only (plus cjpeg).

  make_photo_folder.py OUT_DIR PER_CLASS CLASS [CLASS...]
"""
import gzip
import os
import struct
import subprocess
import sys

IDX = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
LABELS = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"
TINTS = [(255, 220, 120), (140, 200, 255), (255, 120, 140), (150, 255, 150),
         (220, 160, 255), (255, 180, 90), (120, 240, 230), (250, 250, 250)]


def main():
    out, per_class, classes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with gzip.open(IDX) as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        pixels = f.read()
    with gzip.open(LABELS) as f:
        labels = f.read()[8:]
    by_class = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    for c, name in enumerate(classes):
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        tint = TINTS[c % len(TINTS)]
        for k in range(per_class):
            i = by_class[c][k]
            img = pixels[i * rows * cols:(i + 1) * rows * cols]
            h, w = 60 + (k * 7) % 61, 60 + (k * 13) % 61
            ppm = bytearray(b"P6 %d %d 255\n" % (w, h))
            for y in range(h):
                row = img[(y * rows // h) * cols:(y * rows // h + 1) * cols]
                for x in range(w):
                    v = row[x * cols // w]
                    ppm += bytes((v * t // 255 for t in tint))
            jpeg = subprocess.run(["cjpeg", "-quality", "90"], input=bytes(ppm),
                                  stdout=subprocess.PIPE, check=True).stdout
            with open(os.path.join(folder, "%s_%04d.jpg" % (name, k)), "wb") as f:
                f.write(jpeg)


if __name__ == "__main__":
    main()
