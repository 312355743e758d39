#!/usr/bin/env python3
# Loads a safetensors file written by slimtorch (the CheckpointTest
# WritesFileForPythonCheck test leaves one at
# <build>/golden_out/slimtorch.safetensors) with the reference `safetensors`
# package and checks every tensor and the metadata against
# safetensors_common.py, plus a BF16 tensor "bf16" = [1.0, -2.5, 0.0078125],
# and recomputes the "slimtorch/crc32c" checksum in the metadata.
#
# Run (from the repository root, after ./build/tests/slimtorch_tests):
#   /tmp/stenv/bin/python scripts/golden/check_safetensors.py \
#       build/golden_out/slimtorch.safetensors
import os
import sys

import numpy as np
import safetensors
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_common import METADATA, golden_tensors  # noqa: E402

CHECKSUM_KEY = "slimtorch/crc32c"


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), bit by bit: the reference for slimtorch's."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the RFC 3720 check value


def content_checksum(raw, metadata):
    """slimtorch's "slimtorch/crc32c" of a file (include/slimtorch/io/
    safetensors.h): tensors by name (name, dtype, dims, bytes), then the
    metadata by key, each string followed by a NUL."""
    crc = 0
    for name in sorted(raw, key=lambda n: n.encode()):
        t = raw[name]
        for s in (name, t["dtype"], ",".join(str(d) for d in t["shape"])):
            crc = crc32c(s.encode() + b"\0", crc)
        crc = crc32c(bytes(t["data"]), crc)
    for key in sorted(metadata, key=lambda k: k.encode()):
        if key != CHECKSUM_KEY:
            crc = crc32c(key.encode() + b"\0" + metadata[key].encode() + b"\0", crc)
    return "%08x" % crc


path = sys.argv[1]
expected = golden_tensors()
ok = True
raw = dict(safetensors.deserialize(open(path, "rb").read()))

with safe_open(path, framework="numpy") as f:
    meta = dict(f.metadata())
    stored = meta.pop(CHECKSUM_KEY, None)
    want = content_checksum(raw, meta)
    print(f"checksum {stored} {'ok' if stored == want else 'MISMATCH, computed ' + want}")
    ok &= stored == want
    if meta != METADATA:
        print("metadata mismatch:", meta)
        ok = False
    keys = set(f.keys())
    for name, want in expected.items():
        got = f.get_tensor(name)
        same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
        print(f"{name:8s} {str(got.dtype):8s} {str(got.shape):8s} {'ok' if same else 'MISMATCH'}")
        ok &= same
    extra = keys - set(expected) - {"bf16"}
    if extra:
        print("unexpected tensors:", sorted(extra))
        ok = False

# numpy has no bfloat16: read the raw bytes through the package's parser.
bf = raw["bf16"]
bits = np.frombuffer(bytes(bf["data"]), dtype="<u2").astype(np.uint32) << 16
vals = bits.view(np.float32)
same = bf["dtype"] == "BF16" and bf["shape"] == [3] and vals.tolist() == [1.0, -2.5, 0.0078125]
print(f"bf16     {bf['dtype']:8s} {str(tuple(bf['shape'])):8s} {'ok' if same else 'MISMATCH'} {vals.tolist()}")
ok &= same

print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
