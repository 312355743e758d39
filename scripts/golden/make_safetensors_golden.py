#!/usr/bin/env python3
# Writes tests/golden/python.safetensors with the reference `safetensors`
# package; tests/io/safetensors_test.cc loads it with our reader.
#
# Run (from the repository root):
#   python3 -m venv /tmp/stenv && /tmp/stenv/bin/pip install safetensors numpy
#   /tmp/stenv/bin/python scripts/golden/make_safetensors_golden.py
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors.numpy import save_file  # noqa: E402

from safetensors_common import METADATA, golden_tensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(ROOT, "tests", "golden", "python.safetensors")
save_file(golden_tensors(), out, metadata=METADATA)
print("wrote", out, os.path.getsize(out), "bytes")
