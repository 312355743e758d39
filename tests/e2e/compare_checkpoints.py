#!/usr/bin/env python3
"""Compares the float32 tensors of two slimtorch safetensors checkpoints
(standard library only: an 8-byte header length, a JSON header, raw data).

  compare_checkpoints.py A B  ->  prints "max_rel_diff <x> over <n> tensors"
where x is the largest |A - B| of a tensor over the largest |A| of that
tensor. Tensors of other dtypes (global step, RNG state) are skipped.
"""
import json
import struct
import sys
from array import array


def read(path):
  """(header, body) of a safetensors file: the JSON header as a dict and the
  bytes after it (each tensor's data_offsets index them)."""
  with open(path, "rb") as f:
    data = f.read()
  (n,) = struct.unpack("<Q", data[:8])
  return json.loads(data[8:8 + n]), data[8 + n:]


def load(path):
  header, body = read(path)
  out = {}
  for name, info in header.items():
    if name == "__metadata__" or info["dtype"] != "F32":
      continue
    begin, end = info["data_offsets"]
    values = array("f")
    values.frombytes(body[begin:end])
    if sys.byteorder != "little":
      values.byteswap()
    out[name] = values
  return out


def main(a_path, b_path):
  a, b = load(a_path), load(b_path)
  assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
  worst = 0.0
  for name, va in a.items():
    vb = b[name]
    scale = max(max(abs(x) for x in va), 1e-12)
    worst = max(worst, max(abs(x - y) for x, y in zip(va, vb)) / scale)
  print("max_rel_diff %.3g over %d tensors" % (worst, len(a)))


if __name__ == "__main__":
  main(*sys.argv[1:])
