#!/usr/bin/env python3
# Loads a safetensors file written by slimtorch (the CheckpointTest
# WritesFileForPythonCheck test leaves one at
# <build>/golden_out/slimtorch.safetensors) with the reference `safetensors`
# package and checks every tensor and the metadata against
# safetensors_common.py, plus a BF16 tensor "bf16" = [1.0, -2.5, 0.0078125].
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

path = sys.argv[1]
expected = golden_tensors()
ok = True

with safe_open(path, framework="numpy") as f:
    meta = f.metadata()
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
raw = dict(safetensors.deserialize(open(path, "rb").read()))
bf = raw["bf16"]
bits = np.frombuffer(bytes(bf["data"]), dtype="<u2").astype(np.uint32) << 16
vals = bits.view(np.float32)
same = bf["dtype"] == "BF16" and bf["shape"] == [3] and vals.tolist() == [1.0, -2.5, 0.0078125]
print(f"bf16     {bf['dtype']:8s} {str(tuple(bf['shape'])):8s} {'ok' if same else 'MISMATCH'} {vals.tolist()}")
ok &= same

print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
